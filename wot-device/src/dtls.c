/* dtls.c - DTLS-PSK for the device endpoint (dtls.h). The device holds one identity and key;
 * a client presenting another identity is refused during the handshake (the identity
 * callback returns no key), a wrong key fails the handshake's Finished check. Either is
 * counted and (the first few) reported on stderr; the device keeps serving. */
#include "dtls.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define FAIL_REPORTS 5 /* failed handshakes reported on stderr; the rest are only counted */

static struct {
    int on;
    uint8_t id[PSK_MAX_IDENTITY + 1], key[PSK_MAX_KEY];
    size_t idlen, keylen;
    coap_bin_const_t key_bin;
    uint64_t ok, failed, wrong_identity;
} T;

int dtls_configure(const char *identity, const char *key_file) {
    if (psk_credentials("wot-device", identity, key_file, T.key, &T.keylen))
        return 2;
    if (!T.keylen)
        return 0;
    T.idlen = strlen(identity);
    memcpy(T.id, identity, T.idlen);
    T.on = 1;
    return 0;
}

int dtls_enabled(void) { return T.on; }

/* libcoap asks for the key of the identity the client sent: ours only. */
static const coap_bin_const_t *key_for(coap_bin_const_t *identity, coap_session_t *s, void *arg) {
    (void)s, (void)arg;
    if (!identity || identity->length != T.idlen || memcmp(identity->s, T.id, T.idlen)) {
        T.wrong_identity++;
        return NULL;
    }
    return &T.key_bin;
}

int dtls_setup(coap_context_t *ctx) {
    if (!T.on)
        return 0;
    if (!coap_dtls_is_supported()) {
        fprintf(stderr, "wot-device: this build of libcoap has no DTLS (link libcoap-3-openssl)\n");
        return 1;
    }
    T.key_bin.s = T.key;
    T.key_bin.length = T.keylen;
    coap_dtls_spsk_t sp;
    memset(&sp, 0, sizeof sp);
    sp.version = COAP_DTLS_SPSK_SETUP_VERSION;
    sp.validate_id_call_back = key_for;
    sp.psk_info.hint.s = T.id;
    sp.psk_info.hint.length = T.idlen;
    sp.psk_info.key.s = T.key;
    sp.psk_info.key.length = T.keylen;
    if (!coap_context_set_psk2(ctx, &sp)) {
        fprintf(stderr, "wot-device: cannot set up DTLS-PSK in libcoap\n");
        return 1;
    }
    return 0;
}

static void report_failure(coap_session_t *s) {
    if (T.failed > FAIL_REPORTS)
        return;
    char addr[INET6_ADDRSTRLEN + 8] = "?";
    const coap_address_t *a = coap_session_get_addr_remote(s);
    if (a)
        coap_print_addr(a, (uint8_t *)addr, sizeof addr);
    fprintf(stderr, "wot-device: DTLS handshake with %s failed (unknown identity, wrong key "
            "or aborted)%s\n", addr,
            T.failed == FAIL_REPORTS ? "; further failures are only counted" : "");
}

/* A session's handshake outcome is counted once: connected, or failed when the session ends
 * (alert, close, idle timeout, exit) before it connected. OpenSSL drops a Finished that fails
 * the MAC check silently (RFC 6347 §4.1.2.7), so a wrong key shows up as a session that never
 * connects and ends later, not as an alert. The session's app data marks what was counted. */
static char MARK_OK, MARK_FAILED;

void dtls_on_event(coap_session_t *s, coap_event_t ev) {
    if (!T.on)
        return;
    void *mark = coap_session_get_app_data(s);
    if (ev == COAP_EVENT_DTLS_CONNECTED && !mark) {
        T.ok++;
        coap_session_set_app_data(s, &MARK_OK);
    } else if ((ev == COAP_EVENT_DTLS_ERROR || ev == COAP_EVENT_DTLS_CLOSED ||
                ev == COAP_EVENT_SERVER_SESSION_DEL) && !mark) {
        T.failed++;
        coap_session_set_app_data(s, &MARK_FAILED);
        report_failure(s);
    }
}

void dtls_json(FILE *f) {
    if (!T.on) {
        fputs(", \"dtls\": null", f);
        return;
    }
    fprintf(f,
            ", \"dtls\": {\"handshakes_ok\": %llu, \"handshakes_failed\": %llu, "
            "\"unknown_identity\": %llu}",
            (unsigned long long)T.ok, (unsigned long long)T.failed,
            (unsigned long long)T.wrong_identity);
}

void dtls_free(void) { explicit_bzero(&T, sizeof T); }
