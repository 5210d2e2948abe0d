/* loop.c - the single send-loop thread, protocol-free: open-loop sends at the scheduled
 * instants through the run's transport (transport.h), ready fds handed to the transport,
 * the --timeout-ms deadline in send order, the transport's own timers, the busy / hybrid wait.
 * After loop_run's setup nothing here allocates, logs or touches files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "clock.h" /* common/clock.h */
#include "ge.h"
#include "transport.h"

#define SENDS_BEFORE_DRAIN 16
#define DRAIN_WAIT_CAP_NS (100LL * NS_PER_MS)
#define DIRECT_MAX 2 /* watched fds up to which a drain reads them directly, no epoll_wait(0) */

struct loop_s {
    ge_t *g;
    const struct transport *tp;
    void *ts; /* the transport's loop-time state (attach) */
    int epfd;
    uint32_t nwatch;
    uint32_t direct_tag[DIRECT_MAX];
    size_t next;    /* next request to send */
    size_t to_head; /* timeout cursor (send order) */
    size_t outstanding;
    clock_map_t cmap; /* CLOCK_REALTIME -> CLOCK_MONOTONIC for kernel receive stamps */
};

/* ---- services for the transport (transport.h) ---- */
int loop_watch(loop_t *L, int fd, uint32_t events, uint32_t tag) {
    struct epoll_event ev = {.events = events, .data.u32 = tag};
    if (epoll_ctl(L->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        return -1;
    if (L->nwatch < DIRECT_MAX)
        L->direct_tag[L->nwatch] = tag;
    L->nwatch++;
    return 0;
}

int loop_rewatch(loop_t *L, int fd, uint32_t events, uint32_t tag) {
    struct epoll_event ev = {.events = events, .data.u32 = tag};
    return epoll_ctl(L->epfd, EPOLL_CTL_MOD, fd, &ev);
}

void loop_finish(loop_t *L, req_t *r, int outcome) {
    if (L->tp->on_finish) /* e.g. close a per-request session; may change the outcome */
        outcome = L->tp->on_finish(L->ts, (uint32_t)(r - L->g->reqs), outcome, mono_ns());
    r->outcome = (uint8_t)outcome;
    r->flags |= RF_DONE;
    L->outstanding--;
    switch (outcome) {
    case O_OK: progress_inc(L->g, PG_OK); break;
    case O_TIMEOUT: progress_inc(L->g, PG_TIMEOUT); break;
    case O_RESET: progress_inc(L->g, PG_RESET); break;
    default: progress_inc(L->g, PG_ERROR); break;
    }
}

size_t loop_due_count(const loop_t *L) {
    return L->next;
}

req_t *loop_new_request(loop_t *L) {
    ge_t *g = L->g;
    if (L->next >= g->cap)
        return NULL;
    req_t *r = &g->reqs[L->next];
    memset(r, 0, sizeof *r);
    g->n = ++L->next; /* the schedule loop never sees a due request: next == n */
    L->outstanding++;
    progress_inc(g, PG_TOTAL);
    return r;
}

void loop_mark_sent(loop_t *L, req_t *r, int64_t t) {
    r->sent_ns = t - L->g->start_mono;
    r->flags |= RF_SENT;
    progress_inc(L->g, PG_SENT);
}

const clock_map_t *loop_clock_map(const loop_t *L) {
    return &L->cmap;
}

/* ---- waiting and reading ---- */
/* non-blocking: hand every ready fd to the transport */
static void drain(loop_t *L) {
    if (L->nwatch <= DIRECT_MAX && !L->tp->epoll_only) {
        for (uint32_t i = 0; i < L->nwatch; i++)
            L->tp->on_event(L->ts, L->direct_tag[i], EPOLLIN);
        return;
    }
    struct epoll_event ev[64];
    int n = epoll_wait(L->epfd, ev, 64, 0);
    for (int i = 0; i < n; i++)
        L->tp->on_event(L->ts, ev[i].data.u32, ev[i].events);
}

/* block until an fd is ready or until the absolute time `until` (hybrid mode); 1 when it
 * waited and handed over every fd that was ready (fewer than its 64 events), 0 otherwise */
static int wait_until(loop_t *L, int64_t until) {
    int64_t d = until - mono_ns();
    if (d <= 0)
        return 0;
    struct timespec ts = ns_to_timespec(d);
    struct epoll_event ev[64];
    int n = epoll_pwait2(L->epfd, ev, 64, &ts, NULL);
    for (int i = 0; i < n; i++)
        L->tp->on_event(L->ts, ev[i].data.u32, ev[i].events);
    return n >= 0 && n < 64;
}

/* the instant a request's --timeout-ms counts from (relative): its first transmission, or its
 * schedule for a transport that may hold requests back (both in index order) */
static inline int64_t timeout_base(const loop_t *L, const req_t *r) {
    return L->tp->timeout_from_schedule ? r->sched_ns : r->sent_ns;
}

static void check_timeouts(loop_t *L, int64_t now) {
    ge_t *g = L->g;
    int64_t rel = now - g->start_mono;
    while (L->to_head < L->next) {
        req_t *r = &g->reqs[L->to_head];
        if (!(r->flags & RF_DONE)) {
            if (rel - timeout_base(L, r) < g->timeout_ns)
                break;
            loop_finish(L, r, O_TIMEOUT);
        }
        L->to_head++;
    }
}

/* Re-measures the REALTIME->MONOTONIC offset once a second (16 brackets, about 1 µs): only when
 * no send is due, and never between a datagram's arrival and its stamp's conversion. */
static void refresh_clock_map(loop_t *L, int64_t now) {
    if (now - L->cmap.measured_at < CLOCK_MAP_REFRESH_NS)
        return;
    clock_map_refresh(&L->cmap, now, CLOCK_MAP_REFRESH_NS);
    if (L->cmap.bracket_ns > L->g->map_bracket_ns)
        L->g->map_bracket_ns = L->cmap.bracket_ns;
}

/* send request `next` now; the transport reads the sent timestamp right before its first byte
 * leaves */
static void send_next(loop_t *L) {
    ge_t *g = L->g;
    uint32_t idx = (uint32_t)L->next;
    req_t *r = &g->reqs[idx];
    L->next++;
    L->outstanding++;
    for (int attempt = 0;; attempt++) {
        int64_t t;
        int rc = L->tp->send(L->ts, idx, &t);
        if (rc == 2) /* taken over (queued for a connection): the transport ends it */
            return;
        if (rc > 0) {
            loop_mark_sent(L, r, t);
            return;
        }
        /* full socket buffer: read responses and retry briefly; otherwise a local failure */
        if (rc < 0 && (errno == EAGAIN || errno == ENOBUFS || errno == EINTR) && attempt < 1000) {
            drain(L);
            continue;
        }
        loop_finish(L, r, O_ERROR); /* not sent: no sent_ns, no code */
        return;
    }
}

static void wait_for_start(loop_t *L) {
    ge_t *g = L->g;
    /* sleep until 1 ms before the start, then spin */
    struct timespec ts = ns_to_timespec(g->start_mono - NS_PER_MS);
    while (!ge_stop_signal && mono_ns() < g->start_mono - NS_PER_MS)
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    while (!ge_stop_signal && mono_ns() < g->start_mono)
        cpu_relax();
}

/* Called right after check_timeouts(), which leaves to_head == next or on a request that is not
 * done (the transport's timers() in between never finish one): that request's timeout is the
 * next; the transport's own timers may come earlier. */
static int64_t next_deadline(const loop_t *L) {
    const ge_t *g = L->g;
    int64_t d = INT64_MAX;
    if (L->to_head < L->next)
        d = g->start_mono + timeout_base(L, &g->reqs[L->to_head]) + g->timeout_ns;
    int64_t t = L->tp->next_deadline(L->ts);
    return t < d ? t : d;
}

/* the housekeeping between sends: timeouts, the transport's timers, the clock map */
static int64_t housekeeping(loop_t *L) {
    int64_t now = mono_ns();
    check_timeouts(L, now);
    L->tp->timers(L->ts, now);
    refresh_clock_map(L, now);
    return now;
}

/* one round between sends: what arrived, then the housekeeping */
static int64_t tick(loop_t *L) {
    drain(L);
    return housekeeping(L);
}

int loop_run(ge_t *g) {
    loop_t *L = calloc(1, sizeof *L);
    if (!L) {
        fprintf(stderr, "gateway-emulator: out of memory\n");
        return 1;
    }
    L->g = g;
    L->tp = g->tp;
    int rc = 1;
    clock_map_init(&L->cmap);
    g->map_bracket_ns = L->cmap.bracket_ns;
    L->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (L->epfd < 0 || !(L->ts = L->tp->attach(L, g)))
        goto out;
    if (g->wait == WAIT_HYBRID)
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    rc = 0;
    /* Lock what the loop uses, now that it is all allocated: no page faults on the hot path.
     * Best effort, and never MCL_FUTURE: under RLIMIT_MEMLOCK (8 MiB in a default container)
     * that made every later allocation fail once the trace's arrays outgrew it. */
    /* Not for a transport that paces itself: its record table is reserved, not touched, and
     * locking would fault all of it in (closed loop: --max-requests records). */
    g->memory_locked = !L->tp->running && mlockall(MCL_CURRENT) == 0;

    progress_set(g, PG_STATE, ST_WAITING);
    wait_for_start(L);
    progress_set(g, PG_STATE, ST_SENDING);

    const int busy = g->wait == WAIT_BUSY;
    int burst = 0;
    while (L->next < g->n && !ge_stop_signal) {
        int64_t due = g->start_mono + g->reqs[L->next].sched_ns;
        int64_t now = mono_ns();
        if (now >= due && burst < SENDS_BEFORE_DRAIN) {
            send_next(L);
            burst++;
            continue;
        }
        burst = 0;
        now = tick(L);
        if (!busy && due - now > g->spin_ns) {
            int64_t until = due - g->spin_ns, d = next_deadline(L);
            wait_until(L, d < until ? d : until);
        }
    }

    /* transport-paced requests (closed loop): the transport issues them from on_event() and
     * timers() until it stops; the loop waits for the earliest of its deadlines (spinning the
     * last --spin-us in hybrid mode, as before a scheduled send) */
    /* right after a wait that handed over every ready fd, a drain would find none: skipped
     * (one epoll_wait per round, as an event loop like wrk's; the kernel stamps keep the
     * arrival instants either way) */
    int drained = 0;
    while (L->tp->running && L->tp->running(L->ts) && !ge_stop_signal) {
        int64_t now = drained ? housekeeping(L) : tick(L);
        drained = 0;
        if (!busy && L->tp->running(L->ts)) { /* it may have stopped in tick(): no wait then */
            int64_t d = next_deadline(L);
            if (d - now > g->spin_ns)
                drained = wait_until(L, d - g->spin_ns);
        }
    }

    progress_set(g, PG_STATE, ST_DRAINING);
    while (L->outstanding > 0 && !ge_stop_signal) {
        int64_t now = tick(L);
        if (!busy && L->outstanding > 0) {
            int64_t d = next_deadline(L);
            if (d - now > DRAIN_WAIT_CAP_NS)
                d = now + DRAIN_WAIT_CAP_NS;
            wait_until(L, d);
        }
    }
    g->end_mono = mono_ns();

    /* interrupted: what is not finished gets its honest outcome (see README) */
    int64_t rel = g->end_mono - g->start_mono;
    for (size_t i = 0; i < g->n; i++) {
        req_t *r = &g->reqs[i];
        if (r->flags & RF_DONE)
            continue;
        if (!(r->flags & RF_SENT)) {
            r->outcome = O_UNSENT;
            r->flags |= RF_DONE;
        } else {
            loop_finish(L, r, rel - timeout_base(L, r) >= g->timeout_ns ? O_TIMEOUT : O_ERROR);
        }
    }
    progress_set(g, PG_STATE, ST_DONE);
out:
    if (rc)
        fprintf(stderr, "gateway-emulator: cannot set up the event loop: %s\n", strerror(errno));
    if (g->memory_locked)
        munlockall();
    if (L->ts)
        L->tp->detach(L->ts);
    if (L->epfd >= 0)
        close(L->epfd);
    free(L);
    return rc;
}
