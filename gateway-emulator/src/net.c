/* net.c - networking and CoAP encoding for the GE.
 *
 * Before the start: size the per-device source-port pool, open the non-blocking UDP sockets,
 * assign every request its socket and message ID (per (socket, endpoint) counter), its token and
 * its complete datagram. The hot path then only calls sendto() on prepared bytes.
 * Options are encoded by libcoap (coap_opt_encode in trace.c); every distinct URI's first
 * datagram is checked with libcoap's parser (coap_pdu_parse) before the start. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <coap3/coap.h>

#include "ge.h"
#include "coap_payload.h"
#include "coap_tmpl.h"
#include "rxstamp.h" /* common/rxstamp.h */

#define EXCHANGE_LIFETIME_NS (247LL * 1000000000LL)
#define MIDS_PER_LIFETIME 60000 /* < 65536: margin against reuse within EXCHANGE_LIFETIME */
#define MAX_PORTS 256
#define RCVBUF_BYTES (8 * 1024 * 1024)
#define CLIENT_RCVBUF (512 * 1024) /* one socket per client: many sockets, each less busy */
#define MAX_PAIRS (16 * 1024 * 1024)

int addr_eq(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
    if (a->ss_family != b->ss_family)
        return 0;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
    return x->sin6_port == y->sin6_port &&
           memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
}

/* endpoint index by address: 100 000 endpoints (wot-fleet devices) interned and found in O(1)
 * instead of a scan of every endpoint each */
static uint64_t addr_hash(const struct sockaddr_storage *a) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a over family, port and address */
    const uint8_t *p;
    size_t n;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *s = (const void *)a;
        p = (const uint8_t *)&s->sin_addr;
        n = sizeof s->sin_addr;
        h = (h ^ s->sin_port) * 1099511628211ULL;
    } else {
        const struct sockaddr_in6 *s = (const void *)a;
        p = (const uint8_t *)&s->sin6_addr;
        n = sizeof s->sin6_addr;
        h = (h ^ s->sin6_port) * 1099511628211ULL;
    }
    h = (h ^ a->ss_family) * 1099511628211ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static void ep_index_put(ep_index_t *ix, const ge_t *g, size_t e) {
    size_t i = (size_t)addr_hash(&g->eps[e].addr) & ix->mask;
    while (ix->slot[i])
        i = (i + 1) & ix->mask;
    ix->slot[i] = (uint32_t)e + 1;
}

int ep_index_add(ep_index_t *ix, const ge_t *g, size_t e) {
    if (2 * (e + 1) > ix->mask) { /* keep it at most half full: rebuild twice as large */
        ep_index_t big = {0};
        size_t cap = ix->slot ? 2 * (ix->mask + 1) : 64;
        while (cap < 4 * (e + 1))
            cap <<= 1;
        if (!(big.slot = calloc(cap, sizeof *big.slot)))
            return -1;
        big.mask = cap - 1;
        for (size_t k = 0; k < e; k++)
            ep_index_put(&big, g, k);
        free(ix->slot);
        *ix = big;
    }
    ep_index_put(ix, g, e);
    return 0;
}

int ep_index_build(const ge_t *g, ep_index_t *ix) {
    for (size_t e = 0; e < g->neps; e++)
        if (ep_index_add(ix, g, e) < 0)
            return -1;
    return 0;
}

int ep_index_find(const ge_t *g, const ep_index_t *ix, const struct sockaddr_storage *a) {
    if (!ix->slot)
        return -1;
    for (size_t i = (size_t)addr_hash(a) & ix->mask; ix->slot[i]; i = (i + 1) & ix->mask)
        if (addr_eq(&g->eps[ix->slot[i] - 1].addr, a))
            return (int)ix->slot[i] - 1;
    return -1;
}

int net_find_ep(const ge_t *g, const struct sockaddr_storage *a) {
    for (size_t e = 0; e < g->neps; e++)
        if (addr_eq(&g->eps[e].addr, a))
            return (int)e;
    return -1;
}

void token_for(const ge_t *g, uint32_t idx, uint8_t out[8]) {
    uint32_t hi = (uint32_t)(g->salt >> 32), lo = (uint32_t)g->salt ^ idx;
    for (int i = 0; i < 4; i++) {
        out[i] = (uint8_t)(hi >> (24 - 8 * i));
        out[4 + i] = (uint8_t)(lo >> (24 - 8 * i));
    }
}

