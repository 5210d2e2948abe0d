/* block.c - block-wise transfer (RFC 7959) in wot-fleet, as wot-device does it
 * (wot-device/src/block.c, CONTRACTS §3 "Block-wise"): no state per transfer.
 *   - the request that starts a transfer (GET without Block2 or with NUM 0; a PUT/POST whose
 *     Block1 has M = 0, the last block of its body) is an ordinary request: queued, served
 *     once (its service time), logged once; its response carries block 0 of the body (ETag,
 *     Content-Format, Block2, Size2) when the body is above 1024 bytes or the client asked
 *     for a block size, or echoes the last Block1 (M = 0);
 *   - follow-ups are answered at once, without service time or a log row: a GET with Block2
 *     NUM > 0 gets that block (4.00 past the last one), a Block1 block with M = 1 gets 2.31
 *     Continue. The body of a PUT/POST is not kept (only its size matters here).
 * A body is n bytes of 'x' or the resource's own bytes (its `body` column, fixed for the run),
 * so n names the representation: the ETag is n (4 bytes), as wot-device sets it. */
#include <string.h>

#include "fleet.h"

#define ONE_DATAGRAM 1024   /* larger bodies always go block-wise */
#define SZX_MAX 6           /* 1024-byte blocks (7 is BERT, TCP only) */

/* The response options and payload size of block `block2` (NUM/M/SZX as in the request; 0 =
 * block 0 of 1024) of an n-byte body; returns the options' count, -1 past the last block. */
static int block2_options(uint32_t block2, size_t n, struct fl_opt *opt, size_t *payload,
                          size_t *offset) {
    uint32_t num = block2 >> 4, szx = block2 & 7;
    if (szx > SZX_MAX)
        szx = SZX_MAX;
    size_t size = (size_t)1 << (szx + 4), first = (size_t)num << (szx + 4);
    if (num != 0 && n <= first)
        return -1;
    int more = first + size < n;
    opt[0] = (struct fl_opt){.num = FL_OPT_ETAG, .len = 4,
                             .v = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8),
                                   (uint8_t)n}};
    opt[1] = fl_opt_uint(FL_OPT_CONTENT_FORMAT, 0);   /* text/plain */
    opt[2] = fl_opt_uint(FL_OPT_BLOCK2, num << 4 | (uint32_t)more << 3 | szx);
    opt[3] = fl_opt_uint(FL_OPT_SIZE2, (uint32_t)n);
    *payload = more ? size : n - first;
    *offset = first;
    return 4;
}

static size_t build_block2(struct fl_loop *l, uint8_t type, uint8_t code, uint16_t mid,
                           const uint8_t *token, uint8_t tkl, uint32_t block2,
                           const struct resource *res) {
    struct fl_opt opt[4];
    size_t payload = 0, offset = 0, n = res->payload_bytes;
    if (block2_options(block2, n, opt, &payload, &offset) < 0)
        return fl_coap_build(l->tx, sizeof l->tx, type, FL_BAD_REQUEST, mid, token, tkl, -1,
                             NULL, 0);
    return fl_coap_build_opts_body(l->tx, sizeof l->tx, type, code, mid, token, tkl, opt, 4,
                                   res->body ? res->body + offset : NULL, payload);
}

int fl_block_follow_up(struct fl_loop *l, struct fl_device *d, const struct fl_msg *m,
                       const struct sockaddr_in *peer, const struct resource *res) {
    uint8_t type = m->type == FL_CON ? FL_ACK : FL_NON;
    uint16_t mid = m->type == FL_CON ? m->mid : d->next_mid++;
    size_t len;
    if (m->code == FL_GET && m->has_block2 && (m->block2 >> 4) != 0) {
        len = build_block2(l, type, FL_CONTENT, mid, m->token, m->tkl, m->block2, res);
        l->block2_follow_ups++;
    } else if ((m->code == 2 || m->code == 3) && m->has_block1 && (m->block1 & 0x08)) {
        struct fl_opt opt = fl_opt_uint(FL_OPT_BLOCK1, m->block1);   /* POST 2, PUT 3 */
        len = fl_coap_build_opts(l->tx, sizeof l->tx, type, FL_CONTINUE, mid, m->token, m->tkl,
                                 &opt, 1, 0);
        l->block1_continues++;
    } else {
        return 0;
    }
    fl_send(l, d, peer, len);
    return 1;
}

int fl_block_response(struct fl_loop *l, const struct fl_job *J, uint8_t type, uint16_t mid,
                      size_t *len) {
    size_t n = J->res->payload_bytes;
    if (J->method == FL_GET && J->code == FL_CONTENT && n &&
        (n > ONE_DATAGRAM || J->has_block2)) {
        *len = build_block2(l, type, FL_CONTENT, mid, J->token, J->tkl,
                            J->has_block2 ? J->block2 : SZX_MAX, J->res);
        return 1;
    }
    if ((J->method == 2 || J->method == 3) && J->has_block1) {
        /* RFC 7959 §2.3: the final response echoes the last Block1 (M = 0) */
        struct fl_opt opt = fl_opt_uint(FL_OPT_BLOCK1, J->block1 & ~0x08u);
        *len = fl_coap_build_opts(l->tx, sizeof l->tx, type, (uint8_t)J->code, mid, J->token,
                                  J->tkl, &opt, 1, 0);
        return 1;
    }
    return 0;
}

void fl_block_json(FILE *out, const struct fleet *f) {
    uint64_t b2 = 0, b1 = 0;
    for (int i = 0; i < f->nloops; i++) {
        b2 += f->loops[i].block2_follow_ups;
        b1 += f->loops[i].block1_continues;
    }
    fprintf(out, ", \"blockwise\": {\"block2_follow_ups\": %llu, \"block1_continues\": %llu}",
            (unsigned long long)b2, (unsigned long long)b1);
}
