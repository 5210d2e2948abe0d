/* loop.c - one event loop of wot-fleet: its block of devices, their jobs and timers.
 *
 * epoll (level-triggered) carries one UDP socket per device with the device pointer as its
 * data, a timerfd armed (absolute CLOCK_MONOTONIC) for the earliest timer of the heap, and an
 * eventfd through which the workers hand back busy-mode jobs and main() asks the loop to stop.
 * A request's life: read with its kernel receive stamp -> job taken from the pool -> the
 * device's slot (or its FIFO queue, or 5.03 when that is full) -> service (a heap timer for
 * sleep, a worker for busy) -> response (in the ACK, or as a separate CON response kept for
 * retransmission until ACKed, or NON) -> one log row -> the next queued job of the device. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "coap_wire.h"
#include "fleet.h"
#include "fleet_push.h"
#include "rxstamp.h"

/* RFC 7252 §4.8 transmission parameters for the separate CON responses */
#define ACK_TIMEOUT_NS 2000000000ULL
#define MAX_RETRANSMIT 4
/* One datagram per readiness event: a device's socket rarely holds a second one, and
 * level-triggered epoll reports it again if it does, so draining to EAGAIN would cost one
 * more recvmsg per datagram for nothing. */
#define EP_EVENTS 256
#define DONE_BATCH 256
#define LINK_FORMAT 40      /* application/link-format */
#define TIMER_FIRED UINT64_MAX  /* l->armed after the timerfd fired: timerfd_settime is due */

/* ---- memory reserved once: untouched pages of these arrays cost nothing ---- */

static void *reserve(size_t n, size_t size) {
    if (n == 0)
        n = 1;
    void *p = mmap(NULL, n * size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void unreserve(void *p, size_t n, size_t size) {
    if (p)
        munmap(p, (n ? n : 1) * size);
}

static uint64_t xorshift(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* ---- job pool and the per-device lists ---- */

static uint32_t job_alloc(struct fl_loop *l) {
    uint32_t j = l->jfree;
    if (j != FL_NIL) {
        l->jfree = l->jobs[j].next;
        return j;
    }
    return l->jbump < l->jcap ? l->jbump++ : FL_NIL;
}

static void live_insert(struct fl_loop *l, struct fl_device *d, uint32_t j) {
    struct fl_job *J = &l->jobs[j];
    J->live_prev = FL_NIL;
    J->live_next = d->live_head;
    if (d->live_head != FL_NIL)
        l->jobs[d->live_head].live_prev = j;
    d->live_head = j;
}

static void job_free(struct fl_loop *l, uint32_t j) {
    struct fl_job *J = &l->jobs[j];
    struct fl_device *d = &l->dev[J->dev];
    if (J->live_prev != FL_NIL)
        l->jobs[J->live_prev].live_next = J->live_next;
    else
        d->live_head = J->live_next;
    if (J->live_next != FL_NIL)
        l->jobs[J->live_next].live_prev = J->live_prev;
    J->state = JS_FREE;
    J->next = l->jfree;
    l->jfree = j;
}

/* ---- timers: a binary min-heap of jobs keyed by deadline ---- */

static void heap_set(struct fl_loop *l, uint32_t pos, struct fl_heap_ent e) {
    l->heap[pos] = e;
    l->jobs[e.job].heap_pos = pos;
}

static void heap_up(struct fl_loop *l, uint32_t pos) {
    struct fl_heap_ent e = l->heap[pos];
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (l->heap[parent].at <= e.at)
            break;
        heap_set(l, pos, l->heap[parent]);
        pos = parent;
    }
    heap_set(l, pos, e);
}

static void heap_down(struct fl_loop *l, uint32_t pos) {
    struct fl_heap_ent e = l->heap[pos];
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= l->hn)
            break;
        if (c + 1 < l->hn && l->heap[c + 1].at < l->heap[c].at)
            c++;
        if (l->heap[c].at >= e.at)
            break;
        heap_set(l, pos, l->heap[c]);
        pos = c;
    }
    heap_set(l, pos, e);
}

static void timer_add(struct fl_loop *l, uint32_t j, uint64_t at) {
    heap_set(l, l->hn, (struct fl_heap_ent){at, j});
    heap_up(l, l->hn++);
}

