/* block.c - block-wise transfer (RFC 7959), see block.h and README "Block-wise transfer".
 *
 * The device does the block-wise protocol itself with libcoap's helpers, not with
 * COAP_BLOCK_USE_LIBCOAP: libcoap 4.3.1 crashes when a Block1 request it reassembled is answered
 * through an async (separate) response (coap_check_async -> handle_request ->
 * coap_handle_request_put_block dereferences NULL), and every request here is async. So:
 *   - the first request of a transfer (GET without Block2 or with NUM 0; the last Block1 block
 *     of a body, M = 0) is an ordinary request: queued, served once (its service time), logged
 *     once; its response carries block 0 (coap_add_data_blocked_response: Block2 + Size2 when
 *     the body is larger than one block or the client asked for a block size), or echoes the
 *     last Block1;
 *   - follow-ups are answered at once, without service time or a device-log row: a GET with
 *     Block2 NUM > 0 gets that block of the (static) representation, a Block1 block with M = 1
 *     gets 2.31 Continue. The body of a PUT/POST is not kept (emulation: only its size matters).
 * Block2 responses are built here as libcoap 4.3.1's coap_add_data_blocked_response() builds
 * them (ETag, Content-Format, Block2, Size2, the block), except for the ETag: libcoap hashes
 * the whole body for every block, so serving one block cost O(body) (67 % of the device's CPU
 * for a 16 KiB body, measured with perf) and a transfer O(body^2 / block size). Every body
 * here is n bytes of 'x' or the resource's own bytes (its `body` column, fixed for the run),
 * so n itself names the representation: the ETag is n (4 bytes).
 * Counters in device-summary.json "blockwise". */
#include "block.h"

#include <stdlib.h>
#include <string.h>

#define ONE_DATAGRAM 1024 /* larger bodies always go block-wise */

static uint8_t *buf;
static size_t cap;
static uint64_t block2_follow_ups, block1_continues;

int block_init(coap_context_t *ctx, const struct resource_set *rs) {
    (void)ctx;
    cap = 1;
    for (size_t i = 0; i < rs->n; i++)
        if (rs->v[i].payload_bytes > cap)
            cap = rs->v[i].payload_bytes;
    buf = malloc(cap);
    if (!buf)
        return -1;
    memset(buf, 'x', cap);
    return 0;
}

const uint8_t *block_payload(size_t n) {
    (void)n;
    return buf;
}

/* The block of an n-byte body the request asks for (block 0 at 1024 bytes when it asks for
 * none), with the options coap_add_data_blocked_response() would add. */
static void add_block2(const coap_pdu_t *req, coap_pdu_t *resp, const struct resource *res) {
    size_t n = res->payload_bytes;
    coap_block_t b = {0, 0, 6};
    if (coap_get_block(req, COAP_OPTION_BLOCK2, &b) && b.num != 0 &&
        n <= ((size_t)b.num << (b.szx + 4))) {
        coap_pdu_set_code(resp, COAP_RESPONSE_CODE(400)); /* past the last block */
        return;
    }
    coap_pdu_set_code(resp, COAP_RESPONSE_CODE_CONTENT);
    uint8_t v[8], etag[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
    /* coap_add_option() inserts an option that is out of order (libcoap 4.3.1) */
    coap_add_option(resp, COAP_OPTION_ETAG, sizeof etag, etag);
    coap_add_option(resp, COAP_OPTION_CONTENT_FORMAT,
                    coap_encode_var_safe(v, sizeof v, COAP_MEDIATYPE_TEXT_PLAIN), v);
    if (coap_write_block_opt(&b, COAP_OPTION_BLOCK2, resp, n) < 0) {
        coap_pdu_set_code(resp, COAP_RESPONSE_CODE(500));
        return;
    }
    coap_add_option(resp, COAP_OPTION_SIZE2, coap_encode_var_safe8(v, sizeof v, n), v);
    coap_add_block(resp, n, res->body ? (const uint8_t *)res->body : buf, b.num, b.szx);
}

void block_add_payload(coap_resource_t *r, coap_session_t *s, const coap_pdu_t *req,
                       const coap_string_t *query, coap_pdu_t *resp,
                       const struct resource *res) {
    (void)r, (void)s, (void)query;
    size_t n = res->payload_bytes;
    coap_opt_iterator_t it;
    if (n <= ONE_DATAGRAM && !coap_check_option(req, COAP_OPTION_BLOCK2, &it)) {
        if (n)
            coap_add_data(resp, n, res->body ? (const uint8_t *)res->body : buf);
        return;
    }
    add_block2(req, resp, res);
}

int block_continue(const struct resource *res, const coap_pdu_t *req, coap_pdu_t *resp) {
    coap_opt_iterator_t it;
    coap_opt_t *o;
    coap_pdu_code_t m = coap_pdu_get_code(req);
    if (m == COAP_REQUEST_CODE_GET && (o = coap_check_option(req, COAP_OPTION_BLOCK2, &it)) &&
        coap_decode_var_bytes(coap_opt_value(o), coap_opt_length(o)) >> 4) {
        add_block2(req, resp, res);
        block2_follow_ups++;
        return 1;
    }
    if ((m == COAP_REQUEST_CODE_PUT || m == COAP_REQUEST_CODE_POST) &&
        (o = coap_check_option(req, COAP_OPTION_BLOCK1, &it))) {
        uint32_t v = coap_decode_var_bytes(coap_opt_value(o), coap_opt_length(o));
        if (!(v & 0x08))
            return 0; /* the last block: the request proper */
        uint8_t b[4];
        coap_pdu_set_code(resp, COAP_RESPONSE_CODE(231));
        coap_add_option(resp, COAP_OPTION_BLOCK1, coap_encode_var_safe(b, sizeof b, v), b);
        block1_continues++;
        return 1;
    }
    return 0;
}

void block_json(FILE *f) {
    fprintf(f, ", \"blockwise\": {\"block2_follow_ups\": %llu, \"block1_continues\": %llu}",
            (unsigned long long)block2_follow_ups, (unsigned long long)block1_continues);
}

void block_echo_block1(const coap_pdu_t *req, coap_pdu_t *resp) {
    coap_opt_iterator_t it;
    coap_opt_t *o = coap_check_option(req, COAP_OPTION_BLOCK1, &it);
    if (!o)
        return;
    /* RFC 7959 2.3: the final response echoes the last Block1 (M = 0) */
    uint32_t v = coap_decode_var_bytes(coap_opt_value(o), coap_opt_length(o)) & ~0x08u;
    uint8_t b[4];
    coap_add_option(resp, COAP_OPTION_BLOCK1, coap_encode_var_safe(b, sizeof b, v), b);
}

void block_free(void) {
    free(buf);
    buf = NULL;
}
