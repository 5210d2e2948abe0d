/* block.c - block-wise transfer (RFC 7959) in the GE, enabled by --block-size N (16..1024).
 *
 * Before the start (may allocate): every GET carries Block2 (NUM 0, the configured SZX: early
 * negotiation of the block size) and every PUT/POST whose body is larger than one block
 * carries Block1 (NUM 0, M 1) with the first block of the body. The Block option is the last
 * option of the datagram and its value is always encoded on 3 bytes (NUM up to 2^20), so the
 * follow-up requests are made by patching the request's own datagram in the arena in place:
 * new message ID, the Block value and, for the last Block1 block, a shorter length (the body
 * is all 'x'). Follow-up message IDs come from a per-(socket, endpoint) counter that continues
 * after the first-datagram range of that pair.
 *
 * Hot path (no allocation): loop.c hands every response of a block-wise request to
 * block_follow_up(). 2.05 with Block2 M=1 (GET) or 2.31 Continue with Block1 (PUT/POST) ->
 * the next block is prepared (NUM + 1 at the server's SZX) and loop.c sends it; anything else
 * is the final response and finishes the request as usual, so its outcome and response time
 * cover the whole transfer. --timeout-ms is a deadline for the whole transfer; with
 * --retransmit each block is retransmitted per RFC 7252 on its own. Written at the end:
 * blockwise.csv (index,kind,body_bytes,block_size,blocks,retransmissions). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <coap3/coap.h>

#include "ge.h"

enum { K_NONE = 0, K_BLOCK2 = 1, K_BLOCK1 = 2 };

typedef struct {
    uint32_t body;    /* PUT/POST body bytes; GET: response bytes received so far */
    uint32_t num;     /* current block number */
    uint32_t blocks;  /* datagrams exchanged (requests sent, first one included) */
    uint16_t val_off; /* offset of the 3-byte Block value in the datagram */
    uint16_t hdr_len; /* datagram length up to and including the payload marker (Block1) */
    uint8_t kind, szx, rtx, resp_szx;
    int64_t due;      /* absolute ns of the current block's next retransmission */
} blk_t;

struct block_s {
    uint32_t *bodies; /* while loading: body bytes per request */
    size_t bodies_cap;
    blk_t *b;
    uint16_t *next_mid; /* per pair: the next follow-up message ID */
    uint64_t follow_ups, mid_overflow_pairs;
};

static int szx_of(int size) {
    int s = 0;
    while ((16 << s) < size)
        s++;
    return s;
}

int block_note_body(ge_t *g, uint32_t idx, uint64_t body) {
    if (!g->block_size)
        return 0;
    if (!g->blk && !(g->blk = calloc(1, sizeof *g->blk)))
        return -1;
    struct block_s *B = g->blk;
    if (idx >= B->bodies_cap) {
        size_t nc = B->bodies_cap ? B->bodies_cap * 2 : 4096;
        while (nc <= idx)
            nc *= 2;
        uint32_t *p = realloc(B->bodies, nc * sizeof *p);
        if (!p)
            return -1;
        B->bodies = p;
        B->bodies_cap = nc;
    }
    B->bodies[idx] = (uint32_t)body;
    return 0;
}

static int last_option(const uint8_t *o, size_t len) {
    int num = 0;
    size_t off = 0;
    while (off < len) {
        coap_option_t opt;
        size_t sz = coap_opt_parse((const coap_opt_t *)(o + off), len - off, &opt);
        if (sz == 0)
            break;
        num += opt.delta;
        off += sz;
    }
    return num;
}