static void timer_cancel(struct fl_loop *l, uint32_t j) {
    uint32_t pos = l->jobs[j].heap_pos;
    if (pos == FL_NIL)
        return;
    l->jobs[j].heap_pos = FL_NIL;
    if (--l->hn == pos)
        return;
    uint32_t moved = l->heap[l->hn].job;
    heap_set(l, pos, l->heap[l->hn]);
    heap_up(l, pos);
    heap_down(l, l->jobs[moved].heap_pos);
}

/* The timerfd fires spin_ns before the earliest deadline (then the loop polls epoll without
 * blocking up to it, see fl_loop_run), or at the deadline with --spin-us 0. */
/* the earliest timer: a job's, or a pushing device's (fleet_push.h); 0 = none */
static uint64_t earliest(const struct fl_loop *l) {
    uint64_t next = l->hn ? l->heap[0].at : 0;
    uint64_t held = l->imp ? fl_imp_next_due(l) : 0;   /* impaired datagrams (impair.c) */
    if (held && (!next || held < next))
        next = held;
    uint64_t push = l->push ? fl_push_next(l) : 0;
    return push && (!next || push < next) ? push : next;
}

static void timer_arm(struct fl_loop *l) {
    uint64_t next = earliest(l);
    if (next && l->spin_ns)
        next = next > l->spin_ns ? next - l->spin_ns : 1;
    if (next == l->armed)
        return;
    struct itimerspec its = {.it_value = ns_to_timespec((int64_t)next)};
    timerfd_settime(l->tfd, TFD_TIMER_ABSTIME, &its, NULL);  /* 0 disarms */
    l->armed = next;
}

/* ---- sending and logging ---- */

static uint64_t send_to(struct fl_loop *l, struct fl_device *d, const struct sockaddr_in *peer,
                        size_t len) {
    uint64_t now = (uint64_t)mono_ns();
    if (len && d->imp && !fl_imp_out(l, d, peer, len, now))
        return now;                 /* dropped or held by its impairment (impair.c) */
    if (len == 0 || sendto(d->fd, l->tx, len, MSG_DONTWAIT, (const struct sockaddr *)peer,
                           sizeof *peer) < 0) {
        l->st.send_errors++;
        return 0;
    }
    return now;
}

static void send_empty(struct fl_loop *l, struct fl_device *d, const struct sockaddr_in *peer,
                       uint8_t type, uint16_t mid) {
    send_to(l, d, peer, fl_coap_build(l->tx, sizeof l->tx, type, 0, mid, NULL, 0, -1, NULL, 0));
}

static void log_row(struct fl_loop *l, struct fl_device *d, const struct fl_log_row *r) {
    if (l->log_n < l->log_cap) {
        l->log[l->log_n++] = *r;
        return;
    }
    l->log_dropped++;
    d->c.log_dropped++;
}

static uint8_t success_code(uint8_t method) {
    return method == FL_GET ? FL_CONTENT : method == FL_DELETE ? FL_DELETED : FL_CHANGED;
}

/* The response of a job (also its retransmissions: the same bytes). */
static size_t build_response(struct fl_loop *l, const struct fl_job *J) {
    if (J->kind == FL_JOB_NOTIFY)
        return fl_obs_build(l, J);
    uint8_t type = J->type == FL_CON ? (J->piggyback ? FL_ACK : FL_CON) : FL_NON;
    uint16_t mid = type == FL_ACK ? J->req_mid : J->resp_mid;
    size_t len;
    if (fl_block_response(l, J, type, mid, &len))
        return len;
    size_t nx = J->code == FL_CONTENT ? J->res->payload_bytes : 0;
    return fl_coap_build(l->tx, sizeof l->tx, type, (uint8_t)J->code, mid, J->token, J->tkl, -1,
                         J->res->body, nx);   /* its own bytes, or filler when NULL */
}

/* An answer decided at once (4.04, 5.03): piggy-backed for CON, NON for NON. */
static uint64_t answer_now(struct fl_loop *l, struct fl_device *d, const struct fl_msg *m,
                           const struct sockaddr_in *peer, uint8_t code, int cf,
                           const char *body, size_t blen) {
    uint8_t type = m->type == FL_CON ? FL_ACK : FL_NON;
    uint16_t mid = m->type == FL_CON ? m->mid : d->next_mid++;
    return send_to(l, d, peer, fl_coap_build(l->tx, sizeof l->tx, type, code, mid, m->token,
                                             m->tkl, cf, body, blen));
}

