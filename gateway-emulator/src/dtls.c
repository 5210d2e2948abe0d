/* dtls.c - DTLS 1.2 PSK client sessions (coaps://) for the GE; see dtls.h and README "DTLS".
 *
 * OpenSSL (statically linked) does the record layer and the handshake; the GE keeps its sockets
 * and its loop. A custom BIO per session sends each record OpenSSL writes as one datagram with
 * sendto() on the session's socket to its endpoint (stamping CLOCK_MONOTONIC right before) and
 * reads exactly the datagram the loop is feeding. Everything of ours is preallocated before the
 * start; OpenSSL's own allocations are counted (CRYPTO_set_mem_functions) and reported. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "clock.h"   /* common/clock.h */
#include "dtls.h"
#include "psk.h"     /* common/psk.h */
#include "rxstamp.h" /* common/rxstamp.h */

#define CIPHERS "PSK:!NULL" /* what libcoap 4.3.1's OpenSSL build offers and accepts */
#define MAX_SLOTS 4096      /* per-request: concurrent sessions (each its own source port) */
#define PRESTART_PARALLEL 256
#define TIMER_SCAN_NS (10LL * NS_PER_MS)
#define SLOT_RCVBUF (256 * 1024)

enum { S_IDLE = 0, S_HANDSHAKE, S_UP, S_FAILED };
enum { H_OK = 1, H_FAILED, H_TIMEOUT };
static const char *HS_OUTCOME[] = {"none", "ok", "failed", "timeout"};

typedef struct {
    SSL *ssl;
    const uint8_t *in; /* the datagram being fed (bio_read hands it over once) */
    size_t in_len;
    int64_t tx_ns; /* mono ns right before the last sendto */
    int tx_errno;  /* errno of a failed sendto since the caller cleared it */
    int sock;      /* index into g->socks */
    int32_t hs;    /* handshake record, -1 = not recorded */
    int32_t hpos;  /* position in the handshaking list, -1 = not in it */
    int64_t req;   /* per-request: the request using this slot, -1 = none */
    uint16_t ep;
    uint8_t state;
    uint8_t family;
} sess_t;

typedef struct {
    int64_t start, end; /* absolute mono ns (the start instant may move after the handshakes) */
    int64_t req;        /* per-request: trace index, else -1 */
    uint32_t session, device;
    uint16_t ep;
    uint8_t outcome;
} hsrec_t;

struct dtls_s {
    SSL_CTX *ctx;
    BIO_METHOD *meth;
    int mode;
    sess_t *sess;
    size_t nsess;
    size_t slot_base; /* per-request: g->socks index of slot 0 */
    uint32_t *ring; /* per-request: free slots, oldest released first (FIFO), so a source port
                     * is reused as late as possible after its session closed */
    size_t ring_head, ring_n;
    uint32_t *hsl; /* sessions in a handshake */
    size_t nhsl;
    int64_t next_scan;
    hsrec_t *hs;
    size_t nhs, hs_cap;
    int64_t *app_sent; /* per-request: first application record, relative; INT64_MIN none */
    uint64_t slots_exhausted, closed_by_peer;
    uint64_t allocs_start, allocs_end;
    int loop_marked;
    char failure[256]; /* the first reason a handshake or session failed */
    char cipher[64];
};

static ge_t *G; /* the one GE instance (BIO and PSK callbacks) */

/* ---- OpenSSL allocation counter (README: allocation on the hot path) ---- */
static uint64_t n_allocs;
static void *cnt_malloc(size_t n, const char *f, int l) {
    (void)f, (void)l;
    n_allocs++;
    return malloc(n);
}
static void *cnt_realloc(void *p, size_t n, const char *f, int l) {
    (void)f, (void)l;
    n_allocs++;
    return realloc(p, n);
}
static void cnt_free(void *p, const char *f, int l) {
    (void)f, (void)l;
    free(p);
}

static void note_failure(struct dtls_s *D, const char *fmt, const char *a) {
    if (!D->failure[0])
        snprintf(D->failure, sizeof D->failure, fmt, a);
}

