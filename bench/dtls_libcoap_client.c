/* dtls_libcoap_client.c - libcoap's own client side for bench/dtls_bench.py (libcoap 4.3.1,
 * OpenSSL build), so the GE's DTLS figures sit next to libcoap's measured in the same run.
 *   hs   ADDR PORT udp|dtls COUNT           COUNT sequential sessions, one CON GET / each:
 *                                           prints "hs_us" (session start -> DTLS connected
 *                                           event) and "first_us" (-> first response) per session
 *   rate ADDR PORT udp|dtls COUNT WINDOW    one session (handshake first, not timed), COUNT
 *                                           NON GETs with WINDOW in flight: "responses_per_s N"
 * PSK identity / key from the environment: PSK_ID, PSK_KEY. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <coap3/coap.h>

#include "libcoap_get.h"

static long answered;
static double connected_at;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static coap_response_t on_response(coap_session_t *s, const coap_pdu_t *sent,
                                   const coap_pdu_t *recv, const coap_mid_t mid) {
    (void)s, (void)sent, (void)recv, (void)mid;
    answered++;
    return COAP_RESPONSE_OK;
}

static int on_event(coap_session_t *s, const coap_event_t ev) {
    (void)s;
    if (ev == COAP_EVENT_DTLS_CONNECTED)
        connected_at = now_s();
    return 0;
}

static coap_session_t *open_session(coap_context_t *ctx, coap_address_t *dst, int dtls) {
    if (!dtls)
        return coap_new_client_session(ctx, NULL, dst, COAP_PROTO_UDP);
    static coap_dtls_cpsk_t psk;
    memset(&psk, 0, sizeof psk);
    psk.version = COAP_DTLS_CPSK_SETUP_VERSION;
    const char *id = getenv("PSK_ID"), *key = getenv("PSK_KEY");
    psk.psk_info.identity.s = (const uint8_t *)(id ? id : "");
    psk.psk_info.identity.length = id ? strlen(id) : 0;
    psk.psk_info.key.s = (const uint8_t *)(key ? key : "");
    psk.psk_info.key.length = key ? strlen(key) : 0;
    return coap_new_client_session_psk2(ctx, NULL, dst, COAP_PROTO_DTLS, &psk);
}

int main(int argc, char **argv) {
    if (argc < 6 || (strcmp(argv[1], "rate") == 0 && argc != 7)) {
        fprintf(stderr, "usage: dtls_libcoap_client hs|rate ADDR PORT udp|dtls COUNT [WINDOW]\n");
        return 2;
    }
    coap_startup();
    coap_set_log_level(LOG_EMERG);
    int dtls = strcmp(argv[4], "dtls") == 0;
    long n = atol(argv[5]);
    coap_address_t dst;
    libcoap_ipv4(&dst, argv[2], argv[3]);
    coap_context_t *ctx = coap_new_context(NULL);
    if (!ctx)
        return 1;
    coap_register_response_handler(ctx, on_response);
    coap_register_event_handler(ctx, on_event);
    if (strcmp(argv[1], "hs") == 0) {
        for (long i = 0; i < n; i++) {
            answered = 0;
            connected_at = 0;
            double t0 = now_s();
            coap_session_t *s = open_session(ctx, &dst, dtls);
            if (!s)
                return 1;
            libcoap_send_get(s, 1, NULL); /* libcoap holds it until the handshake is done */
            while (!answered && now_s() < t0 + 5)
                coap_io_process(ctx, 100);
            double t1 = now_s();
            printf("hs_us %.1f first_us %.1f\n", dtls && connected_at ? (connected_at - t0) * 1e6 : 0,
                   answered ? (t1 - t0) * 1e6 : -1);
            coap_session_release(s);
            coap_io_process(ctx, COAP_IO_NO_WAIT);
        }
    } else {
        long window = atol(argv[6]), sent = 0;
        coap_session_t *s = open_session(ctx, &dst, dtls);
        if (!s)
            return 1;
        libcoap_send_get(s, 1, NULL); /* the handshake and one exchange before the clock starts */
        double w = now_s();
        while (!answered && now_s() < w + 5)
            coap_io_process(ctx, 100);
        if (!answered) {
            fprintf(stderr, "dtls_libcoap_client: no first response\n");
            return 1;
        }
        answered = 0;
        coap_session_set_nstart(s, (uint16_t)window);
        double t0 = now_s(), deadline = t0 + 20;
        while (answered < n && now_s() < deadline) {
            while (sent < n && sent - answered < window) {
                libcoap_send_get(s, 0, NULL);
                sent++;
            }
            coap_io_process(ctx, COAP_IO_NO_WAIT);
        }
        double dt = now_s() - t0;
        printf("responses_per_s %.0f answered %ld sent %ld\n", (double)answered / dt, answered,
               sent);
        coap_session_release(s);
    }
    coap_free_context(ctx);
    coap_cleanup();
    return 0;
}