/* ---- service ---- */

static void start(struct fl_loop *l, uint32_t j);

/* the device's slot is free again: its next waiting job starts */
static void next_queued(struct fl_loop *l, struct fl_device *d) {
    if (d->queued > 0 && d->busy < d->slots) {
        uint32_t next = d->q_head;
        d->q_head = l->jobs[next].next;
        if (d->q_head == FL_NIL)
            d->q_tail = FL_NIL;
        d->queued--;
        start(l, next);
    }
}

static void enqueue(struct fl_loop *l, struct fl_device *d, uint32_t j) {
    if (d->q_tail != FL_NIL)
        l->jobs[d->q_tail].next = j;
    else
        d->q_head = j;
    d->q_tail = j;
    d->queued++;
}

static void complete(struct fl_loop *l, uint32_t j) {
    struct fl_job *J = &l->jobs[j];
    struct fl_device *d = &l->dev[J->dev];
    d->busy--;
    if (J->kind == FL_JOB_READ) {   /* a sensor read: its observers are notified */
        fl_obs_read_done(l, j);
        next_queued(l, d);
        return;
    }
    J->code = success_code(J->method);
    if (J->type == FL_CON && !J->piggyback)
        J->resp_mid = d->next_mid++;
    else if (J->type == FL_NON)
        J->resp_mid = d->next_mid++;
    J->sent_ns = send_to(l, d, &J->peer, build_response(l, J));
    struct fl_log_row r = {.arrival_ns = J->arrival_ns, .start_ns = J->start_ns,
                           .end_ns = J->end_ns, .arrival_k_ns = J->arrival_k_ns,
                           .sent_ns = J->sent_ns, .due_ns = J->due_ns, .res = J->res,
                           .device = d->index, .method = J->method, .code = (uint8_t)J->code,
                           .tkl = J->tkl};
    memcpy(r.token, J->token, J->tkl);
    log_row(l, d, &r);
    d->c.responses++;
    if (J->piggyback)
        d->c.piggybacked++;
    if (J->type == FL_CON && !J->piggyback) {
        /* RFC 7252 §4.2: initial timeout random in [ACK_TIMEOUT, ACK_TIMEOUT * 1.5] */
        J->state = JS_AWAIT_ACK;
        J->rtx = 0;
        J->rtx_timeout_ns = ACK_TIMEOUT_NS + xorshift(&l->rng) % (ACK_TIMEOUT_NS / 2 + 1);
        timer_add(l, j, (uint64_t)mono_ns() + J->rtx_timeout_ns);
    } else {
        if (J->type == FL_CON) {  /* remember it for a retransmitted request */
            d->last = (struct fl_last){.peer_addr = J->peer.sin_addr.s_addr,
                                       .peer_port = J->peer.sin_port, .mid = J->req_mid,
                                       .res = J->res, .code = (uint8_t)J->code, .tkl = J->tkl,
                                       .method = J->method, .has_block1 = J->has_block1,
                                       .has_block2 = J->has_block2, .block1 = J->block1,
                                       .block2 = J->block2};
            memcpy(d->last.token, J->token, J->tkl);
        }
        job_free(l, j);
    }
    next_queued(l, d);
}

static void start(struct fl_loop *l, uint32_t j) {
    struct fl_job *J = &l->jobs[j];
    struct fl_device *d = &l->dev[J->dev];
    d->busy++;
    uint64_t s = J->kind == FL_JOB_READ ? J->res->notify_service_ns : J->res->service_ns;
    J->start_ns = (uint64_t)mono_ns();
    J->due_ns = J->start_ns + s;
    if (s == 0) {
        J->end_ns = (uint64_t)mono_ns();
        complete(l, j);
    } else if (J->res->mode == MODE_SLEEP) {
        J->state = JS_SLEEPING;
        timer_add(l, j, J->due_ns);
    } else {
        J->state = JS_AT_WORKER;
        fl_work_submit(l, j);
    }
}

