/* clients.c - the closed-loop transport (--clients N): N virtual clients, each with its own UDP
 * socket (its own source endpoint), each with at most one request in flight. A client issues a
 * request, waits for its outcome (response, RST, timeout), thinks (--think), then issues the
 * next one, to a target picked from the trace's lines (--select), until --duration-ms after the
 * start. The trace's send times are not used: its lines are the request templates.
 *
 * Why raw sockets and not libcoap sessions: one socket per client is what makes N distinct
 * client endpoints; libcoap walks every session on each coap_io_process (libcoap-notes.md, 3),
 * so 10,000 sessions would cost the GE ~100x per request. Here a client is 32 bytes plus one
 * datagram buffer; its request is the template's prepared datagram (net.c encoded it with
 * libcoap and checked it with libcoap's parser) with the client's MID and the request's token
 * patched in. Responses go through the same CoAP message layer as the open loop (coapx.c,
 * dgram.c: recvmmsg with kernel receive stamps).
 *
 * Every request is a record of the preallocated table g->reqs (--max-requests, reserved
 * virtual memory: pages are touched as it fills, never allocated per request); a full table
 * stops the clients (summary.json closed_loop.capacity_reached). Each record ends in exactly
 * one outcome through loop_finish(); its scheduled_ns is the instant the client meant to send
 * (the previous outcome's kernel receive stamp, or the moment the loop saw it, plus the think
 * time), so send lag = how long the GE stalled the client beyond its think time. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h" /* common/clock.h */
#include "coapx.h"
#include "dgram.h"
#include "transport.h"

#define CLIENT_RCVBUF (256 * 1024)
#define SEND_FAIL_BACKOFF_NS NS_PER_MS /* a local send failure: retry after this, not at once */
#define NONE UINT32_MAX

typedef struct {
    uint8_t *bytes; /* the prepared datagram (MID, token patched per request) */
    uint16_t len, ep;
    uint32_t device, path_id;
    uint8_t method;
} tmpl_t;

typedef struct {
    int64_t due;  /* absolute mono ns of its next request (while idle, in the heap) */
    uint32_t cur; /* its request in flight, NONE when idle */
    uint32_t next_tmpl;
    uint16_t mid;
} client_t;

/* prepare() -> attach(): what the main thread set up */
typedef struct {
    tmpl_t *tmpl;
    size_t ntmpl;
    size_t buflen; /* per-client datagram buffer */
} closed_prep_t;
static closed_prep_t P;

typedef struct {
    loop_t *L;
    ge_t *g;
    dgram_rx_t *rx;
    coapx_t *X;
    client_t *c;
    uint8_t *buf; /* clients x P.buflen */
    uint32_t *heap; /* idle clients, min-heap on due */
    size_t heap_n;
    uint64_t rng;
    int64_t end; /* absolute: no request issued at or after it */
    int running;
} closed_t;

/* ---- idle clients: a min-heap on due ---- */
static void heap_push(closed_t *C, uint32_t k) {
    size_t i = C->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (C->c[C->heap[p]].due <= C->c[k].due)
            break;
        C->heap[i] = C->heap[p];
        i = p;
    }
    C->heap[i] = k;
}

static uint32_t heap_pop(closed_t *C) {
    uint32_t top = C->heap[0], last = C->heap[--C->heap_n];
    size_t i = 0, n = C->heap_n;
    for (;;) {
        size_t ch = 2 * i + 1;
        if (ch >= n)
            break;
        if (ch + 1 < n && C->c[C->heap[ch + 1]].due < C->c[C->heap[ch]].due)
            ch++;
        if (C->c[last].due <= C->c[C->heap[ch]].due)
            break;
        C->heap[i] = C->heap[ch];
        i = ch;
    }
    if (n)
        C->heap[i] = last;
    return top;
}

static uint64_t rng_next(closed_t *C) {
    C->rng ^= C->rng << 13;
    C->rng ^= C->rng >> 7;
    C->rng ^= C->rng << 17;
    return C->rng;
}

static double rng_unit(closed_t *C) { /* (0, 1] */
    return ((double)(rng_next(C) >> 11) + 1.0) / 9007199254740992.0;
}

static int64_t think_ns(closed_t *C) {
    const ge_t *g = C->g;
    switch (g->closed.think) {
    case THINK_CONST: return g->closed.think_a_ns;
    case THINK_EXP: return (int64_t)(-log(rng_unit(C)) * (double)g->closed.think_a_ns);
    case THINK_UNIFORM:
        return g->closed.think_a_ns +
               (int64_t)(rng_unit(C) * (double)(g->closed.think_b_ns - g->closed.think_a_ns));
    default: return 0;
    }
}

