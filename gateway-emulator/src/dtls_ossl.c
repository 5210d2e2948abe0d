/* dtls_ossl.c - the OpenSSL glue: the DTLS 1.2 PSK client context, a BIO method over the GE's
 * own UDP socket (each record OpenSSL writes is one sendto() to the session's endpoint, stamped
 * with CLOCK_MONOTONIC right before; a read hands over exactly the datagram being fed), the PSK
 * and alert callbacks, and the first failure reason for the summary. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "clock.h" /* common/clock.h */
#include "dtls_int.h"

#define CIPHERS "PSK:!NULL" /* what libcoap 4.3.1's OpenSSL build offers and accepts */

ge_t *dtls_g;

void dtls_note_failure(struct dtls_s *D, const char *fmt, const char *a) {
    if (!D->failure[0])
        snprintf(D->failure, sizeof D->failure, fmt, a);
}

/* ---- the BIO over the GE's socket ---- */
static int bio_write(BIO *b, const char *data, int len) {
    sess_t *s = BIO_get_data(b);
    const endpoint_t *e = &dtls_g->eps[s->ep];
    s->tx_ns = mono_ns();
    if (sendto(dtls_g->socks[s->sock], data, (size_t)len, 0, (const struct sockaddr *)&e->addr,
               e->addrlen) < 0 && !s->tx_errno)
        s->tx_errno = errno ? errno : EIO;
    return len; /* a datagram that did not leave is lost, as on the wire (DTLS copes) */
}

static int bio_read(BIO *b, char *out, int outl) {
    sess_t *s = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (!s->in) {
        BIO_set_retry_read(b);
        return -1;
    }
    size_t n = s->in_len < (size_t)outl ? s->in_len : (size_t)outl;
    memcpy(out, s->in, n);
    s->in = NULL;
    return (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr) {
    (void)num, (void)ptr;
    sess_t *s = BIO_get_data(b);
    int v4 = s && s->family == AF_INET;
    switch (cmd) {
    case BIO_CTRL_FLUSH:
    case BIO_CTRL_DGRAM_SET_NEXT_TIMEOUT:
        return 1;
    case BIO_CTRL_DGRAM_GET_MTU_OVERHEAD:
        return v4 ? 28 : 48;
    case BIO_CTRL_DGRAM_QUERY_MTU:
    case BIO_CTRL_DGRAM_GET_FALLBACK_MTU:
        return v4 ? 1500 - 28 : 1280 - 48;
    default:
        return 0;
    }
}

static int bio_create(BIO *b) {
    BIO_set_init(b, 1);
    return 1;
}

/* ---- PSK and diagnostics callbacks ---- */
static unsigned int psk_cb(SSL *ssl, const char *hint, char *identity, unsigned int max_id,
                           unsigned char *psk, unsigned int max_psk) {
    (void)ssl, (void)hint; /* libcoap's server sends the hint "CoAP"; the identity is ours */
    size_t il = strlen(dtls_g->dtls_opt.identity);
    if (il + 1 > max_id || dtls_g->dtls_opt.keylen > max_psk)
        return 0;
    memcpy(identity, dtls_g->dtls_opt.identity, il + 1);
    memcpy(psk, dtls_g->dtls_opt.key, dtls_g->dtls_opt.keylen);
    return (unsigned int)dtls_g->dtls_opt.keylen;
}

static void info_cb(const SSL *ssl, int where, int ret) {
    (void)ssl;
    if ((where & SSL_CB_ALERT) && (where & SSL_CB_READ) && dtls_g->dtls)
        dtls_note_failure(dtls_g->dtls, "received the server's alert '%s'",
                     SSL_alert_desc_string_long(ret));
}

void dtls_note_ssl_error(struct dtls_s *D) {
    unsigned long e = ERR_get_error();
    char buf[200];
    if (e) {
        ERR_error_string_n(e, buf, sizeof buf);
        dtls_note_failure(D, "OpenSSL: %s", buf);
    }
    ERR_clear_error();
}

int dtls_ctx_setup(struct dtls_s *D) {
    OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, NULL); /* same behaviour in FROM scratch */
    D->ctx = SSL_CTX_new(DTLS_client_method());
    D->meth = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "ge-dgram");
    if (!D->ctx || !D->meth)
        return -1;
    BIO_meth_set_write(D->meth, bio_write);
    BIO_meth_set_read(D->meth, bio_read);
    BIO_meth_set_ctrl(D->meth, bio_ctrl);
    BIO_meth_set_create(D->meth, bio_create);
    if (!SSL_CTX_set_min_proto_version(D->ctx, DTLS1_2_VERSION) ||
        !SSL_CTX_set_max_proto_version(D->ctx, DTLS1_2_VERSION) ||
        !SSL_CTX_set_cipher_list(D->ctx, CIPHERS))
        return -1;
    SSL_CTX_set_psk_client_callback(D->ctx, psk_cb);
    SSL_CTX_set_info_callback(D->ctx, info_cb);
    SSL_CTX_set_session_cache_mode(D->ctx, SSL_SESS_CACHE_OFF);
    return 0;
}
