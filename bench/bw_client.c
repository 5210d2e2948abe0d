/* bw_client.c - block-wise transfers (RFC 7959) done by libcoap 4.3.1's own client code, for
 * bench/blockwise_bench.py: COAP_BLOCK_USE_LIBCOAP | COAP_BLOCK_SINGLE_BODY, CON requests,
 * libcoap's retransmission. One transfer at a time: a GET with Block2 (NUM 0, the size asked
 * for) or a PUT of BYTES 'x' with Block1; the time is from coap_send() to the response handler
 * seeing the whole body (GET) or the final response (PUT), CLOCK_MONOTONIC.
 * Prints one line per transfer: "ns code bytes" ("-1 timeout 0" after TIMEOUT_S or a NACK).
 * Loopback only; bounded: N <= 10000, TIMEOUT_S <= 120.
 * usage: bw_client HOST PORT PATH get|put BYTES BLOCK N GAP_MS TIMEOUT_S */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <coap3/coap.h>

#include "clock.h"

static int done;
static int64_t t_done;
static int code;
static size_t got;

static coap_response_t on_response(coap_session_t *s, const coap_pdu_t *sent,
                                   const coap_pdu_t *recv, const coap_mid_t mid) {
    (void)s, (void)sent, (void)mid;
    int c = coap_pdu_get_code(recv);
    if (c == COAP_RESPONSE_CODE_CONTINUE) /* libcoap sends the next Block1 block itself */
        return COAP_RESPONSE_OK;
    size_t len = 0, off = 0, total = 0;
    const uint8_t *data;
    if (coap_get_data_large(recv, &len, &data, &off, &total))
        got = off + len;
    t_done = mono_ns();
    code = c;
    done = 1;
    return COAP_RESPONSE_OK;
}

static void on_nack(coap_session_t *s, const coap_pdu_t *sent, const coap_nack_reason_t r,
                    const coap_mid_t mid) {
    (void)s, (void)sent, (void)r, (void)mid;
    done = -1;
}

int main(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: bw_client HOST PORT PATH get|put BYTES BLOCK N GAP_MS TIMEOUT_S\n");
        return 2;
    }
    int put = strcmp(argv[4], "put") == 0;
    long bytes = atol(argv[5]), bs = atol(argv[6]), n = atol(argv[7]), gap_ms = atol(argv[8]);
    long tmo = atol(argv[9]);
    coap_address_t dst;
    coap_address_init(&dst);
    dst.addr.sin.sin_family = AF_INET;
    dst.addr.sin.sin_port = htons((uint16_t)atoi(argv[2]));
    if (inet_pton(AF_INET, argv[1], &dst.addr.sin.sin_addr) != 1 ||
        (ntohl(dst.addr.sin.sin_addr.s_addr) >> 24) != 127 || bytes < 0 || bytes > (1 << 20) ||
        bs < 16 || bs > 1024 || (bs & (bs - 1)) || n < 1 || n > 10000 || gap_ms < 0 ||
        tmo < 1 || tmo > 120 || (strcmp(argv[4], "get") && !put)) {
        fprintf(stderr, "bw_client: bad arguments (loopback IPv4, BLOCK 16..1024 power of two)\n");
        return 2;
    }
    coap_startup();
    coap_set_log_level(getenv("BWDEBUG") ? LOG_DEBUG : LOG_EMERG);
    coap_context_t *ctx = coap_new_context(NULL);
    if (!ctx)
        return 1;
    /* before the session: a session takes the context's block mode when it is created */
    coap_context_set_block_mode(ctx, COAP_BLOCK_USE_LIBCOAP | COAP_BLOCK_SINGLE_BODY);
    coap_session_t *ses = coap_new_client_session(ctx, NULL, &dst, COAP_PROTO_UDP);
    uint8_t *body = malloc((size_t)bytes + 1);
    if (!ses || !body)
        return 1;
    memset(body, 'x', (size_t)bytes);
    coap_register_response_handler(ctx, on_response);
    coap_register_nack_handler(ctx, on_nack);
    unsigned szx = 0;
    while ((16u << szx) < (unsigned)bs)
        szx++;
    for (long i = 0; i < n; i++) {
        coap_pdu_t *pdu = coap_new_pdu(COAP_MESSAGE_CON, put ? COAP_REQUEST_CODE_PUT
                                                             : COAP_REQUEST_CODE_GET, ses);
        uint8_t tok[8];
        size_t tl;
        coap_session_new_token(ses, &tl, tok);
        coap_add_token(pdu, tl, tok);
        coap_add_option(pdu, COAP_OPTION_URI_PATH, strlen(argv[3]), (const uint8_t *)argv[3]);
        uint8_t b[4];
        unsigned m = put && bytes > bs;
        coap_add_option(pdu, put ? COAP_OPTION_BLOCK1 : COAP_OPTION_BLOCK2,
                        coap_encode_var_safe(b, sizeof b, (m << 3) | szx), b);
        if (put)
            coap_add_data_large_request(ses, pdu, (size_t)bytes, body, NULL, NULL);
        done = 0, got = 0, code = 0;
        int64_t t0 = mono_ns(), end = t0 + tmo * NS_PER_S;
        if (coap_send(ses, pdu) == COAP_INVALID_MID) {
            printf("-1 timeout 0\n");
            continue;
        }
        while (!done && mono_ns() < end)
            coap_io_process(ctx, 100);
        if (done == 1)
            printf("%lld %d.%02d %zu\n", (long long)(t_done - t0), code >> 5, code & 31, got);
        else
            printf("-1 timeout 0\n");
        fflush(stdout);
        if (gap_ms) {
            struct timespec ts = {gap_ms / 1000, (gap_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    coap_free_context(ctx);
    coap_cleanup();
    free(body);
    return 0;
}