static uint32_t pick(closed_t *C, client_t *cl) {
    switch (C->g->closed.select) {
    case SELECT_ONE: return 0;
    case SELECT_RANDOM: return (uint32_t)(rng_next(C) % P.ntmpl);
    default: {
        uint32_t t = cl->next_tmpl;
        cl->next_tmpl = (uint32_t)((t + 1) % P.ntmpl);
        return t;
    }
    }
}

/* ---- the wire (coapx.h) ---- */
static int send_req(void *ctx, uint32_t idx, int64_t *t) {
    closed_t *C = ctx;
    const ge_t *g = C->g;
    const req_t *r = &g->reqs[idx];
    const endpoint_t *e = &g->eps[r->ep];
    *t = mono_ns();
    return sendto(g->socks[r->sock], C->buf + (size_t)r->sock * P.buflen, r->dgram_len, 0,
                  (const struct sockaddr *)&e->addr, e->addrlen) < 0 ? -1 : 1;
}

static void send_empty(void *ctx, int sock, int ep, const uint8_t m[4],
                       const struct sockaddr_storage *to, socklen_t tolen) {
    (void)ep;
    (void)sendto(((closed_t *)ctx)->g->socks[sock], m, 4, 0, (const struct sockaddr *)to, tolen);
}

/* an empty ACK/RST on a client's socket belongs to its request in flight */
static int64_t req_of_sock(void *ctx, int sock) {
    uint32_t cur = ((closed_t *)ctx)->c[sock].cur;
    return cur == NONE ? -1 : (int64_t)cur;
}

static const struct coap_wire CLOSED_WIRE = {send_req, send_empty, req_of_sock};

/* ---- issuing ---- */
static void issue(closed_t *C, uint32_t k) {
    ge_t *g = C->g;
    client_t *cl = &C->c[k];
    req_t *r = loop_new_request(C->L);
    if (!r) { /* the record table is full: the clients stop here */
        g->closed.capacity_reached = 1;
        C->running = 0;
        heap_push(C, k);
        return;
    }
    uint32_t idx = (uint32_t)(r - g->reqs);
    const tmpl_t *T = &P.tmpl[pick(C, cl)];
    uint8_t *d = C->buf + (size_t)k * P.buflen;
    memcpy(d, T->bytes, T->len);
    d[2] = (uint8_t)(cl->mid >> 8);
    d[3] = (uint8_t)cl->mid;
    token_for(g, idx, d + 4);
    r->sched_ns = cl->due - g->start_mono;
    r->device = T->device;
    r->path_id = T->path_id;
    r->method = T->method;
    r->ep = T->ep;
    r->sock = (uint16_t)k;
    r->mid = cl->mid++;
    r->dgram_len = T->len;
    cl->cur = idx;
    int64_t t;
    if (send_req(C, idx, &t) > 0) {
        loop_mark_sent(C->L, r, t);
        coapx_sent(C->X, idx, t);
    } else {
        loop_finish(C->L, r, O_ERROR); /* on_finish puts the client back, with a back-off */
    }
}

/* every idle client whose think time is over issues its next request */
static void issue_due(closed_t *C, int64_t now) {
    if (C->running && now >= C->end) {
        C->running = 0;
        C->g->closed.stopped_ns = now - C->g->start_mono;
    }
    while (C->running && C->heap_n && C->c[C->heap[0]].due <= now)
        issue(C, heap_pop(C));
}

/* ---- the transport ---- */
static int same_family(const ge_t *g) {
    for (size_t e = 1; e < g->neps; e++)
        if (g->eps[e].addr.ss_family != g->eps[0].addr.ss_family)
            return 0;
    return 1;
}

/* the trace's lines become templates (net_prepare encoded their datagrams); the trace's own
 * sockets make way for one per client; the record table is reserved */