/* ---- the BIO over the GE's socket ---- */
static int bio_write(BIO *b, const char *data, int len) {
    sess_t *s = BIO_get_data(b);
    const endpoint_t *e = &G->eps[s->ep];
    s->tx_ns = mono_ns();
    if (sendto(G->socks[s->sock], data, (size_t)len, 0, (const struct sockaddr *)&e->addr,
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
    size_t il = strlen(G->dtls_opt.identity);
    if (il + 1 > max_id || G->dtls_opt.keylen > max_psk)
        return 0;
    memcpy(identity, G->dtls_opt.identity, il + 1);
    memcpy(psk, G->dtls_opt.key, G->dtls_opt.keylen);
    return (unsigned int)G->dtls_opt.keylen;
}

static void info_cb(const SSL *ssl, int where, int ret) {
    (void)ssl;
    if ((where & SSL_CB_ALERT) && (where & SSL_CB_READ) && G->dtls)
        note_failure(G->dtls, "received the server's alert '%s'",
                     SSL_alert_desc_string_long(ret));
}

static void note_ssl_error(struct dtls_s *D) {
    unsigned long e = ERR_get_error();
    char buf[200];
    if (e) {
        ERR_error_string_n(e, buf, sizeof buf);
        note_failure(D, "OpenSSL: %s", buf);
    }
    ERR_clear_error();
}

/* ---- CLI ---- */
int dtls_options(ge_t *g) {
    const char *id = g->dtls_opt.identity, *kf = g->dtls_opt.key_file;
    if (!id && !kf) {
        if (g->dtls_opt.mode_set) {
            fprintf(stderr, "gateway-emulator: --dtls-sessions without --dtls-psk-identity and "
                            "--dtls-psk-key-file, expected DTLS credentials with it\n");
            return 2;
        }
        return 0;
    }
    if (psk_credentials("gateway-emulator", id, kf, g->dtls_opt.key, &g->dtls_opt.keylen))
        return 2;
    if (g->proxy.host) {
        fprintf(stderr, "gateway-emulator: --proxy with --dtls-psk-identity, expected one of them "
                        "(DTLS through a forward proxy is not supported)\n");
        return 2;
    }
    /* before OpenSSL allocates anything: count its allocations from now on */
    CRYPTO_set_mem_functions(cnt_malloc, cnt_realloc, cnt_free);
    return 0;
}

/* ---- sessions ---- */
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

static void hs_end(ge_t *g, sess_t *s, int outcome, int64_t now) {
    if (s->hs < 0)
        return;
    hsrec_t *h = &g->dtls->hs[s->hs];
    if (!h->outcome) {
        h->end = now;
        h->outcome = (uint8_t)outcome;
    }
}

/* new SSL object on session i, ClientHello sent; record a handshake if rec (request rq) */
static int sess_begin(ge_t *g, uint32_t i, int rec, int64_t rq, uint32_t device) {
    struct dtls_s *D = g->dtls;
    sess_t *s = &D->sess[i];
    s->ssl = SSL_new(D->ctx);
    BIO *b = s->ssl ? BIO_new(D->meth) : NULL;
    if (!b) {
        if (s->ssl)
            SSL_free(s->ssl);
        s->ssl = NULL;
        note_ssl_error(D);
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
            note_ssl_error(D);
            s->state = S_FAILED;
            hsl_del(D, i);
            hs_end(g, s, H_FAILED, s->tx_ns);
        }
    }
    return 0;
}

static void sess_close(ge_t *g, uint32_t i) {
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

static void slot_release(struct dtls_s *D, uint32_t i) {
    D->sess[i].req = -1;
    D->ring[(D->ring_head + D->ring_n++) % D->nsess] = i;
}

/* the free slot released longest ago, or UINT32_MAX */
static uint32_t slot_take(struct dtls_s *D) {
    if (!D->ring_n)
        return UINT32_MAX;
    uint32_t i = D->ring[D->ring_head];
    D->ring_head = (D->ring_head + 1) % D->nsess;
    D->ring_n--;
    return i;
}

/* per-request: the most requests scheduled inside any --timeout-ms window (+1) */
static size_t peak_concurrency(const ge_t *g) {
    size_t best = 0, lo = 0;
    for (size_t hi = 0; hi < g->n; hi++) {
        while (g->reqs[hi].sched_ns - g->reqs[lo].sched_ns >= g->timeout_ns)
            lo++;
        if (hi - lo + 1 > best)
            best = hi - lo + 1;
    }
    return best + 1;
}

static int setup_ctx(struct dtls_s *D) {
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

int dtls_prepare(ge_t *g) {
    if (!g->dtls_opt.identity)
        return 0;
    if (g->scheme != 2) {
        fprintf(stderr, "%s: no coaps:// URI in the trace, expected coaps:// URIs with "
                        "--dtls-psk-identity/--dtls-psk-key-file\n", g->trace_path);
        return 2;
    }
    G = g;
    struct dtls_s *D = calloc(1, sizeof *D);
    if (!D)
        goto oom;
    g->dtls = D;
    D->mode = g->dtls_opt.mode;
    if (setup_ctx(D) < 0) {
        note_ssl_error(D);
        fprintf(stderr, "gateway-emulator: cannot set up OpenSSL for DTLS 1.2 PSK: %s\n",
                D->failure);
        return 1;
    }
    size_t npairs = g->neps * (size_t)g->ports_used;
    if (D->mode == DTLS_REUSE) {
        D->nsess = npairs;
        D->hs_cap = npairs;
    } else {
        int fam = g->eps[0].addr.ss_family;
        for (size_t e = 1; e < g->neps; e++)
            if (g->eps[e].addr.ss_family != fam) {
                fprintf(stderr, "%s: IPv4 and IPv6 endpoints with --dtls-sessions per-request, "
                                "expected one address family\n", g->trace_path);
                return 2;
            }
        struct rlimit rl;
        size_t cap = MAX_SLOTS;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
            getrlimit(RLIMIT_NOFILE, &rl);
            if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < cap + g->nsocks + 64)
                cap = rl.rlim_cur > g->nsocks + 128 ? rl.rlim_cur - g->nsocks - 64 : 64;
        }
        size_t want = peak_concurrency(g);
        D->nsess = want < cap ? want : cap;
        if (want > cap)
            fprintf(stderr, "gateway-emulator: warning: per-request DTLS may need %zu concurrent "
                            "sessions, using %zu; requests finding none end as error "
                            "(dtls.slots_exhausted)\n", want, cap);
        D->hs_cap = g->n;
        D->app_sent = malloc(g->n * sizeof *D->app_sent);
        int *ns = realloc(g->socks, (g->nsocks + D->nsess) * sizeof *ns);
        if (!D->app_sent || !ns)
            goto oom;
        g->socks = ns;
        for (size_t i = 0; i < g->n; i++)
            D->app_sent[i] = INT64_MIN;
        D->slot_base = g->nsocks;
        for (size_t i = 0; i < D->nsess; i++) {
            int fd = net_open_socket(fam, SLOT_RCVBUF, &g->rx_stamps);
            if (fd < 0) {
                fprintf(stderr, "gateway-emulator: cannot open DTLS slot socket %zu of %zu: %s\n",
                        i + 1, D->nsess, strerror(errno));
                return 1;
            }
            g->socks[g->nsocks++] = fd;
        }
    }
    D->sess = calloc(D->nsess ? D->nsess : 1, sizeof *D->sess);
    D->hsl = malloc((D->nsess ? D->nsess : 1) * sizeof *D->hsl);
    D->hs = calloc(D->hs_cap ? D->hs_cap : 1, sizeof *D->hs);
    if (!D->sess || !D->hsl || !D->hs)
        goto oom;
    D->ring = malloc((D->nsess ? D->nsess : 1) * sizeof *D->ring);
    if (!D->ring)
        goto oom;
    int v6base = 0; /* IPv6 sockets follow the IPv4 ones when both are in use (net.c) */
    for (size_t x = 0; x < g->neps && !v6base; x++)
        v6base = g->eps[x].addr.ss_family == AF_INET ? g->ports_used : 0;
    for (size_t i = 0; i < D->nsess; i++) {
        sess_t *s = &D->sess[i];
        s->hs = s->hpos = -1;
        s->req = -1;
        if (D->mode == DTLS_REUSE) { /* pair index = ep * ports_used + k */
            size_t e = i / (size_t)g->ports_used, k = i % (size_t)g->ports_used;
            s->ep = (uint16_t)e;
            s->family = (uint8_t)g->eps[e].addr.ss_family;
            s->sock = (int)k + (s->family == AF_INET ? 0 : v6base); /* as net.c lays out */
        } else {
            s->family = (uint8_t)g->eps[0].addr.ss_family;
            s->sock = (int)(D->slot_base + i);
            slot_release(D, (uint32_t)i);
        }
    }
    return 0;
oom:
    fprintf(stderr, "gateway-emulator: out of memory preparing DTLS sessions\n");
    return 1;
}

/* ---- the handshake driver before the start ---- */
static int find_ep(const ge_t *g, const struct sockaddr_storage *a) {
    for (size_t e = 0; e < g->neps; e++)
        if (addr_eq(&g->eps[e].addr, a))
            return (int)e;
    return -1;
}

/* read what arrived on the sessions' sockets and advance their handshakes */
static void prestart_poll(ge_t *g, int64_t until) {
    struct dtls_s *D = g->dtls;
    size_t lo = D->mode == DTLS_REUSE ? 0 : D->slot_base, hi = g->nsocks;
    if (D->mode == DTLS_REUSE)
        hi = D->slot_base ? D->slot_base : g->nsocks;
    struct pollfd pf[512];
    size_t np = 0;
    for (size_t s = lo; s < hi && np < 512; s++)
        pf[np++] = (struct pollfd){.fd = g->socks[s], .events = POLLIN};
    int64_t left = until - mono_ns();
    if (left > TIMER_SCAN_NS)
        left = TIMER_SCAN_NS;
    if (left < 0)
        left = 0;
    poll(pf, np, (int)(left / NS_PER_MS) + 1);
    for (size_t j = 0; j < np; j++) {
        if (!(pf[j].revents & POLLIN))
            continue;
        for (;;) {
            uint8_t buf[2048], out[2048];
            struct sockaddr_storage src;
            socklen_t sl = sizeof src;
            ssize_t n = recvfrom(pf[j].fd, buf, sizeof buf, 0, (struct sockaddr *)&src, &sl);
            if (n < 0)
                break;
            int ep = find_ep(g, &src), si = ep < 0 ? -1 : dtls_session_of(g, (int)(lo + j), ep);
            if (si < 0)
                continue;
            int r = dtls_input(g, si, buf, (size_t)n, out, sizeof out, mono_ns());
            while (r > 0) /* no application data is expected before the start: drop it */
                r = dtls_input(g, si, NULL, 0, out, sizeof out, mono_ns());
        }
    }
    dtls_timers(g, mono_ns());
}

int dtls_open_sessions(ge_t *g) {
    struct dtls_s *D = g->dtls;
    int64_t t0 = mono_ns();
    int64_t budget = D->mode == DTLS_REUSE ? (g->warmup_ns > g->timeout_ns ? g->warmup_ns
                                                                          : g->timeout_ns)
                                           : g->warmup_ns;
    int64_t deadline = t0 + budget;
    if (g->start_at && deadline > g->start_at - 20 * NS_PER_MS)
        deadline = g->start_at - 20 * NS_PER_MS; /* never into the test */
    uint8_t *answered = calloc(g->neps ? g->neps : 1, 1);
    uint32_t *dev = calloc(D->nsess ? D->nsess : 1, sizeof *dev);
    if (!answered || !dev) {
        fprintf(stderr, "gateway-emulator: out of memory\n");
        free(answered);
        free(dev);
        return 1;
    }
    /* the jobs: reuse -> every pair with requests; per-request with a warm-up -> every endpoint */
    size_t njobs = 0, next = 0, active = 0;
    uint32_t *jobs = malloc((D->nsess + g->neps + 1) * sizeof *jobs);
    if (!jobs) {
        free(answered);
        free(dev);
        return 1;
    }
    if (D->mode == DTLS_REUSE) {
        for (size_t i = 0; i < D->nsess; i++)
            if (g->pairs[i].count) {
                dev[i] = g->reqs[g->pair_reqs[g->pairs[i].first]].device;
                jobs[njobs++] = (uint32_t)i;
            }
    } else if (g->warmup_ns) {
        for (size_t e = 0; e < g->neps; e++)
            jobs[njobs++] = (uint32_t)e;
    }
    uint32_t *slot_of_ep = calloc(g->neps ? g->neps : 1, sizeof *slot_of_ep);
    for (size_t e = 0; slot_of_ep && e < g->neps; e++)
        slot_of_ep[e] = UINT32_MAX;
    int64_t now = t0;
    while ((next < njobs || active) && !ge_stop_signal && (now = mono_ns()) < deadline &&
           slot_of_ep) {
        while (next < njobs && active < PRESTART_PARALLEL) {
            uint32_t si;
            if (D->mode == DTLS_REUSE) {
                si = jobs[next];
            } else {
                si = slot_take(D);
                if (si == UINT32_MAX)
                    break;
                D->sess[si].ep = (uint16_t)jobs[next];
                slot_of_ep[jobs[next]] = si;
            }
            next++;
            active++;
            sess_begin(g, si, D->mode == DTLS_REUSE, -1, dev[si]);
        }
        prestart_poll(g, deadline);
        /* count finished handshakes; per-request warm-up sessions are closed again */
        active = 0;
        for (size_t j = 0; j < next; j++) {
            uint32_t si = D->mode == DTLS_REUSE ? jobs[j] : slot_of_ep[jobs[j]];
            if (si == UINT32_MAX)
                continue;
            if (D->sess[si].state == S_HANDSHAKE) {
                active++;
            } else if (D->mode != DTLS_REUSE) {
                if (D->sess[si].state == S_UP)
                    answered[jobs[j]] = 1;
                sess_close(g, si);
                slot_release(D, si);
                slot_of_ep[jobs[j]] = UINT32_MAX;
            }
        }
    }
    /* what did not finish timed out */
    for (size_t i = 0; i < D->nsess; i++) {
        sess_t *s = &D->sess[i];
        if (s->state == S_HANDSHAKE) {
            if (SSL_get_state(s->ssl) == TLS_ST_CW_FINISHED ||
                SSL_get_state(s->ssl) == TLS_ST_CR_CHANGE)
                note_failure(D, "%s", "handshakes timed out after the client's Finished (no "
                                      "server Finished: a wrong PSK or identity?)");
            else
                note_failure(D, "handshakes timed out in state '%s' (server unreachable?)",
                             SSL_state_string_long(s->ssl));
            hs_end(g, s, H_TIMEOUT, mono_ns());
            sess_close(g, (uint32_t)i);
            s->state = S_FAILED;
            if (D->mode != DTLS_REUSE)
                slot_release(D, (uint32_t)i);
        }
    }
    if (D->mode == DTLS_REUSE) { /* an endpoint is ready when all its sessions are up */
        for (size_t e = 0; e < g->neps; e++)
            answered[e] = 1;
        for (size_t i = 0; i < D->nsess; i++)
            if (g->pairs[i].count && D->sess[i].state != S_UP)
                answered[D->sess[i].ep] = 0;
    }
    size_t up = 0, failed = 0;
    for (size_t h = 0; h < D->nhs; h++)
        D->hs[h].outcome == H_OK ? up++ : failed++;
    if (failed)
        fprintf(stderr, "gateway-emulator: DTLS: %zu of %zu handshake(s) before the start failed "
                        "(%s); their requests end as error\n",
                failed, D->nhs, D->failure[0] ? D->failure : "unknown reason");
    int rc = 0;
    if (g->warmup_ns) {
        size_t done = 0;
        for (size_t e = 0; e < g->neps; e++)
            done += answered[e];
        g->warmup.enabled = 1;
        g->warmup.rounds = 1;
        g->warmup.answered = done;
        g->warmup.took_ns = mono_ns() - t0;
        if (warmup_write(g, answered))
            rc = 1;
    }
    free(slot_of_ep);
    free(jobs);
    free(answered);
    free(dev);
    D->allocs_start = n_allocs;
    return rc;
}

/* ---- the send loop ---- */
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
            hs_end(g, s, H_OK, now);
            if (!D->cipher[0])
                snprintf(D->cipher, sizeof D->cipher, "%s", SSL_get_cipher_name(s->ssl));
            return DTLS_READY;
        }
        int e = SSL_get_error(s->ssl, rc);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            return DTLS_NONE;
        note_ssl_error(D);
        s->state = S_FAILED;
        hsl_del(D, (uint32_t)si);
        hs_end(g, s, H_FAILED, now);
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
        note_failure(D, "%s", "the server closed a session (close_notify)");
    } else {
        note_ssl_error(D);
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
        note_ssl_error(g->dtls);
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
    uint32_t si = slot_take(D);
    if (si == UINT32_MAX) {
        D->slots_exhausted++;
        return 0;
    }
    sess_t *s = &D->sess[si];
    req_t *r = &g->reqs[idx];
    s->req = idx;
    s->ep = r->ep;
    r->sock = (uint16_t)s->sock;
    if (sess_begin(g, si, 1, idx, r->device) < 0) {
        s->req = -1;
        slot_release(D, si);
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
                note_failure(D, "%s", "handshakes timed out after the client's Finished (no "
                                      "server Finished: a wrong PSK or identity?)");
            else
                note_failure(D, "handshakes timed out in state '%s'",
                             SSL_state_string_long(s->ssl));
        }
        hs_end(g, s, outcome == O_TIMEOUT ? H_TIMEOUT : H_FAILED, now);
        outcome = O_ERROR;
    }
    sess_close(g, si);
    slot_release(D, si);
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
            note_ssl_error(D);
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