int block_prepare(ge_t *g) {
    struct block_s *B = g->blk;
    if (!B)
        return 0;
    B->b = calloc(g->n ? g->n : 1, sizeof *B->b);
    if (!B->b) {
        fprintf(stderr, "gateway-emulator: out of memory preparing block-wise state\n");
        return 1;
    }
    int szx = szx_of(g->block_size);
    for (size_t i = 0; i < g->n; i++) {
        blk_t *b = &B->b[i];
        b->szx = (uint8_t)szx;
        b->body = i < B->bodies_cap ? B->bodies[i] : 0;
        int m = wire_code(g->reqs[i].method);
        if (m == M_GET)
            b->kind = K_BLOCK2, b->body = 0;
        else if ((m == M_PUT || m == M_POST) && b->body > (uint32_t)g->block_size)
            b->kind = K_BLOCK1;
    }
    free(B->bodies);
    B->bodies = NULL;
    return 0;
}

size_t block_first_payload(const ge_t *g, uint32_t idx, size_t small) {
    if (!g->blk || !g->blk->b)
        return small;
    return g->blk->b[idx].kind == K_BLOCK1 ? (size_t)g->block_size : small;
}

size_t block_opts(ge_t *g, uint32_t idx, const uint8_t *uopts, size_t ulen, uint8_t *out,
                  size_t cap) {
    blk_t *b = g->blk && g->blk->b ? &g->blk->b[idx] : NULL;
    if (!b || b->kind == K_NONE || ulen + 6 > cap) {
        memcpy(out, uopts, ulen);
        return ulen;
    }
    memcpy(out, uopts, ulen);
    int num = b->kind == K_BLOCK2 ? COAP_OPTION_BLOCK2 : COAP_OPTION_BLOCK1;
    int delta = num - last_option(uopts, ulen);
    size_t p = ulen;
    if (delta < 13) {
        out[p++] = (uint8_t)(delta << 4 | 3);
    } else {
        out[p++] = (uint8_t)(13 << 4 | 3);
        out[p++] = (uint8_t)(delta - 13);
    }
    uint32_t v = (b->kind == K_BLOCK1 ? 1u << 3 : 0) | b->szx; /* NUM 0; M for Block1 */
    b->val_off = (uint16_t)(12 + p);                             /* after header + token */
    out[p++] = (uint8_t)(v >> 16);
    out[p++] = (uint8_t)(v >> 8);
    out[p++] = (uint8_t)v;
    b->hdr_len = (uint16_t)(12 + p + 1);
    b->blocks = 1;
    return p;
}

int block_prepare_mids(ge_t *g, size_t npairs) {
    if (!g->blk)
        return 0;
    g->blk->next_mid = malloc((npairs ? npairs : 1) * sizeof *g->blk->next_mid);
    if (!g->blk->next_mid)
        return 1;
    for (size_t p = 0; p < npairs; p++)
        g->blk->next_mid[p] = (uint16_t)(g->pairs[p].mid_base + g->pairs[p].count);
    return 0;
}