static int closed_prepare(ge_t *g) {
    if (g->obs) {
        fprintf(stderr, "gateway-emulator: --clients with OBSERVE/CANCEL lines is not supported, "
                        "expected GET, PUT, POST or DELETE\n");
        return 2;
    }
    if (!same_family(g)) {
        fprintf(stderr, "gateway-emulator: --clients with both IPv4 and IPv6 targets is not "
                        "supported, expected one address family\n");
        return 2;
    }
    int rc = limits_check_sockets((size_t)g->closed.clients, "--clients");
    if (rc)
        return rc;
    P.ntmpl = g->n;
    P.tmpl = calloc(P.ntmpl, sizeof *P.tmpl);
    if (!P.tmpl)
        goto oom;
    size_t maxlen = 16;
    for (size_t i = 0; i < g->n; i++) {
        const req_t *r = &g->reqs[i];
        tmpl_t *T = &P.tmpl[i];
        if (!(T->bytes = malloc(r->dgram_len)))
            goto oom;
        memcpy(T->bytes, g->arena + r->dgram_off, r->dgram_len);
        T->len = r->dgram_len;
        T->ep = r->ep;
        T->device = r->device;
        T->path_id = r->path_id;
        T->method = r->method;
        if (T->len > maxlen)
            maxlen = T->len;
    }
    P.buflen = (maxlen + 15) & ~(size_t)15;
    /* the trace's sockets and (socket, endpoint) pairs are not used: one socket per client,
     * and an empty ACK/RST is matched by its socket (req_of_sock), never by the pairs */
    net_close(g);
    free(g->socks);
    for (size_t p = 0; p < g->neps * (size_t)g->ports_used; p++)
        g->pairs[p].count = 0;
    g->nsocks = (size_t)g->closed.clients;
    g->ports_used = 1;
    g->socks = malloc(g->nsocks * sizeof *g->socks);
    if (!g->socks)
        goto oom;
    g->rx_stamps = 1;
    int fam = g->eps[0].addr.ss_family;
    for (size_t s = 0; s < g->nsocks; s++)
        g->socks[s] = -1;
    for (size_t s = 0; s < g->nsocks; s++) {
        if ((g->socks[s] = net_open_socket(fam, CLIENT_RCVBUF, &g->rx_stamps)) < 0) {
            fprintf(stderr, "gateway-emulator: --clients %d: cannot open socket %zu: %s\n",
                    g->closed.clients, s, strerror(errno));
            return 1;
        }
    }
    /* reserved, not committed: pages are touched as records fill (no allocation per request) */
    size_t bytes = g->closed.max_requests * sizeof(req_t);
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED) {
        fprintf(stderr, "gateway-emulator: cannot reserve %zu request records (%zu MiB): %s; "
                        "lower --max-requests\n",
                g->closed.max_requests, bytes >> 20, strerror(errno));
        return 1;
    }
    free(g->reqs);
    g->reqs = m;
    g->n = 0;
    g->cap = g->closed.max_requests;
    return 0;
oom:
    fprintf(stderr, "gateway-emulator: out of memory preparing %d clients\n", g->closed.clients);
    return 1;
}

static int closed_prestart(ge_t *g) {
    return g->warmup_ns && !ge_stop_signal ? warmup_run(g) : 0;
}

static void closed_detach(void *ts) {
    closed_t *C = ts;
    coapx_free(C->X);
    dgram_rx_free(C->rx);
    free(C->c);
    free(C->buf);
    free(C->heap);
    free(C);
}

static void *closed_attach(loop_t *L, ge_t *g) {
    closed_t *C = calloc(1, sizeof *C);
    if (!C)
        return NULL;
    size_t n = (size_t)g->closed.clients;
    C->L = L;
    C->g = g;
    C->rng = g->salt ^ 0x9e3779b97f4a7c15ULL;
    if (!C->rng)
        C->rng = 1;
    C->c = calloc(n, sizeof *C->c);
    C->buf = calloc(n, P.buflen);
    C->heap = malloc(n * sizeof *C->heap);
    C->rx = dgram_rx_new(g, loop_clock_map(L));
    C->X = C->rx ? coapx_new(L, g, &CLOSED_WIRE, C) : NULL;
    int ok = C->c && C->buf && C->heap && C->X;
    for (size_t k = 0; ok && k < n; k++)
        ok = loop_watch(L, g->socks[k], EPOLLIN, (uint32_t)k) == 0;
    if (!ok) {
        closed_detach(C);
        return NULL;
    }
    C->end = g->start_mono + g->closed.duration_ns;
    C->running = 1;
    for (size_t k = 0; k < n; k++) {
        client_t *cl = &C->c[k];
        cl->cur = NONE;
        cl->next_tmpl = (uint32_t)(k % P.ntmpl);
        cl->mid = (uint16_t)rng_next(C);
        /* with a think time the first request comes after one (random phases), else at once */
        cl->due = g->start_mono + think_ns(C);
        heap_push(C, (uint32_t)k);
    }
    return C;
}

