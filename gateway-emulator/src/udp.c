/* udp.c - the coap:// transport: the prepared datagrams leave with sendto() on the request's
 * socket (unconnected, non-blocking), responses are read in recvmmsg() batches (dgram.c) and go
 * through the CoAP message layer (coapx.c). Readiness before the start: CoAP pings (warmup.c). */
#include <stdlib.h>
#include <sys/epoll.h>

#include "clock.h" /* common/clock.h */
#include "coap_payload.h"
#include "coap_tmpl.h"
#include "coapx.h"
#include "dgram.h"
#include "transport.h"

typedef struct {
    ge_t *g;
    dgram_rx_t *rx;
    coapx_t *X;
} udp_t;

/* the request's datagram as prepared (or as block.c patched it); *t right before sendto */
static int udp_send_req(void *ctx, uint32_t idx, int64_t *t) {
    udp_t *U = ctx;
    const ge_t *g = U->g;
    const req_t *r = &g->reqs[idx];
    const endpoint_t *e = &g->eps[r->ep];
    const uri_t *u = &g->uris[r->path_id];
    if (u->tv_clock || coap_payload_has_clock(g)) { /* {{time_ms}} {{time_ns}}: the wall
                                                       * clock at this transmission */
        tv_values_t v = {idx, r->sock, 0, clock_read_ns(CLOCK_REALTIME)};
        coap_tmpl_fill(g->arena + r->dgram_off, u->tv, u->ntv, &v, TV_CLOCK);
        coap_payload_fill(g, idx, g->arena + r->dgram_off, &v, TV_CLOCK);
    }
    *t = mono_ns();
    return sendto(g->socks[r->sock], g->arena + r->dgram_off, r->dgram_len, 0,
                  (const struct sockaddr *)&e->addr, e->addrlen) < 0 ? -1 : 1;
}

static void udp_send_empty(void *ctx, int sock, int ep, const uint8_t m[4],
                           const struct sockaddr_storage *to, socklen_t tolen) {
    udp_t *U = ctx;
    (void)ep;
    (void)sendto(U->g->socks[sock], m, 4, 0, (const struct sockaddr *)to, tolen);
}

static const struct coap_wire UDP_WIRE = {udp_send_req, udp_send_empty, NULL};

static int udp_prepare(ge_t *g) {
    (void)g; /* net_prepare opened everything */
    return 0;
}

static int udp_prestart(ge_t *g) {
    return g->warmup_ns && !ge_stop_signal ? warmup_run(g) : 0;
}

static void udp_detach(void *ts) {
    udp_t *U = ts;
    coapx_free(U->X);
    dgram_rx_free(U->rx);
    free(U);
}

static void *udp_attach(loop_t *L, ge_t *g) {
    udp_t *U = calloc(1, sizeof *U);
    if (!U)
        return NULL;
    U->g = g;
    U->rx = dgram_rx_new(g, loop_clock_map(L));
    U->X = U->rx ? coapx_new(L, g, &UDP_WIRE, U) : NULL;
    int ok = U->X != NULL;
    for (size_t s = 0; ok && s < g->nsocks; s++)
        ok = loop_watch(L, g->socks[s], EPOLLIN, (uint32_t)s) == 0;
    if (!ok) {
        udp_detach(U);
        return NULL;
    }
    return U;
}

static int udp_send(void *ts, uint32_t idx, int64_t *t) {
    udp_t *U = ts;
    int rc = udp_send_req(U, idx, t);
    if (rc > 0)
        coapx_sent(U->X, idx, *t);
    return rc;
}

static void on_datagram(void *ctx, int sock, int ep, const uint8_t *d, size_t len,
                        const struct sockaddr_storage *src, socklen_t srclen, int64_t t,
                        int64_t kt) {
    coapx_datagram(((udp_t *)ctx)->X, sock, ep, d, len, src, srclen, t, kt);
}

static void udp_on_event(void *ts, uint32_t tag, uint32_t events) {
    (void)events;
    udp_t *U = ts;
    dgram_drain(U->rx, (int)tag, on_datagram, U);
}

static void udp_timers(void *ts, int64_t now) {
    coapx_timers(((udp_t *)ts)->X, now);
}

static int64_t udp_next_deadline(const void *ts) {
    return coapx_next_due(((const udp_t *)ts)->X);
}

static int64_t udp_sent_ns(const ge_t *g, uint32_t idx) {
    return (g->reqs[idx].flags & RF_SENT) ? g->reqs[idx].sent_ns : INT64_MIN;
}

static void udp_summary(const ge_t *g, FILE *f) {
    (void)g, (void)f; /* plain CoAP adds nothing to the summary */
}

static int udp_write_outputs(const ge_t *g) {
    (void)g;
    return 0;
}

const struct transport transport_udp = {
    .name = "udp",
    .prepare = udp_prepare,
    .prestart = udp_prestart,
    .attach = udp_attach,
    .send = udp_send,
    .on_event = udp_on_event,
    .timers = udp_timers,
    .next_deadline = udp_next_deadline,
    .on_finish = NULL,
    .detach = udp_detach,
    .sent_ns = udp_sent_ns,
    .summary = udp_summary,
    .write_outputs = udp_write_outputs,
};
