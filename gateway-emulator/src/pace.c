/* pace.c - the closed loop's clients, whatever the wire (pace.h). A client issues a request,
 * waits for its outcome (response, reset, timeout), thinks (--think), then issues the next one,
 * to a target picked from the trace's lines (--select), until --duration-ms after the start.
 * The trace's send times are not used: its lines are the request templates.
 *
 * Every request is a record of the preallocated table g->reqs (--max-requests, reserved
 * virtual memory: pages are touched as it fills, never allocated per request); a full table
 * stops the clients (summary.json closed_loop.capacity_reached). Each record ends in exactly
 * one outcome through loop_finish(); its scheduled_ns is the instant the client meant to send
 * (the previous outcome's kernel receive stamp, or the moment the loop saw it, plus the think
 * time), so send lag = how long the GE stalled the client beyond its think time.
 *
 * --requests-per-client M (JMeter's thread group): a client stops after its M-th outcome, and
 * the clients stop (the run ends) when every one has, or at --duration-ms, whichever is first.
 * --ramp-ms R: client k's first request is due at start + R * k / N (then its think time). */
#include <math.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <errno.h>

#include "clock.h" /* common/clock.h */
#include "pace.h"

#define PACE_BURST 64 /* an epoll batch (loop.c reads 64 events at a time) */
#define SEND_FAIL_BACKOFF_NS NS_PER_MS /* a local send failure: retry after this, not at once */

/* ---- idle clients: a min-heap on due ---- */
static void heap_push(pace_t *P, uint32_t k) {
    size_t i = P->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (P->c[P->heap[p]].due <= P->c[k].due)
            break;
        P->heap[i] = P->heap[p];
        i = p;
    }
    P->heap[i] = k;
}

static uint32_t heap_pop(pace_t *P) {
    uint32_t top = P->heap[0], last = P->heap[--P->heap_n];
    size_t i = 0, n = P->heap_n;
    for (;;) {
        size_t ch = 2 * i + 1;
        if (ch >= n)
            break;
        if (ch + 1 < n && P->c[P->heap[ch + 1]].due < P->c[P->heap[ch]].due)
            ch++;
        if (P->c[last].due <= P->c[P->heap[ch]].due)
            break;
        P->heap[i] = P->heap[ch];
        i = ch;
    }
    if (n)
        P->heap[i] = last;
    return top;
}

static uint64_t rng_next(pace_t *P) { return xorshift64(&P->rng); }

static double rng_unit(pace_t *P) { /* (0, 1] */
    return ((double)(rng_next(P) >> 11) + 1.0) / 9007199254740992.0;
}

static int64_t think_ns(pace_t *P) {
    const ge_t *g = P->g;
    switch (g->closed.think) {
    case THINK_CONST: return g->closed.think_a_ns;
    case THINK_EXP: return (int64_t)(-log(rng_unit(P)) * (double)g->closed.think_a_ns);
    case THINK_UNIFORM:
        return g->closed.think_a_ns +
               (int64_t)(rng_unit(P) * (double)(g->closed.think_b_ns - g->closed.think_a_ns));
    default: return 0;
    }
}

static uint32_t pick(pace_t *P, pace_client_t *cl) {
    switch (P->g->closed.select) {
    case SELECT_ONE: return 0;
    case SELECT_RANDOM: return (uint32_t)(rng_next(P) % P->ntmpl);
    default: {
        uint32_t t = cl->next_tmpl;
        cl->next_tmpl = (uint32_t)((t + 1) % P->ntmpl);
        return t;
    }
    }
}

