/* dtls_setup.c - DTLS state before the start: the OpenSSL context, one session per
 * (socket, endpoint) pair (reuse) or a pool of slots with their own sockets sized by the
 * trace's peak concurrency within --timeout-ms (per-request). Allocates; main thread only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "clock.h" /* common/clock.h */
#include "dtls_int.h"

#define MAX_SLOTS 4096 /* per-request: concurrent sessions (each its own source port) */
#define SLOT_RCVBUF (256 * 1024)

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

int dtls_prepare(ge_t *g) {
    dtls_g = g;
    struct dtls_s *D = calloc(1, sizeof *D);
    if (!D)
        goto oom;
    g->dtls = D;
    D->mode = g->dtls_opt.mode;
    if (dtls_ctx_setup(D) < 0) {
        dtls_note_ssl_error(D);
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
            dtls_slot_release(D, (uint32_t)i);
        }
    }
    return 0;
oom:
    fprintf(stderr, "gateway-emulator: out of memory preparing DTLS sessions\n");
    return 1;
}