size_t net_encode_request(uint8_t *buf, size_t cap, int non, int method, uint16_t mid,
                          const uint8_t token[8], const uint8_t *opts, size_t optlen,
                          size_t payload) {
    size_t need = 4 + 8 + optlen + (payload ? 1 + payload : 0);
    if (need > cap)
        return 0;
    buf[0] = (uint8_t)(1 << 6 | (non ? COAP_MESSAGE_NON : COAP_MESSAGE_CON) << 4 | 8);
    buf[1] = (uint8_t)method;
    buf[2] = (uint8_t)(mid >> 8);
    buf[3] = (uint8_t)mid;
    memcpy(buf + 4, token, 8);
    memcpy(buf + 12, opts, optlen);
    if (payload) {
        buf[12 + optlen] = 0xFF; /* payload marker */
        memset(buf + 13 + optlen, 'x', payload);
    }
    return need;
}

/* max number of requests to one endpoint inside any EXCHANGE_LIFETIME window */
static uint64_t peak_window(const ge_t *g, const uint32_t *by_ep, const uint32_t *ep_first) {
    uint64_t best = 0;
    for (size_t e = 0; e < g->neps; e++) {
        const uint32_t *l = by_ep + ep_first[e];
        size_t cnt = ep_first[e + 1] - ep_first[e], lo = 0;
        for (size_t hi = 0; hi < cnt; hi++) {
            while (g->reqs[l[hi]].sched_ns - g->reqs[l[lo]].sched_ns >= EXCHANGE_LIFETIME_NS)
                lo++;
            if (hi - lo + 1 > best)
                best = hi - lo + 1;
        }
    }
    return best;
}

/* the source port (of K) of request idx, the j-th to its endpoint: round-robin, or through a
 * proxy one port per target device */
static size_t lane(const ge_t *g, uint32_t idx, size_t j, int K) {
    if (g->trace_clients) /* the trace names the client: its own socket (trace.c put it there) */
        return g->reqs[idx].sock;
    return g->proxy.host ? g->reqs[idx].device % (uint32_t)K : j % (size_t)K;
}

/* how many target devices a proxied trace addresses (device ids are 0..N-1) */
static uint32_t proxy_targets(const ge_t *g) {
    uint32_t n = 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->reqs[i].device + 1 > n)
            n = g->reqs[i].device + 1;
    return n;
}

/* a trace with a client column: what goes with one socket per client; 0 ok, 2 bad input */
static int trace_clients_check(const ge_t *g) {
    const char *why = g->ports_per_device ? "--ports-per-device (each client is one port)"
                      : g->proxy.host   ? "--proxy"
                      : g->dtls_opt.identity ? "DTLS"
                                         : NULL;
    for (size_t e = 1; !why && e < g->neps; e++)
        if (g->eps[e].addr.ss_family != g->eps[0].addr.ss_family)
            why = "both IPv4 and IPv6 targets";
    if (why) {
        fprintf(stderr, "gateway-emulator: a trace with a client column and %s is not "
                        "supported\n", why);
        return 2;
    }
    if ((size_t)g->trace_clients * g->neps > MAX_PAIRS) {
        fprintf(stderr, "gateway-emulator: %u trace clients x %zu endpoints = more than %d "
                        "(client, endpoint) pairs, expected fewer clients or endpoints\n",
                g->trace_clients, g->neps, MAX_PAIRS);
        return 2;
    }
    return limits_check_sockets(g->trace_clients, "the trace's client column: clients");
}

int net_open_socket(int family, int rcvbuf, int *stamps_ok) {
    int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int sz = rcvbuf;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    sz = 2 * 1024 * 1024;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz) < 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_family = (sa_family_t)family;
    if (rxstamp_enable(fd) < 0)
        *stamps_ok = 0; /* responses then carry user-space receive times only */
    socklen_t sl = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* check a prepared datagram with libcoap's parser: code, MID and token must round-trip */
static int verify_dgram(const uint8_t *d, size_t len, int method, uint16_t mid,
                        const uint8_t tok[8]) {
    coap_pdu_t *pdu = coap_pdu_init(0, 0, 0, len + 64);
    if (!pdu)
        return -1;
    int ok = coap_pdu_parse(COAP_PROTO_UDP, d, len, pdu) && (int)coap_pdu_get_code(pdu) == method &&
             coap_pdu_get_mid(pdu) == mid;
    if (ok) {
        coap_bin_const_t t = coap_pdu_get_token(pdu);
        ok = t.length == 8 && memcmp(t.s, tok, 8) == 0;
    }
    coap_delete_pdu(pdu);
    return ok ? 0 : -1;
}

