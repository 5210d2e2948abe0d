/* dtls_session.c - DTLS sessions on the loop thread: begin (ClientHello) and close, the
 * per-request slot ring, the handshaking list and handshake records, feeding received
 * datagrams, encrypting requests and empty messages, OpenSSL's handshake timers. Nothing of
 * ours is allocated here (OpenSSL's own allocations are counted, dtls_alloc.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/ssl.h>

#include "clock.h" /* common/clock.h */
#include "dtls_int.h"

static void hsl_add(struct dtls_s *D, uint32_t i) {
    D->sess[i].hpos = (int32_t)D->nhsl;
    D->hsl[D->nhsl++] = i;
}

static void hsl_del(struct dtls_s *D, uint32_t i) {
    sess_t *s = &D->sess[i];
    if (s->hpos < 0)
        return;
    uint32_t last = D->hsl[--D->nhsl];
    D->hsl[s->hpos] = last;
    D->sess[last].hpos = s->hpos;
    s->hpos = -1;
}

void dtls_hs_end(ge_t *g, sess_t *s, int outcome, int64_t now) {
    if (s->hs < 0)
        return;
    hsrec_t *h = &g->dtls->hs[s->hs];
    if (!h->outcome) {
        h->end = now;
        h->outcome = (uint8_t)outcome;
    }
}

/* new SSL object on session i, ClientHello sent; record a handshake if rec (request rq) */
int dtls_sess_begin(ge_t *g, uint32_t i, int rec, int64_t rq, uint32_t device) {
    struct dtls_s *D = g->dtls;
    sess_t *s = &D->sess[i];
    s->ssl = SSL_new(D->ctx);
    BIO *b = s->ssl ? BIO_new(D->meth) : NULL;
    if (!b) {
        if (s->ssl)
            SSL_free(s->ssl);
        s->ssl = NULL;
        dtls_note_ssl_error(D);
        return -1;
    }
    BIO_set_data(b, s);
    SSL_set_bio(s->ssl, b, b);
    SSL_set_options(s->ssl, SSL_OP_NO_QUERY_MTU);
    DTLS_set_link_mtu(s->ssl, s->family == AF_INET ? 1500 : 1280);
    SSL_set_connect_state(s->ssl);
    s->state = S_HANDSHAKE;
    s->in = NULL;
    s->tx_errno = 0;
    s->tx_ns = mono_ns();
    s->hs = -1;
    if (rec && D->nhs < D->hs_cap) {
        hsrec_t *h = &D->hs[D->nhs];
        memset(h, 0, sizeof *h);
        h->req = rq;
        h->session = (uint32_t)(D->mode == DTLS_REUSE ? i : D->nhs);
        h->device = device;
        h->ep = s->ep;
        s->hs = (int32_t)D->nhs++;
    }
    hsl_add(D, i);
    int rc = SSL_do_handshake(s->ssl); /* writes the ClientHello through bio_write */
    if (s->hs >= 0)
        D->hs[s->hs].start = s->tx_ns;
    if (rc <= 0) {
        int e = SSL_get_error(s->ssl, rc);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
            dtls_note_ssl_error(D);
            s->state = S_FAILED;
            hsl_del(D, i);
            dtls_hs_end(g, s, H_FAILED, s->tx_ns);
        }
    }
    return 0;
}

void dtls_sess_close(ge_t *g, uint32_t i) {
    struct dtls_s *D = g->dtls;
    sess_t *s = &D->sess[i];
    hsl_del(D, i);
    if (s->ssl) {
        if (s->state == S_UP)
            SSL_shutdown(s->ssl); /* close_notify: the server drops its session at once */
        SSL_free(s->ssl);
    }
    s->ssl = NULL;
    s->state = S_IDLE;
    s->in = NULL;
}

void dtls_slot_release(struct dtls_s *D, uint32_t i) {
    D->sess[i].req = -1;
    D->ring[(D->ring_head + D->ring_n++) % D->nsess] = i;
}

/* the free slot released longest ago, or UINT32_MAX */
uint32_t dtls_slot_take(struct dtls_s *D) {
    if (!D->ring_n)
        return UINT32_MAX;
    uint32_t i = D->ring[D->ring_head];
    D->ring_head = (D->ring_head + 1) % D->nsess;
    D->ring_n--;
    return i;
}

int dtls_session_of(const ge_t *g, int sock, int ep) {
    const struct dtls_s *D = g->dtls;
    if (D->mode == DTLS_REUSE) {
        size_t i = (size_t)ep * (size_t)g->ports_used + (size_t)(sock % g->ports_used);
        return i < D->nsess && D->sess[i].ssl && D->sess[i].sock == sock ? (int)i : -1;
    }
    if ((size_t)sock < D->slot_base)
        return -1;
    size_t i = (size_t)sock - D->slot_base;
    return i < D->nsess && D->sess[i].ssl && D->sess[i].ep == ep ? (int)i : -1;
}

