/* dtls_load.c - bounded closed-loop CoAP load over plain UDP or DTLS-PSK (libcoap client),
 * used by dtls_device_bench.py to compare a server's CPU cost per request with and without
 * DTLS. CON GETs, WINDOW in flight on one session (NSTART = WINDOW); mode "dtls-new" opens a
 * new DTLS session for every request instead (a handshake each). Stops after COUNT responses
 * or SECONDS, whichever first. Loopback IPv4 only. The key is read from a file (one trailing
 * newline stripped), never from argv.
 * usage: dtls_load HOST PORT PATH plain|dtls|dtls-new COUNT WINDOW SECONDS [IDENTITY KEYFILE]
 * prints: "responses seconds failed" */
#include <arpa/inet.h>
#include <coap3/coap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long done, failed, inflight;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static coap_response_t on_response(coap_session_t *s, const coap_pdu_t *sent,
                                   const coap_pdu_t *recv, const coap_mid_t mid) {
    (void)s, (void)sent, (void)mid;
    if (COAP_RESPONSE_CLASS(coap_pdu_get_code(recv)) == 2)
        done++;
    else
        failed++;
    inflight--;
    return COAP_RESPONSE_OK;
}

static void on_nack(coap_session_t *s, const coap_pdu_t *sent, const coap_nack_reason_t r,
                    const coap_mid_t mid) {
    (void)s, (void)sent, (void)r, (void)mid;
    failed++;
    inflight--;
}

static int send_get(coap_session_t *s, const char *path) {
    coap_pdu_t *p = coap_new_pdu(COAP_MESSAGE_CON, COAP_REQUEST_CODE_GET, s);
    uint8_t tok[8];
    size_t tl;
    if (!p)
        return -1;
    coap_session_new_token(s, &tl, tok);
    coap_add_token(p, tl, tok);
    coap_add_option(p, COAP_OPTION_URI_PATH, strlen(path), (const uint8_t *)path);
    if (coap_send(s, p) == COAP_INVALID_MID)
        return -1;
    inflight++;
    return 0;
}

static size_t read_key(const char *path, uint8_t *key, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(key, 1, cap, f);
    fclose(f);
    if (n && key[n - 1] == '\n')
        n--;
    return n;
}

int main(int argc, char **argv) {
    if (argc != 8 && argc != 10) {
        fputs("usage: dtls_load HOST PORT PATH plain|dtls|dtls-new COUNT WINDOW SECONDS "
              "[IDENTITY KEYFILE]\n", stderr);
        return 2;
    }
    const char *mode = argv[4], *path = argv[3];
    long count = atol(argv[5]), window = atol(argv[6]);
    double secs = atof(argv[7]);
    int dtls = strcmp(mode, "plain") != 0, fresh = strcmp(mode, "dtls-new") == 0;
    coap_address_t dst;
    coap_address_init(&dst);
    dst.addr.sin.sin_family = AF_INET;
    dst.addr.sin.sin_port = htons((uint16_t)atoi(argv[2]));
    dst.size = sizeof(struct sockaddr_in);
    if (inet_pton(AF_INET, argv[1], &dst.addr.sin.sin_addr) != 1 ||
        (ntohl(dst.addr.sin.sin_addr.s_addr) >> 24) != 127 || count < 1 || count > 10000000 ||
        window < 1 || window > 64 || secs <= 0 || secs > 60 || (dtls && argc != 10)) {
        fputs("dtls_load: loopback IPv4, COUNT 1..1e7, WINDOW 1..64, SECONDS 0..60; dtls "
              "modes need IDENTITY KEYFILE\n", stderr);
        return 2;
    }
    static uint8_t key[64];
    coap_dtls_cpsk_t cp;
    memset(&cp, 0, sizeof cp);
    if (dtls) {
        size_t kl = read_key(argv[9], key, sizeof key);
        if (!kl) {
            fprintf(stderr, "dtls_load: cannot read a key from %s\n", argv[9]);
            return 2;
        }
        cp.version = COAP_DTLS_CPSK_SETUP_VERSION;
        cp.psk_info.identity.s = (const uint8_t *)argv[8];
        cp.psk_info.identity.length = strlen(argv[8]);
        cp.psk_info.key.s = key;
        cp.psk_info.key.length = kl;
    }
    coap_startup();
    coap_set_log_level(LOG_ERR);
    coap_context_t *ctx = coap_new_context(NULL);
    if (!ctx)
        return 1;
    coap_register_response_handler(ctx, on_response);
    coap_register_nack_handler(ctx, on_nack);
    coap_session_t *s = NULL;
    double t0 = now(), end = t0 + secs;
    long sent = 0;
    while ((done + failed) < count && now() < end) {
        if (!s || (fresh && inflight == 0)) {
            if (s)
                coap_session_release(s);
            s = dtls ? coap_new_client_session_psk2(ctx, NULL, &dst, COAP_PROTO_DTLS, &cp)
                     : coap_new_client_session(ctx, NULL, &dst, COAP_PROTO_UDP);
            if (!s)
                return 1;
            coap_session_set_nstart(s, (uint16_t)(fresh ? 1 : window));
        }
        long room = fresh ? 1 : window;
        while (inflight < room && sent < count) {
            if (send_get(s, path))
                break;
            sent++;
        }
        coap_io_process(ctx, 100);
    }
    double took = now() - t0;
    if (s)
        coap_session_release(s);
    coap_free_context(ctx);
    coap_cleanup();
    printf("%ld %.6f %ld\n", done, took, failed);
    return 0;
}