int block_follow_up(ge_t *g, uint32_t idx, const void *pdu_v, int code) {
    if (!g->blk)
        return 0;
    const coap_pdu_t *pdu = pdu_v;
    blk_t *b = &g->blk->b[idx];
    if (b->kind == K_NONE)
        return 0;
    coap_opt_iterator_t it;
    coap_opt_t *o;
    uint32_t v, n, size;
    int more;
    /* the block this response answers must be the one in flight: a late copy of an earlier
     * block's response (e.g. a retransmitted separate response) is ignored (-1) */
    int cur_szx = b->blocks > 1 ? b->resp_szx : b->szx;
    uint64_t want = (uint64_t)b->num << (cur_szx + 4);
    if (b->kind == K_BLOCK2) {
        o = code == COAP_RESPONSE_CODE_CONTENT ? coap_check_option(pdu, COAP_OPTION_BLOCK2, &it)
                                               : NULL;
        v = o ? coap_decode_var_bytes(coap_opt_value(o), coap_opt_length(o)) : 0;
        if (o && ((uint64_t)(v >> 4) << ((v & 7) + 4)) != want)
            return -1;
        size_t dl;
        const uint8_t *dp;
        if (coap_get_data(pdu, &dl, &dp))
            b->body += (uint32_t)dl;
        if (!o || !(v & 0x08) || (v & 7) == 7)
            return 0; /* the last block (or BERT, not for UDP), or no block-wise answer */
        b->resp_szx = (uint8_t)(v & 7);
        n = (v >> 4) + 1;
        more = 0;
        size = 0;
    } else {
        if (code != COAP_RESPONSE_CODE(231) || !(o = coap_check_option(pdu, COAP_OPTION_BLOCK1, &it)))
            return 0;
        v = coap_decode_var_bytes(coap_opt_value(o), coap_opt_length(o));
        if ((v & 7) == 7)
            return 0;
        if (((uint64_t)(v >> 4) << ((v & 7) + 4)) != want)
            return -1;
        b->resp_szx = (uint8_t)(v & 7);
        uint32_t bs = 16u << (v & 7), off;
        n = (v >> 4) + 1;
        off = n * bs;
        if (off >= b->body)
            return 0; /* nothing left to send: treat as final */
        size = b->body - off < bs ? b->body - off : bs;
        more = off + size < b->body;
    }
    if (n >= (1u << 20))
        return 0;
    req_t *r = &g->reqs[idx];
    uint8_t *d = g->arena + r->dgram_off;
    uint16_t mid = g->blk->next_mid[r->pair]++;
    if ((uint16_t)(mid - g->pairs[r->pair].mid_base) < g->pairs[r->pair].count)
        g->blk->mid_overflow_pairs++; /* the follow-ups wrapped into the first MIDs */
    d[2] = (uint8_t)(mid >> 8);
    d[3] = (uint8_t)mid;
    r->mid = mid;
    uint32_t nv = n << 4 | (uint32_t)more << 3 | b->resp_szx;
    d[b->val_off] = (uint8_t)(nv >> 16);
    d[b->val_off + 1] = (uint8_t)(nv >> 8);
    d[b->val_off + 2] = (uint8_t)nv;
    if (b->kind == K_BLOCK1)
        r->dgram_len = (uint16_t)(b->hdr_len + size);
    b->num = n;
    b->blocks++;
    b->rtx = 0;
    g->blk->follow_ups++;
    return 1;
}

int block_rtx(ge_t *g, uint32_t idx, int64_t *due) {
    if (!g->blk)
        return -1;
    blk_t *b = &g->blk->b[idx];
    if (b->kind == K_NONE || b->blocks <= 1)
        return -1; /* the first block: loop.c's own counters */
    if (due)
        *due = b->due;
    return b->rtx;
}

void block_rtx_set(ge_t *g, uint32_t idx, int64_t due, int sent) {
    blk_t *b = &g->blk->b[idx];
    b->due = due;
    if (sent)
        b->rtx++;
}

int block_write(const ge_t *g) {
    const struct block_s *B = g->blk;
    if (!B || !B->b)
        return 0;
    char path[OUT_PATH_MAX];
    FILE *f = outfile_open(g, "blockwise.csv", path);
    if (!f)
        return 1;
    fputs("index,kind,body_bytes,block_size,blocks,retransmissions\n", f);
    for (size_t i = 0; i < g->n; i++) {
        const blk_t *b = &B->b[i];
        if (b->kind == K_NONE)
            continue;
        int szx = b->blocks > 1 ? b->resp_szx : b->szx;
        fprintf(f, "%zu,%s,%u,%d,%u,%u\n", i, b->kind == K_BLOCK2 ? "block2" : "block1", b->body,
                16 << szx, b->blocks, g->reqs[i].retrans);
    }
    if (outfile_close(f, path))
        return 1;
    if (B->mid_overflow_pairs)
        fprintf(stderr, "gateway-emulator: warning: %llu block follow-ups reused message IDs of "
                        "the same endpoint (more than 65536 datagrams per source port)\n",
                (unsigned long long)B->mid_overflow_pairs);
    return 0;
}

void block_free(ge_t *g) {
    struct block_s *B = g->blk;
    if (!B)
        return;
    free(B->bodies);
    free(B->b);
    free(B->next_mid);
    free(B);
    g->blk = NULL;
}