int pace_prepare(pace_t *P, ge_t *g) {
    P->g = g;
    P->ntmpl = g->n;
    P->tmpl = calloc(P->ntmpl ? P->ntmpl : 1, sizeof *P->tmpl);
    if (!P->tmpl) {
        fprintf(stderr, "gateway-emulator: out of memory preparing %d clients\n",
                g->closed.clients);
        return 1;
    }
    for (size_t i = 0; i < g->n; i++) {
        const req_t *r = &g->reqs[i];
        P->tmpl[i] = (pace_tmpl_t){r->ep, r->device, r->path_id, r->method};
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
}

uint32_t pace_first_tmpl(const pace_t *P, uint32_t k) {
    return P->g->closed.select == SELECT_ONE ? 0 : (uint32_t)(k % P->ntmpl);
}

int pace_attach(pace_t *P, loop_t *L) {
    const ge_t *g = P->g;
    size_t n = (size_t)g->closed.clients;
    P->L = L;
    P->rng = g->salt ^ 0x9e3779b97f4a7c15ULL;
    if (!P->rng)
        P->rng = 1;
    P->c = calloc(n, sizeof *P->c);
    P->heap = malloc(n * sizeof *P->heap);
    if (!P->c || !P->heap)
        return -1;
    P->end = g->start_mono + g->closed.duration_ns;
    P->running = 1;
    P->heap_n = 0;
    for (size_t k = 0; k < n; k++) {
        pace_client_t *cl = &P->c[k];
        cl->cur = PACE_NONE;
        cl->next_tmpl = (uint32_t)(k % P->ntmpl);
        /* with a think time the first request comes after one (random phases), else at once;
         * a ramp-up spreads the clients' first requests over it */
        int64_t ramp = g->closed.ramp_ns ? (int64_t)((double)g->closed.ramp_ns * (double)k / (double)n) : 0;
        cl->due = g->start_mono + ramp + think_ns(P);
        heap_push(P, (uint32_t)k);
    }
    return 0;
}

void pace_detach(pace_t *P) {
    free(P->c);
    free(P->heap);
    P->c = NULL;
    P->heap = NULL;
}

static void issue(pace_t *P, uint32_t k, pace_send_fn send, void *ctx) {
    ge_t *g = P->g;
    pace_client_t *cl = &P->c[k];
    req_t *r = loop_new_request(P->L);
    if (!r) { /* the record table is full: the clients stop here */
        g->closed.capacity_reached = 1;
        P->running = 0;
        heap_push(P, k);
        return;
    }
    uint32_t t = pick(P, cl);
    const pace_tmpl_t *T = &P->tmpl[t];
    r->sched_ns = cl->due - g->start_mono;
    r->device = T->device;
    r->path_id = T->path_id;
    r->method = T->method;
    r->ep = T->ep;
    r->sock = (uint16_t)k;
    cl->cur = (uint32_t)(r - g->reqs);
    cl->issued++;
    send(ctx, k, r, t);
}

void pace_issue_due(pace_t *P, int64_t now, pace_send_fn send, void *ctx) {
    if (P->running && now >= P->end) {
        P->running = 0;
        P->g->closed.stopped_ns = now - P->g->start_mono;
    }
    /* at most PACE_BURST at a time: the loop reads what arrived (and checks timeouts) between
     * bursts, so 10,000 clients due at once cannot starve the responses of the first ones */
    for (int k = 0; k < PACE_BURST && P->running && P->heap_n && P->c[P->heap[0]].due <= now; k++)
        issue(P, heap_pop(P), send, ctx);
}

int64_t pace_next_deadline(const pace_t *P, int64_t d) {
    if (P->running) {
        if (P->end < d)
            d = P->end;
        if (P->heap_n && P->c[P->heap[0]].due < d)
            d = P->c[P->heap[0]].due;
    }
    return d;
}

int pace_finished(pace_t *P, uint32_t idx, int outcome, int64_t now) {
    const ge_t *g = P->g;
    const req_t *r = &g->reqs[idx];
    pace_client_t *cl = &P->c[r->sock];
    if (cl->cur != idx)
        return 0; /* interrupted at the end: the client has moved on already */
    cl->cur = PACE_NONE;
    if (g->closed.per_client && cl->issued >= g->closed.per_client) { /* its budget is spent */
        if (++P->g->closed.done_clients == (uint32_t)g->closed.clients && P->running) {
            P->running = 0;
            P->g->closed.stopped_ns = now - g->start_mono;
        }
        return 1;
    }
    int64_t done = now;
    if (r->code || outcome == O_RESET)
        done = g->start_mono + r->recv_ns - ((r->flags & RF_KSTAMP) ? (int64_t)r->rx_wait_ns : 0);
    cl->due = done + think_ns(P);
    if (!(r->flags & RF_SENT) && cl->due < now + SEND_FAIL_BACKOFF_NS)
        cl->due = now + SEND_FAIL_BACKOFF_NS;
    heap_push(P, r->sock);
    return 1;
}

static const char *THINK_NAME[] = {"0", "const", "exp", "uniform"};
static const char *SELECT_NAME[] = {"round-robin", "one", "random"};

void pace_summary(const ge_t *g, size_t ntmpl, FILE *f) {
    fprintf(f,
            "  \"closed_loop\": {\"clients\": %d, \"select\": \"%s\", \"targets\": %zu, "
            "\"think\": \"%s\", \"think_a_us\": %.3f, \"think_b_us\": %.3f, "
            "\"duration_ms\": %.3f, \"warmup_ms\": %.3f, \"cooldown_ms\": %.3f, "
            "\"stopped_ms\": %.3f, \"capacity\": %zu, \"capacity_reached\": %s, "
            "\"requests_per_client\": %u, \"ramp_ms\": %.3f, \"clients_done\": %u},\n",
            g->closed.clients, SELECT_NAME[g->closed.select], ntmpl,
            THINK_NAME[g->closed.think], (double)g->closed.think_a_ns / 1e3,
            (double)g->closed.think_b_ns / 1e3, (double)g->closed.duration_ns / 1e6,
            (double)g->closed.warmup_ns / 1e6, (double)g->closed.cooldown_ns / 1e6,
            (double)g->closed.stopped_ns / 1e6, g->cap,
            g->closed.capacity_reached ? "true" : "false", g->closed.per_client,
            (double)g->closed.ramp_ns / 1e6, g->closed.done_clients);
}

int64_t pace_sent_ns(const ge_t *g, uint32_t idx) {
    return (g->reqs[idx].flags & RF_SENT) ? g->reqs[idx].sent_ns : INT64_MIN;
}
