/* dtls_prestart.c - the handshake driver before the start instant: reuse -> handshake every
 * (socket, endpoint) pair with requests, up to PRESTART_PARALLEL at a time, bounded by
 * max(--warmup-ms, --timeout-ms) and by --start-at - 20 ms; per-request -> one handshake per
 * endpoint as the readiness check when --warmup-ms. Which endpoints are ready goes to warmup.c
 * (the bookkeeping is there). Main thread; may allocate. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/ssl.h>

#include "clock.h" /* common/clock.h */
#include "dtls_int.h"

#define PRESTART_PARALLEL 256

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
            int ep = net_find_ep(g, &src), si = ep < 0 ? -1 : dtls_session_of(g, (int)(lo + j), ep);
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
                si = dtls_slot_take(D);
                if (si == UINT32_MAX)
                    break;
                D->sess[si].ep = (uint16_t)jobs[next];
                slot_of_ep[jobs[next]] = si;
            }
            next++;
            active++;
            dtls_sess_begin(g, si, D->mode == DTLS_REUSE, -1, dev[si]);
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
                dtls_sess_close(g, si);
                dtls_slot_release(D, si);
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
                dtls_note_failure(D, "%s", "handshakes timed out after the client's Finished (no "
                                      "server Finished: a wrong PSK or identity?)");
            else
                dtls_note_failure(D, "handshakes timed out in state '%s' (server unreachable?)",
                             SSL_state_string_long(s->ssl));
            dtls_hs_end(g, s, H_TIMEOUT, mono_ns());
            dtls_sess_close(g, (uint32_t)i);
            s->state = S_FAILED;
            if (D->mode != DTLS_REUSE)
                dtls_slot_release(D, (uint32_t)i);
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
    /* with --warm-up the handshakes are the readiness check (CoAP pings would go unanswered on
     * a DTLS port): one round, an endpoint answered when its sessions are up */
    int rc = g->warmup_ns && warmup_record(g, answered, 1, mono_ns() - t0);
    free(slot_of_ep);
    free(jobs);
    free(answered);
    free(dev);
    D->allocs_start = dtls_allocs();
    return rc;
}