static void on_timers(struct fl_loop *l) {
    uint64_t now = (uint64_t)mono_ns();
    while (l->hn && l->heap[0].at <= now) {
        uint32_t j = l->heap[0].job;
        timer_cancel(l, j);
        struct fl_job *J = &l->jobs[j];
        if (J->state == JS_SLEEPING) {
            J->end_ns = (uint64_t)mono_ns();
            complete(l, j);
        } else if (J->state == JS_TICK) {
            fl_obs_tick(l, j);
        } else if (J->state == JS_AWAIT_ACK) {
            struct fl_device *d = &l->dev[J->dev];
            int notify = J->kind == FL_JOB_NOTIFY;
            if (J->rtx >= MAX_RETRANSMIT) {
                if (notify) {
                    fl_obs_rejected(l, j, 1);   /* libcoap drops the observer */
                } else {
                    l->st.rtx_gave_up++;
                    job_free(l, j);
                }
                continue;
            }
            J->rtx++;
            if (!notify)
                l->st.rtx_sent++;
            send_to(l, d, &J->peer, build_response(l, J));
            J->rtx_timeout_ns *= 2;
            timer_add(l, j, (uint64_t)mono_ns() + J->rtx_timeout_ns);
        }
        now = (uint64_t)mono_ns();
    }
    if (l->imp)
        fl_imp_release(l, now);     /* held datagrams that are due (impair.c) */
    if (l->push)                   /* the pushing devices' sends, retransmissions, timeouts */
        fl_push_on_timers(l, now);
}

/* ---- requests ---- */