/* ---- outputs ---- */
int64_t dtls_app_sent_ns(const ge_t *g, uint32_t idx) {
    if (!g->dtls || !g->dtls->app_sent)
        return (g->reqs[idx].flags & RF_SENT) ? g->reqs[idx].sent_ns : INT64_MIN;
    return g->dtls->app_sent[idx];
}

int dtls_write(const ge_t *g) {
    struct dtls_s *D = g->dtls;
    if (!D)
        return 0;
    if (!D->loop_marked) {
        D->allocs_end = n_allocs;
        D->loop_marked = 1;
    }
    char path[OUT_PATH_MAX];
    FILE *f = output_open(g, "handshakes.csv", path);
    if (!f)
        return 1;
    fputs("session,device,ep,start_ns,end_ns,outcome,request\n", f);
    for (size_t i = 0; i < D->nhs; i++) {
        const hsrec_t *h = &D->hs[i];
        fprintf(f, "%u,%u,%u,%lld,", h->session, h->device, h->ep,
                (long long)(h->start - g->start_mono));
        if (h->outcome)
            fprintf(f, "%lld", (long long)(h->end - g->start_mono));
        fprintf(f, ",%s,%lld\n", HS_OUTCOME[h->outcome ? h->outcome : H_TIMEOUT],
                (long long)h->req);
    }
    return output_close(f, path);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct_us(const int64_t *v, size_t n, double q) {
    if (!n)
        return 0;
    size_t k = (size_t)(q * (double)n + 0.999999999);
    k = k < 1 ? 1 : k > n ? n : k;
    return (double)v[k - 1] / 1e3;
}

void dtls_summary(const ge_t *g, void *file) {
    FILE *f = file;
    struct dtls_s *D = g->dtls;
    if (!D) /* plain CoAP: the summary stays as it was */
        return;
    int64_t *v = malloc((D->nhs ? D->nhs : 1) * sizeof *v);
    size_t ok = 0, to = 0, sessions = 0;
    for (size_t i = 0; i < D->nhs; i++) {
        if (D->hs[i].outcome == H_OK && v)
            v[ok++] = D->hs[i].end - D->hs[i].start;
        else if (D->hs[i].outcome != H_OK)
            to += D->hs[i].outcome == H_TIMEOUT || !D->hs[i].outcome;
    }
    if (v)
        qsort(v, ok, sizeof *v, cmp_i64);
    sessions = D->nhs;
    uint64_t sent = 0;
    for (size_t i = 0; i < g->n; i++)
        sent += (g->reqs[i].flags & RF_SENT) != 0;
    uint64_t loop_allocs = (D->loop_marked ? D->allocs_end : n_allocs) - D->allocs_start;
    fprintf(f,
            "  \"dtls\": {\"mode\": \"%s\", \"sessions\": %zu, \"handshakes_ok\": %zu, "
            "\"handshakes_failed\": %zu, \"handshakes_timeout\": %zu, \"handshake_p50_us\": %.3f, "
            "\"handshake_p99_us\": %.3f, \"handshake_max_us\": %.3f, \"cipher\": \"%s\", "
            "\"slots\": %zu, \"slots_exhausted\": %llu, \"closed_by_server\": %llu, "
            "\"openssl_allocs_in_loop\": %llu, \"openssl_allocs_per_request\": %.2f, "
            "\"failure\": ",
            D->mode == DTLS_REUSE ? "reuse" : "per-request", sessions, ok, D->nhs - ok, to,
            pct_us(v, ok, 0.5), pct_us(v, ok, 0.99), ok ? (double)v[ok - 1] / 1e3 : 0.0,
            D->cipher, D->mode == DTLS_REUSE ? 0 : D->nsess,
            (unsigned long long)D->slots_exhausted, (unsigned long long)D->closed_by_peer,
            (unsigned long long)loop_allocs, sent ? (double)loop_allocs / (double)sent : 0.0);
    if (D->failure[0]) {
        fputc('"', f);
        for (const char *p = D->failure; *p; p++)
            if (*p == '"' || *p == '\\')
                fprintf(f, "\\%c", *p);
            else if ((unsigned char)*p >= 0x20)
                fputc(*p, f);
        fputc('"', f);
    } else {
        fputs("null", f);
    }
    fputs("},\n", f);
    free(v);
}