int net_prepare(ge_t *g) {
    if (getrandom(&g->salt, sizeof g->salt, 0) != sizeof g->salt) {
        fprintf(stderr, "gateway-emulator: getrandom failed: %s\n", strerror(errno));
        return 1;
    }
    if (g->scheme == SCHEME_HTTP) /* no datagrams: http_prep.c renders the requests */
        return 0;
    /* requests grouped by endpoint, in trace order (counting sort) */
    uint32_t *ep_first = calloc(g->neps + 1, sizeof *ep_first);
    uint32_t *by_ep = malloc(g->n * sizeof *by_ep);
    uint32_t *fill = calloc(g->neps + 1, sizeof *fill);
    if (!ep_first || !by_ep || !fill)
        goto oom;
    for (size_t i = 0; i < g->n; i++)
        ep_first[g->reqs[i].ep + 1]++;
    for (size_t e = 0; e < g->neps; e++)
        ep_first[e + 1] += ep_first[e];
    for (size_t i = 0; i < g->n; i++) {
        uint16_t e = g->reqs[i].ep;
        by_ep[ep_first[e] + fill[e]++] = (uint32_t)i;
    }

    int K = g->ports_per_device;
    if (g->trace_clients) { /* open loop from N client endpoints: one socket per client */
        int rc = trace_clients_check(g);
        if (rc)
            goto fail_rc;
        K = (int)g->trace_clients;
    }
    if (g->obs && K > 1) { /* an OBSERVE and its CANCEL must leave from the same port */
        fprintf(stderr, "gateway-emulator: --ports-per-device %d with OBSERVE lines, expected 1 "
                        "(an observation is bound to one source port)\n", K);
        goto fail;
    }
    if (K <= 0 && g->obs) {
        K = 1;
    } else if (K <= 0) {
        uint64_t peak = peak_window(g, by_ep, ep_first);
        K = (int)((peak + MIDS_PER_LIFETIME - 1) / MIDS_PER_LIFETIME);
        if (K < 1)
            K = 1;
        if (K > MAX_PORTS) {
            fprintf(stderr,
                    "gateway-emulator: warning: peak per-device rate needs %d source ports; using "
                    "%d, message IDs may repeat within EXCHANGE_LIFETIME\n",
                    K, MAX_PORTS);
            K = MAX_PORTS;
        }
    }
    if (g->proxy.host && g->ports_per_device <= 0) {
        /* through a proxy: one source port per target device (up to MAX_PORTS), so a proxy
         * that binds each client port to one upstream session (libcoap's example proxy)
         * still reaches every device */
        int targets = (int)proxy_targets(g);
        if (targets > K)
            K = targets > MAX_PORTS ? MAX_PORTS : targets;
    }
    g->ports_used = K;

    /* K sockets per address family in use */
    int need4 = 0, need6 = 0;
    for (size_t e = 0; e < g->neps; e++) {
        if (g->eps[e].addr.ss_family == AF_INET)
            need4 = 1;
        else
            need6 = 1;
    }
    g->nsocks = (size_t)K * (size_t)(need4 + need6);
    g->socks = malloc(g->nsocks * sizeof *g->socks);
    if (!g->socks)
        goto oom;
    for (size_t s = 0; s < g->nsocks; s++)
        g->socks[s] = -1;
    g->rx_stamps = 1;
    for (size_t s = 0; s < g->nsocks; s++) {
        int fam = (need4 && s < (size_t)K) ? AF_INET : AF_INET6;
        g->socks[s] = net_open_socket(fam, g->trace_clients ? CLIENT_RCVBUF : RCVBUF_BYTES,
                                      &g->rx_stamps);
        if (g->socks[s] < 0) {
            fprintf(stderr, "gateway-emulator: cannot open a UDP socket: %s\n", strerror(errno));
            goto fail;
        }
    }

    /* pairs: (endpoint, k) -> requests in order; MIDs = random base + position */
    size_t npairs = g->neps * (size_t)K;
    g->pairs = calloc(npairs, sizeof *g->pairs);
    g->pair_reqs = malloc(g->n * sizeof *g->pair_reqs);
    uint16_t *rnd = malloc(npairs * sizeof *rnd);
    if (!g->pairs || !g->pair_reqs || !rnd) {
        free(rnd);
        goto oom;
    }
    if (getrandom(rnd, npairs * sizeof *rnd, 0) != (ssize_t)(npairs * sizeof *rnd))
        memset(rnd, 0, npairs * sizeof *rnd);
    uint32_t off = 0;
    for (size_t e = 0; e < g->neps; e++) {
        size_t cnt = ep_first[e + 1] - ep_first[e];
        pair_t *pe = &g->pairs[e * (size_t)K];
        for (size_t j = 0; j < cnt; j++) /* count, then lay out each pair's requests in order */
            pe[lane(g, by_ep[ep_first[e] + j], j, K)].count++;
        for (int k = 0; k < K; k++) {
            pe[k].first = off;
            pe[k].mid_base = rnd[e * (size_t)K + (size_t)k];
            off += pe[k].count;
            pe[k].count = 0;
        }
        for (size_t j = 0; j < cnt; j++) {
            uint32_t idx = by_ep[ep_first[e] + j];
            pair_t *p = &pe[lane(g, idx, j, K)];
            g->pair_reqs[p->first + p->count++] = idx;
        }
    }
    free(rnd);
    if (block_prepare_mids(g, npairs))
        goto oom;

    /* datagrams */
    int prc = coap_payload_prepare(g); /* --http-body-template: the PUT/POST payloads' sizes */
    if (prc == 2)
        goto fail_rc;
    if (prc)
        goto oom;
    size_t total = 0;
    for (size_t i = 0; i < g->n; i++) {
        size_t pay = block_first_payload(g, (uint32_t)i, g->reqs[i].dgram_len);
        total += 12 + g->uris[g->reqs[i].path_id].optlen + 2 + (g->blk ? 6 : 0) + (pay ? 1 + pay : 0);
    }
    if (total > UINT32_MAX) {
        fprintf(stderr, "gateway-emulator: trace datagrams exceed 4 GiB\n");
        goto fail;
    }
    g->arena = malloc(total ? total : 1);
    uint8_t *checked = calloc(g->nuris, 1);
    if (!g->arena || !checked) {
        free(checked);
        goto oom;
    }
    size_t pos = 0;
    int fam_base6 = need4 ? K : 0;
    for (size_t pi = 0; pi < npairs; pi++) {
        pair_t *p = &g->pairs[pi];
        size_t e = pi / (size_t)K, k = pi % (size_t)K;
        int sock = (int)k + (g->eps[e].addr.ss_family == AF_INET ? 0 : fam_base6);
        for (uint32_t j = 0; j < p->count; j++) {
            uint32_t idx = g->pair_reqs[p->first + j];
            req_t *r = &g->reqs[idx];
            const uri_t *u = &g->uris[r->path_id];
            uint8_t tok[8];
            token_for(g, observe_token_index(g, idx), tok);
            r->mid = (uint16_t)(p->mid_base + j);
            r->sock = (uint16_t)sock;
            r->pair = (uint32_t)pi;
            const uint8_t *o = u->opts;
            size_t ol = u->optlen;
            if (r->method == M_OBSERVE || r->method == M_CANCEL) {
                o = u->obs_opts[r->method - M_OBSERVE];
                ol = u->obs_len[r->method - M_OBSERVE];
            }
            uint8_t ob[1100];
            if (g->blk && ol + 6 <= sizeof ob) { /* + Block2 / Block1 (block.c) */
                ol = block_opts(g, idx, o, ol, ob, sizeof ob);
                o = ob;
            }
            size_t pay = block_first_payload(g, idx, r->dgram_len);
            size_t len = net_encode_request(g->arena + pos, total - pos, g->non,
                                            wire_code(r->method), r->mid, tok, o, ol, pay);
            if (len == 0 || len > 65507) {
                fprintf(stderr, "gateway-emulator: request %u does not fit a datagram\n", idx);
                free(checked);
                goto fail;
            }
            if (!checked[r->path_id]) {
                checked[r->path_id] = 1;
                if (verify_dgram(g->arena + pos, len, wire_code(r->method), r->mid, tok) < 0) {
                    fprintf(stderr, "gateway-emulator: internal error: libcoap rejects the "
                                    "datagram of request %u\n",
                            idx);
                    free(checked);
                    goto fail;
                }
            }
            const char *own = trace_body(g, idx); /* the trace's body column (one datagram) */
            if (own && len > 0 && pay <= len)
                memcpy(g->arena + pos + len - pay, own, pay);
            if (coap_payload_render(g, idx, g->arena + pos, len)) {
                free(checked);
                goto oom;
            }
            if (u->ntv) { /* per-request values known before the start (coap_tmpl.h) */
                tv_values_t v = {idx, (uint32_t)r->sock, g->http_opt.seed, 0};
                coap_tmpl_fill(g->arena + pos, u->tv, u->ntv, &v, TV_EARLY);
            }
            r->dgram_off = (uint32_t)pos;
            r->dgram_len = (uint16_t)len;
            pos += len;
        }
    }
    free(checked);
    free(ep_first);
    free(by_ep);
    free(fill);
    return 0;
oom:
    fprintf(stderr, "gateway-emulator: out of memory preparing %zu requests\n", g->n);
fail:
    free(ep_first);
    free(by_ep);
    free(fill);
    return 1;
fail_rc: /* bad input, said */
    free(ep_first);
    free(by_ep);
    free(fill);
    return 2;
}

void net_close(ge_t *g) {
    for (size_t s = 0; s < g->nsocks; s++)
        if (g->socks && g->socks[s] >= 0)
            close(g->socks[s]);
}
