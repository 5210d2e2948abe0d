/* ge_coap_floor.c - libcoap floor for the GE benchmark: a bare libcoap 4.3.1 client keeping
 * WINDOW requests (GET /r, 8-byte token) in flight to ADDR:PORT for COUNT requests.
 * Prints "responses_per_s N". usage: ge_coap_floor ADDR PORT con|non COUNT WINDOW */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <coap3/coap.h>

#include "libcoap_get.h"

static long answered;

static coap_response_t on_response(coap_session_t *s, const coap_pdu_t *sent,
                                   const coap_pdu_t *recv, const coap_mid_t mid) {
    (void)s;
    (void)sent;
    (void)recv;
    (void)mid;
    answered++;
    return COAP_RESPONSE_OK;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: ge_coap_floor ADDR PORT con|non COUNT WINDOW\n");
        return 2;
    }
    coap_startup();
    coap_set_log_level(LOG_EMERG);
    int con = strcmp(argv[3], "con") == 0;
    long n = atol(argv[4]), window = atol(argv[5]);
    coap_address_t dst;
    libcoap_ipv4(&dst, argv[1], argv[2]);
    coap_context_t *ctx = coap_new_context(NULL);
    coap_session_t *s = ctx ? coap_new_client_session(ctx, NULL, &dst, COAP_PROTO_UDP) : NULL;
    if (!s) {
        fprintf(stderr, "ge_coap_floor: no session\n");
        return 1;
    }
    coap_register_response_handler(ctx, on_response);
    coap_session_set_nstart(s, (uint16_t)window);
    long sent = 0;
    double t0 = now_s(), deadline = t0 + 20;
    while (answered < n && now_s() < deadline) {
        while (sent < n && sent - answered < window) {
            libcoap_send_get(s, con, "r");
            sent++;
        }
        coap_io_process(ctx, COAP_IO_NO_WAIT);
    }
    double dt = now_s() - t0;
    printf("responses_per_s %.0f answered %ld sent %ld\n", (double)answered / dt, answered, sent);
    coap_session_release(s);
    coap_free_context(ctx);
    coap_cleanup();
    return 0;
}