static int same_peer(const struct sockaddr_in *a, const struct sockaddr_in *b) {
    return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

/* An empty ACK or RST from a client: the end of a separate CON response's exchange. */
static void on_ack_or_rst(struct fl_loop *l, struct fl_device *d, const struct fl_msg *m,
                          const struct sockaddr_in *peer) {
    for (uint32_t j = d->live_head; j != FL_NIL; j = l->jobs[j].live_next) {
        struct fl_job *J = &l->jobs[j];
        if (J->state == JS_AWAIT_ACK && J->resp_mid == m->mid && same_peer(&J->peer, peer)) {
            timer_cancel(l, j);
            if (J->kind == FL_JOB_NOTIFY && m->type == FL_RST) {
                fl_obs_rejected(l, j, 0);   /* the observer is gone */
                return;
            }
            if (m->type == FL_RST && J->kind == FL_JOB_REQUEST)
                l->st.rst_in++;
            job_free(l, j);
            return;
        }
    }
    if (m->type == FL_RST && d->obs)
        fl_obs_rst(l, d, m->mid, peer);     /* a NON notification's */
}

/* A CON request seen before (RFC 7252 §4.5: same endpoint and message ID) is not served
 * again: while it is pending its empty ACK is repeated (separate) or nothing is sent (the
 * response will travel in the ACK); after a piggy-backed answer that answer is repeated.
 * Returns 1 when m was such a duplicate. *token_busy is set when another pending request of
 * this client carries the same token (wot-device answers that with 5.03, as libcoap's async
 * lookup by session + token refuses it). */
static int duplicate(struct fl_loop *l, struct fl_device *d, const struct fl_msg *m,
                     const struct sockaddr_in *peer, int *token_busy) {
    *token_busy = 0;
    for (uint32_t j = d->live_head; j != FL_NIL; j = l->jobs[j].live_next) {
        struct fl_job *J = &l->jobs[j];
        if (J->kind != FL_JOB_REQUEST || !same_peer(&J->peer, peer))
            continue;
        if (m->type == FL_CON && J->type == FL_CON && J->req_mid == m->mid) {
            l->st.duplicates++;
            if (!J->piggyback)
                send_empty(l, d, peer, FL_ACK, m->mid);
            return 1;
        }
        if (J->state != JS_AWAIT_ACK && J->tkl == m->tkl && !memcmp(J->token, m->token, m->tkl))
            *token_busy = 1;
    }
    if (m->type == FL_CON && d->last.peer_addr == peer->sin_addr.s_addr &&
        d->last.peer_port == peer->sin_port && d->last.mid == m->mid) {
        l->st.duplicates++;
        struct fl_job again = {.type = FL_CON, .piggyback = 1, .req_mid = m->mid,
                               .code = d->last.code, .res = d->last.res, .tkl = d->last.tkl,
                               .method = d->last.method, .has_block1 = d->last.has_block1,
                               .has_block2 = d->last.has_block2, .block1 = d->last.block1,
                               .block2 = d->last.block2};
        memcpy(again.token, d->last.token, d->last.tkl);
        send_to(l, d, peer, build_response(l, &again));
        return 1;
    }
    return 0;
}

static const struct resource *find_resource(const struct resource_set *rs, const char *path) {
    for (size_t i = 0; i < rs->n; i++)
        if (strcmp(rs->v[i].path, path) == 0)
            return &rs->v[i];
    return NULL;
}

static int use_piggyback(const struct fl_device *d, const struct resource *res) {
    return d->response == FL_RESP_PIGGYBACK ||
           (d->response == FL_RESP_AUTO && res->service_ns <= d->piggyback_max_ns);
}

/* A request answered at once without service (4.04, 5.03): the answer, its row. */
static void refuse_now(struct fl_loop *l, struct fl_device *d, const struct fl_msg *m,
                       const struct sockaddr_in *peer, struct fl_log_row *r, uint8_t code) {
    d->c.responses++;
    r->code = code;
    r->sent_ns = answer_now(l, d, m, peer, code, -1, NULL, 0);
    log_row(l, d, r);
}

static void on_request(struct fl_loop *l, struct fl_device *d, const struct fl_msg *m,
                       const struct sockaddr_in *peer, uint64_t arrival, uint64_t arrival_k) {
    int token_busy;
    if (duplicate(l, d, m, peer, &token_busy))
        return;
    if (m->bad_option) {       /* RFC 7252 §5.4.1, as libcoap answers it (not logged) */
        answer_now(l, d, m, peer, FL_BAD_OPTION, -1, NULL, 0);
        return;
    }
    if (strcmp(m->path, ".well-known/core") == 0 && !m->path_too_long) {
        if (m->code == FL_GET)
            answer_now(l, d, m, peer, FL_CONTENT, LINK_FORMAT, d->rf->wkc, d->rf->wkc_len);
        else
            answer_now(l, d, m, peer, FL_METHOD_NOT_ALLOWED, -1, NULL, 0);
        return;
    }
    if (m->code < 1 || m->code > 4) {  /* FETCH, PATCH, ...: 4.05 like libcoap, not logged */
        answer_now(l, d, m, peer, FL_METHOD_NOT_ALLOWED, -1, NULL, 0);
        return;
    }
    const struct resource *res = m->path_too_long ? NULL : find_resource(&d->rf->rs, m->path);
    /* as wot-device's handler: Observe registrations first, then block-wise follow-ups;
     * neither is a request of the device log (observe.c, block.c) */
    if (res && d->obs && m->observe && fl_obs_request(l, d, m, peer, res))
        return;
    if (res && (m->has_block1 || m->has_block2) && fl_block_follow_up(l, d, m, peer, res))
        return;
    struct fl_log_row r = {.arrival_ns = arrival, .arrival_k_ns = arrival_k, .res = res,
                           .device = d->index, .method = m->code, .tkl = m->tkl};
    memcpy(r.token, m->token, m->tkl);
    d->c.requests++;
    l->st.requests++;
    if (!res) {
        d->c.not_found++;
        refuse_now(l, d, m, peer, &r, FL_NOT_FOUND);
        return;
    }
    uint32_t j = FL_NIL;
    if (!token_busy && (d->busy < d->slots || d->queued < d->queue_cap)) {
        j = job_alloc(l);
        if (j == FL_NIL)
            l->st.pool_503++;   /* the engine's own limit, not the device's queue */
    }
    if (j == FL_NIL) {
        d->c.overload_503++;
        refuse_now(l, d, m, peer, &r, FL_UNAVAILABLE);
        return;
    }
    struct fl_job *J = &l->jobs[j];
    *J = (struct fl_job){.dev = (uint32_t)(d - l->dev), .next = FL_NIL, .heap_pos = FL_NIL,
                         .state = JS_QUEUED, .method = m->code, .type = m->type, .tkl = m->tkl,
                         .piggyback = (uint8_t)use_piggyback(d, res), .req_mid = m->mid,
                         .res = res, .arrival_ns = arrival, .arrival_k_ns = arrival_k,
                         .peer = *peer, .has_block1 = m->has_block1,
                         .has_block2 = m->has_block2, .block1 = m->block1,
                         .block2 = m->block2};
    memcpy(J->token, m->token, m->tkl);
    live_insert(l, d, j);
    if (m->type == FL_CON && !J->piggyback)
        send_empty(l, d, peer, FL_ACK, m->mid);  /* the answer comes later (RFC 7252 §5.2.2) */
    if (d->busy < d->slots)
        start(l, j);
    else
        enqueue(l, d, j);
}

static void on_datagram(struct fl_loop *l, struct fl_device *d, size_t n,
                        const struct sockaddr_in *peer, uint64_t arrival, uint64_t arrival_k) {
    struct fl_msg m;
    if (fl_coap_parse(l->rx, n, &m)) {
        d->c.malformed++;
        return;
    }
    if (m.code == 0) {
        if (m.type == FL_CON)                       /* CoAP ping */
            send_empty(l, d, peer, FL_RST, m.mid);
        else if ((m.type == FL_ACK || m.type == FL_RST) &&
                 !(l->push && d->push != FL_NIL &&    /* one of the device's own requests? */
                   fl_push_on_empty(l, d, &m, peer, arrival, arrival_k)))
            on_ack_or_rst(l, d, &m, peer);
        return;
    }
    if ((m.code >> 5) && l->push && d->push != FL_NIL) {   /* the answer to its own request */
        fl_push_on_response(l, d, l->rx, n, &m, peer, arrival, arrival_k);
        return;
    }
    if (m.code >> 5) {                              /* a response: not expected here */
        if (m.type == FL_CON)
            send_empty(l, d, peer, FL_RST, m.mid);
        return;
    }
    if (m.type == FL_ACK || m.type == FL_RST) {     /* a request cannot be an ACK or RST */
        d->c.malformed++;
        return;
    }
    on_request(l, d, &m, peer, arrival, arrival_k);
}

static void on_readable(struct fl_loop *l, struct fl_device *d) {
    struct sockaddr_in peer;
    struct iovec iov = {.iov_base = l->rx, .iov_len = sizeof l->rx};
    rxstamp_ctl_t ctl;
    struct msghdr mh = rxstamp_msg(&iov, &ctl);
    mh.msg_name = &peer;
    mh.msg_namelen = sizeof peer;
    ssize_t n = recvmsg(d->fd, &mh, MSG_DONTWAIT);
    if (n < 0)
        return;                                     /* EAGAIN */
    uint64_t arrival = (uint64_t)mono_ns();
    int64_t rt = rxstamp_realtime_ns(&mh);
    uint64_t arrival_k = rt > 0 ? (uint64_t)clock_map_to_mono(&l->cmap, rt) : 0;
    if ((mh.msg_flags & MSG_TRUNC) || (size_t)n > FL_MAX_DATAGRAM ||
        mh.msg_namelen != sizeof peer || peer.sin_family != AF_INET) {
        d->c.malformed++;                            /* larger than one CoAP datagram here */
        return;
    }
    if (d->imp && !fl_imp_in(l, d, (size_t)n, &peer, arrival_k ? arrival_k : arrival))
        return;                                      /* dropped or held (impair.c) */
    on_datagram(l, d, (size_t)n, &peer, arrival, arrival_k);
}

/* Finished busy-mode jobs from the workers. */
static void on_done(struct fl_loop *l) {
    uint64_t v;
    if (read(l->wfd, &v, sizeof v) < 0) {
        /* EAGAIN: nothing (a stop request may have been read together with completions) */
    }
    uint32_t batch[DONE_BATCH];
    for (;;) {
        uint32_t n = 0;
        pthread_mutex_lock(&l->mu);
        while (l->dlen > 0 && n < DONE_BATCH) {
            batch[n++] = l->done[l->dhead];
            l->dhead = (l->dhead + 1) % l->wcap;
            l->dlen--;
        }
        pthread_mutex_unlock(&l->mu);
        if (n == 0)
            return;
        for (uint32_t i = 0; i < n; i++)
            complete(l, batch[i]);
    }
}

void *fl_loop_run(void *arg) {
    struct fl_loop *l = arg;
    char name[16];
    snprintf(name, sizeof name, "fleet-loop%d", l->id);
    pthread_setname_np(pthread_self(), name);  /* names the thread in top -H and /proc/PID/task */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  /* timers end sleep services within µs */
    if (l->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(l->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    struct epoll_event ev[EP_EVENTS];
    while (!l->stop) {
        /* within spin_ns of the earliest timer: poll instead of sleeping, so the service ends
         * on time without the wake-up latency (costs that CPU time per timer) */
        int timeout = -1;
        uint64_t first = earliest(l);
        if (l->spin_ns && first && first <= (uint64_t)mono_ns() + l->spin_ns) {
            timeout = 0;
            l->st.spins++;
        }
        int n = epoll_wait(l->ep, ev, EP_EVENTS, timeout);
        int64_t t0 = mono_ns();
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "wot-fleet: loop %d: epoll_wait: %s\n", l->id, strerror(errno));
            break;
        }
        l->st.wakeups++;
        on_timers(l);   /* services due now end before a batch of new requests is read */
        for (int i = 0; i < n; i++) {
            void *p = ev[i].data.ptr;
            if (p == &l->tfd) {
                /* expired: timer_arm() below must set it again or disarm it, which also clears
                 * its expiration count (no read() needed) */
                l->armed = TIMER_FIRED;
            } else if (p == &l->wfd) {
                on_done(l);
            } else {
                on_readable(l, p);
            }
        }
        if (l->push)
            fl_push_on_ctl(l);      /* the harness's push-go / push-start, the stop */
        on_timers(l);
        timer_arm(l);
        int64_t t1 = mono_ns();
        if (n == 0 && timeout == 0) {       /* a poll while spinning: not a wake-up */
            l->st.wakeups--;
            l->st.busy_ns -= (uint64_t)(t1 - t0);
        }
        l->st.busy_ns += (uint64_t)(t1 - t0);
        clock_map_refresh(&l->cmap, t1, CLOCK_MAP_REFRESH_NS);
    }
    l->st.cpu_ns = (uint64_t)clock_read_ns(CLOCK_THREAD_CPUTIME_ID);
    return NULL;
}

void fl_loop_wake(struct fl_loop *l) {
    uint64_t one = 1;
    while (write(l->wfd, &one, sizeof one) < 0 && errno == EINTR) {
    }
}

static int epoll_add(int ep, int fd, void *ptr) {
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = ptr};
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
}