int dtls_input(ge_t *g, int si, const uint8_t *d, size_t len, uint8_t *out, size_t cap,
               int64_t now) {
    struct dtls_s *D = g->dtls;
    sess_t *s = &D->sess[si];
    if (!s->ssl)
        return DTLS_NONE;
    if (d) {
        s->in = d;
        s->in_len = len;
    }
    if (s->state == S_HANDSHAKE) {
        if (!d)
            return DTLS_NONE;
        int rc = SSL_do_handshake(s->ssl);
        s->in = NULL;
        if (rc == 1) {
            s->state = S_UP;
            hsl_del(D, (uint32_t)si);
            dtls_hs_end(g, s, H_OK, now);
            if (!D->cipher[0])
                snprintf(D->cipher, sizeof D->cipher, "%s", SSL_get_cipher_name(s->ssl));
            return DTLS_READY;
        }
        int e = SSL_get_error(s->ssl, rc);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            return DTLS_NONE;
        dtls_note_ssl_error(D);
        s->state = S_FAILED;
        hsl_del(D, (uint32_t)si);
        dtls_hs_end(g, s, H_FAILED, now);
        return DTLS_FAILED;
    }
    if (s->state != S_UP) {
        s->in = NULL;
        return DTLS_NONE;
    }
    int n = SSL_read(s->ssl, out, (int)cap);
    if (n > 0)
        return n;
    int e = SSL_get_error(s->ssl, n);
    s->in = NULL;
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return DTLS_NONE;
    if (e == SSL_ERROR_ZERO_RETURN) {
        D->closed_by_peer++;
        dtls_note_failure(D, "%s", "the server closed a session (close_notify)");
    } else {
        dtls_note_ssl_error(D);
    }
    s->state = S_FAILED; /* later sends on it end as error; answers in flight time out */
    return DTLS_NONE;
}

int64_t dtls_waiting(const ge_t *g, int si) {
    return g->dtls->sess[si].req;
}

static sess_t *sess_of_req(const ge_t *g, const req_t *r) {
    const struct dtls_s *D = g->dtls;
    if (D->mode == DTLS_REUSE)
        return &D->sess[r->pair];
    if (r->sock < D->slot_base)
        return NULL;
    sess_t *s = &D->sess[r->sock - D->slot_base];
    return s->req == r - g->reqs ? s : NULL;
}

int dtls_send_req(ge_t *g, uint32_t idx, int64_t *t) {
    req_t *r = &g->reqs[idx];
    sess_t *s = sess_of_req(g, r);
    if (!s || s->state != S_UP)
        return 0;
    s->tx_errno = 0;
    if (SSL_write(s->ssl, g->arena + r->dgram_off, r->dgram_len) <= 0) {
        dtls_note_ssl_error(g->dtls);
        return 0;
    }
    if (s->tx_errno) {
        errno = s->tx_errno;
        return -1;
    }
    *t = s->tx_ns;
    if (g->dtls->app_sent && g->dtls->app_sent[idx] == INT64_MIN)
        g->dtls->app_sent[idx] = s->tx_ns - g->start_mono;
    return 1;
}

int dtls_start_req(ge_t *g, uint32_t idx, int64_t *t) {
    struct dtls_s *D = g->dtls;
    uint32_t si = dtls_slot_take(D);
    if (si == UINT32_MAX) {
        D->slots_exhausted++;
        return 0;
    }
    sess_t *s = &D->sess[si];
    req_t *r = &g->reqs[idx];
    s->req = idx;
    s->ep = r->ep;
    r->sock = (uint16_t)s->sock;
    if (dtls_sess_begin(g, si, 1, idx, r->device) < 0) {
        s->req = -1;
        dtls_slot_release(D, si);
        return 0;
    }
    *t = s->tx_ns;
    return 1;
}

void dtls_send_plain(ge_t *g, int sock, int ep, const uint8_t *m, size_t len) {
    int si = dtls_session_of(g, sock, ep);
    if (si >= 0 && g->dtls->sess[si].state == S_UP)
        (void)SSL_write(g->dtls->sess[si].ssl, m, (int)len);
}

int dtls_on_finish(ge_t *g, uint32_t idx, int outcome, int64_t now) {
    struct dtls_s *D = g->dtls;
    req_t *r = &g->reqs[idx];
    if (D->mode == DTLS_REUSE)
        return outcome;
    sess_t *s = sess_of_req(g, r);
    if (!s)
        return outcome;
    uint32_t si = (uint32_t)(s - D->sess);
    if (s->state != S_UP) { /* the handshake never completed: testbed/config, not the SUT */
        if (s->state == S_HANDSHAKE) {
            if (SSL_get_state(s->ssl) == TLS_ST_CW_FINISHED)
                dtls_note_failure(D, "%s", "handshakes timed out after the client's Finished (no "
                                      "server Finished: a wrong PSK or identity?)");
            else
                dtls_note_failure(D, "handshakes timed out in state '%s'",
                             SSL_state_string_long(s->ssl));
        }
        dtls_hs_end(g, s, outcome == O_TIMEOUT ? H_TIMEOUT : H_FAILED, now);
        outcome = O_ERROR;
    }
    dtls_sess_close(g, si);
    dtls_slot_release(D, si);
    return outcome;
}

void dtls_timers(ge_t *g, int64_t now) {
    struct dtls_s *D = g->dtls;
    if (now < D->next_scan || !D->nhsl)
        return;
    D->next_scan = now + TIMER_SCAN_NS;
    for (size_t j = 0; j < D->nhsl;) {
        uint32_t i = D->hsl[j];
        sess_t *s = &D->sess[i];
        if (DTLSv1_handle_timeout(s->ssl) < 0) { /* OpenSSL gave up retransmitting */
            dtls_note_ssl_error(D);
            s->state = S_FAILED;
            hsl_del(D, i); /* the request (if any) ends at its deadline */
            continue;
        }
        j++;
    }
}

int64_t dtls_next_timer(const ge_t *g) {
    return g->dtls->nhsl ? g->dtls->next_scan : INT64_MAX;
}

int64_t dtls_req_of_sock(const ge_t *g, int sock) {
    const struct dtls_s *D = g->dtls;
    if (D->mode == DTLS_REUSE || (size_t)sock < D->slot_base)
        return -1;
    return D->sess[(size_t)sock - D->slot_base].req;
}