static int closed_send(void *ts, uint32_t idx, int64_t *t) {
    (void)ts, (void)idx, (void)t;
    return 0; /* no scheduled requests: the clients issue their own */
}

static void on_datagram(void *ctx, int sock, int ep, const uint8_t *d, size_t len,
                        const struct sockaddr_storage *src, socklen_t srclen, int64_t t,
                        int64_t kt) {
    coapx_datagram(((closed_t *)ctx)->X, sock, ep, d, len, src, srclen, t, kt);
}

static void closed_on_event(void *ts, uint32_t tag, uint32_t events) {
    (void)events;
    closed_t *C = ts;
    dgram_drain(C->rx, (int)tag, on_datagram, C);
    if (C->heap_n && C->running) /* a client answered with no think time goes again at once */
        issue_due(C, mono_ns());
}

static void closed_timers(void *ts, int64_t now) {
    closed_t *C = ts;
    coapx_timers(C->X, now);
    issue_due(C, now);
}

static int64_t closed_next_deadline(const void *ts) {
    const closed_t *C = ts;
    int64_t d = coapx_next_due(C->X);
    if (C->running) {
        if (C->end < d)
            d = C->end;
        if (C->heap_n && C->c[C->heap[0]].due < d)
            d = C->c[C->heap[0]].due;
    }
    return d;
}

/* the client's request ended: it thinks from the moment the outcome arrived (the response's
 * kernel stamp when there is one), then goes again */
static int closed_on_finish(void *ts, uint32_t idx, int outcome, int64_t now) {
    closed_t *C = ts;
    const ge_t *g = C->g;
    const req_t *r = &g->reqs[idx];
    client_t *cl = &C->c[r->sock];
    if (cl->cur != idx)
        return outcome; /* interrupted at the end: the client has moved on already */
    cl->cur = NONE;
    int64_t done = now;
    if (r->code || outcome == O_RESET)
        done = g->start_mono + r->recv_ns - ((r->flags & RF_KSTAMP) ? (int64_t)r->rx_wait_ns : 0);
    cl->due = done + think_ns(C);
    if (!(r->flags & RF_SENT) && cl->due < now + SEND_FAIL_BACKOFF_NS)
        cl->due = now + SEND_FAIL_BACKOFF_NS;
    heap_push(C, r->sock);
    return outcome;
}

static int closed_running(const void *ts) {
    return ((const closed_t *)ts)->running;
}

static int64_t closed_sent_ns(const ge_t *g, uint32_t idx) {
    return (g->reqs[idx].flags & RF_SENT) ? g->reqs[idx].sent_ns : INT64_MIN;
}

static const char *THINK_NAME[] = {"0", "const", "exp", "uniform"};
static const char *SELECT_NAME[] = {"round-robin", "one", "random"};

static void closed_summary(const ge_t *g, FILE *f) {
    fprintf(f,
            "  \"closed_loop\": {\"clients\": %d, \"select\": \"%s\", \"targets\": %zu, "
            "\"think\": \"%s\", \"think_a_us\": %.3f, \"think_b_us\": %.3f, "
            "\"duration_ms\": %.3f, \"warmup_ms\": %.3f, \"cooldown_ms\": %.3f, "
            "\"stopped_ms\": %.3f, \"capacity\": %zu, \"capacity_reached\": %s},\n",
            g->closed.clients, SELECT_NAME[g->closed.select], P.ntmpl,
            THINK_NAME[g->closed.think], (double)g->closed.think_a_ns / 1e3,
            (double)g->closed.think_b_ns / 1e3, (double)g->closed.duration_ns / 1e6,
            (double)g->closed.warmup_ns / 1e6, (double)g->closed.cooldown_ns / 1e6,
            (double)g->closed.stopped_ns / 1e6, g->cap,
            g->closed.capacity_reached ? "true" : "false");
}

static int closed_write_outputs(const ge_t *g) {
    (void)g;
    return 0;
}

const struct transport transport_closed = {
    .name = "closed",
    .prepare = closed_prepare,
    .prestart = closed_prestart,
    .attach = closed_attach,
    .send = closed_send,
    .on_event = closed_on_event,
    .timers = closed_timers,
    .next_deadline = closed_next_deadline,
    .on_finish = closed_on_finish,
    .detach = closed_detach,
    .running = closed_running,
    .sent_ns = closed_sent_ns,
    .summary = closed_summary,
    .write_outputs = closed_write_outputs,
};