/* One device's endpoint: a non-blocking UDP socket bound to its address, kernel receive
 * stamps on, a receive buffer of `rcvbuf` bytes (0 = the kernel's default). */
static int open_endpoint(struct fleet *f, struct fl_loop *l, struct fl_device *d) {
    d->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (d->fd < 0) {
        fprintf(stderr, "wot-fleet: %s:%u: cannot open a socket for %s: %s\n", f->devices_file,
                d->line, d->listen, strerror(errno));
        return -1;
    }
    if (f->rcvbuf > 0)
        setsockopt(d->fd, SOL_SOCKET, SO_RCVBUF, &f->rcvbuf, sizeof f->rcvbuf);
    if (rxstamp_enable(d->fd))
        l->st.no_kernel_stamps++;
    if (bind(d->fd, (const struct sockaddr *)&d->addr, sizeof d->addr)) {
        fprintf(stderr, "wot-fleet: %s:%u: cannot bind %s: %s\n", f->devices_file, d->line,
                d->listen, strerror(errno));
        return -1;
    }
    if (epoll_add(l->ep, d->fd, d)) {
        fprintf(stderr, "wot-fleet: epoll_ctl: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

int fl_loop_init(struct fleet *f, struct fl_loop *l, int id, uint32_t first, uint32_t n) {
    l->id = id;
    l->dev = f->dev + first;
    l->ndev = n;
    l->cpu = f->ncpus ? f->cpus[id % f->ncpus] : -1;
    l->spin_ns = f->spin_ns;
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    l->wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    l->rng = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)mono_ns() + (uint64_t)id);
    l->jfree = FL_NIL;
    clock_map_init(&l->cmap);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    /* every device's slots + queue, twice: a separate CON response keeps its job until its
     * ACK while the slot serves the next request */
    uint64_t jobs = 0, slots = 0;
    for (uint32_t i = 0; i < n; i++) {
        jobs += 2 * ((uint64_t)l->dev[i].slots + l->dev[i].queue_cap);
        slots += l->dev[i].slots;
    }
    if (fl_obs_init(f, l) || fl_imp_init(f, l))   /* their pools (observe.c, impair.c) */
        return -1;
    jobs += fl_obs_jobs(l);
    l->jcap = (uint32_t)(jobs < FL_NIL - 1 ? jobs : FL_NIL - 1);
    l->wcap = (uint32_t)slots;
    l->log_cap = f->log_capacity;
    l->jobs = reserve(l->jcap, sizeof *l->jobs);
    l->heap = reserve(l->jcap, sizeof *l->heap);
    l->work = reserve(l->wcap, sizeof *l->work);
    l->done = reserve(l->wcap, sizeof *l->done);
    l->log = reserve(l->log_cap, sizeof *l->log);
    if (l->ep < 0 || l->tfd < 0 || l->wfd < 0 || !l->jobs || !l->heap || !l->work || !l->done ||
        !l->log || epoll_add(l->ep, l->tfd, &l->tfd) || epoll_add(l->ep, l->wfd, &l->wfd)) {
        fprintf(stderr, "wot-fleet: loop %d: cannot create its epoll/timerfd/eventfd or reserve "
                "memory: %s\n", id, strerror(errno));
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        struct fl_device *d = &l->dev[i];
        d->q_head = d->q_tail = d->live_head = FL_NIL;
        d->next_mid = (uint16_t)xorshift(&l->rng);
        if (open_endpoint(f, l, d))
            return -1;
    }
    fl_obs_start(l);
    return 0;
}

void fl_loop_free(struct fl_loop *l) {
    fl_obs_free(l);
    fl_imp_free(l);
    for (uint32_t i = 0; l->dev && i < l->ndev; i++)
        if (l->dev[i].fd >= 0) {
            close(l->dev[i].fd);
            l->dev[i].fd = -1;
        }
    if (l->ep >= 0)
        close(l->ep);
    if (l->tfd >= 0)
        close(l->tfd);
    if (l->wfd >= 0)
        close(l->wfd);
    unreserve(l->jobs, l->jcap, sizeof *l->jobs);
    unreserve(l->heap, l->jcap, sizeof *l->heap);
    unreserve(l->work, l->wcap, sizeof *l->work);
    unreserve(l->done, l->wcap, sizeof *l->done);
    unreserve(l->log, l->log_cap, sizeof *l->log);
    l->jobs = NULL;
    l->heap = NULL;
    l->work = l->done = NULL;
    l->log = NULL;
    l->ep = l->tfd = l->wfd = -1;
}

/* ---- for fleet/observe.c, block.c and impair.c (declared in fleet.h) ---- */

void *fl_reserve(size_t n, size_t size) { return reserve(n, size); }

void fl_unreserve(void *p, size_t n, size_t size) { unreserve(p, n, size); }

uint32_t fl_job_take(struct fl_loop *l, uint32_t dev, uint8_t kind) {
    uint32_t j = job_alloc(l);
    if (j == FL_NIL)
        return FL_NIL;
    l->jobs[j] = (struct fl_job){.dev = dev, .next = FL_NIL, .heap_pos = FL_NIL,
                                 .state = JS_QUEUED, .kind = kind};
    live_insert(l, &l->dev[dev], j);
    return j;
}

void fl_job_drop(struct fl_loop *l, uint32_t j) {
    timer_cancel(l, j);
    job_free(l, j);
}

void fl_timer_at(struct fl_loop *l, uint32_t j, uint64_t at) {
    timer_cancel(l, j);
    timer_add(l, j, at);
}

int fl_serve(struct fl_loop *l, uint32_t j) {
    struct fl_device *d = &l->dev[l->jobs[j].dev];
    if (d->busy < d->slots)
        start(l, j);
    else if (d->queued < d->queue_cap)
        enqueue(l, d, j);
    else
        return -1;
    return 0;
}

uint64_t fl_send(struct fl_loop *l, struct fl_device *d, const struct sockaddr_in *peer,
                 size_t len) {
    return send_to(l, d, peer, len);
}

uint64_t fl_ack_timeout(struct fl_loop *l) {
    return ACK_TIMEOUT_NS + xorshift(&l->rng) % (ACK_TIMEOUT_NS / 2 + 1);
}

void fl_process_datagram(struct fl_loop *l, struct fl_device *d, size_t n,
                         const struct sockaddr_in *peer, uint64_t arrival, uint64_t arrival_k) {
    on_datagram(l, d, n, peer, arrival, arrival_k);
}
