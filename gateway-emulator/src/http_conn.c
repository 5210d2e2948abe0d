/* http_conn.c - the http:// transport on the loop thread: a due request takes an idle
 * connection of its target (an open one first; a closed one is connected for it, and its R then
 * includes the TCP handshake) or waits in its target's FIFO, recorded (RF_QUEUED, queued_ns);
 * one request in flight per connection (no pipelining). Responses are read with recvmsg() and
 * the kernel's receive stamp (SO_TIMESTAMPNS works on TCP: the stamp of the last segment the
 * read returned, so the completing read's stamp is when the response's last byte arrived).
 * Outcomes: 2xx ok, any other status error (code kept), refused/reset/closed before the answer
 * reset, a malformed response error without a code; --timeout-ms from the schedule (loop.c).
 * No allocation, no logging: every buffer was sized by http_prep.c. */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"   /* common/clock.h */
#include "rxstamp.h" /* common/rxstamp.h */
#include "http.h"

static inline uint32_t conn_index(const http_t *H, const hconn_t *c) {
    return (uint32_t)(c - H->c);
}

/* ---- idle deques: open connections in front, closed ones behind ---- */
static void idle_put(http_t *H, hconn_t *c) {
    hep_t *E = &H->eps[c->ep];
    uint32_t ci = conn_index(H, c);
    if (c->state == CS_FREE) {
        E->ihead = (E->ihead + E->iconns - 1) % E->iconns;
        E->idle[E->ihead] = ci;
    } else {
        E->idle[(E->ihead + E->icount) % E->iconns] = ci;
    }
    E->icount++;
}

static hconn_t *idle_take(http_t *H, hep_t *E) {
    if (!E->icount)
        return NULL;
    hconn_t *c = &H->c[E->idle[E->ihead]];
    E->ihead = (E->ihead + 1) % E->iconns;
    E->icount--;
    return c;
}

void http_close_conn(hconn_t *c) {
    if (c->fd >= 0)
        close(c->fd); /* leaves the epoll set with it */
    c->fd = -1;
    c->state = CS_CLOSED;
}

static void want_out(http_t *H, hconn_t *c, int on) {
    if (c->want_out == on)
        return;
    c->want_out = (uint8_t)on;
    loop_rewatch(H->L, c->fd, on ? EPOLLIN | EPOLLOUT : EPOLLIN, conn_index(H, c));
}

/* a connection no request holds: back to its target's idle deque (open loop; a closed-loop
 * client keeps its own) */
static void release(http_t *H, hconn_t *c) {
    if (!H->g->closed.clients)
        idle_put(H, c);
}

/* a reset (refused, reset, closed before the answer) is known at t: its received_ns, as a CoAP
 * RST's arrival */
static void reset_at(http_t *H, req_t *r, int64_t t) {
    r->recv_ns = t - H->g->start_mono;
}

/* the endpoint's queue is served on the next timers() pass (never from inside loop_finish) */
static void pump_later(http_t *H, uint16_t ep) {
    if (!H->eps[ep].pump && H->eps[ep].qhead < H->eps[ep].qtail) {
        H->eps[ep].pump = 1;
        H->pump[H->npump++] = ep;
    }
}

/* the connection's request ends with `outcome`; the connection goes back idle */
static void end_request(http_t *H, hconn_t *c, int outcome) {
    req_t *r = &H->g->reqs[c->cur];
    r->conn = 0;
    if (c->state != CS_FREE)
        http_close_conn(c);
    release(H, c);
    if (outcome == O_RESET)
        reset_at(H, r, mono_ns());
    loop_finish(H->L, r, outcome);
}

/* writes what is left of the request; 0 ok (maybe partly, EPOLLOUT then), -1 failed */
static int write_more(http_t *H, hconn_t *c) {
    const uint8_t *b = c->own ? H->copies + (size_t)conn_index(H, c) * H->copy_len
                              : H->g->arena + H->off[c->tmpl];
    uint64_t len = H->len[c->tmpl];
    while (c->woff < len) {
        ssize_t k = send(c->fd, b + c->woff, len - c->woff, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0) {
            if (errno == EAGAIN || errno == EINTR)
                break;
            return -1;
        }
        c->woff += (uint64_t)k;
    }
    want_out(H, c, c->woff < len);
    return 0;
}

/* the request's per-request values (template_vars.h) into the connection's copy of its bytes */
static void fill_values(http_t *H, hconn_t *c, uint32_t idx, uint32_t tmpl) {
    c->own = H->slot_n && H->slot_n[tmpl];
    if (!c->own)
        return;
    uint8_t *copy = H->copies + (size_t)conn_index(H, c) * H->copy_len;
    memcpy(copy, H->g->arena + H->off[tmpl], H->len[tmpl]);
    tv_values_t v = {idx, conn_index(H, c), H->g->http_opt.seed, clock_read_ns(CLOCK_REALTIME)};
    tv_fill(copy, H->slots + H->slot_first[tmpl], H->slot_n[tmpl], &v);
}

int http_start_on(http_t *H, hconn_t *c, uint32_t idx, uint32_t tmpl, int64_t *t) {
    req_t *r = &H->g->reqs[idx];
    c->cur = idx;
    c->tmpl = tmpl;
    c->woff = 0;
    fill_values(H, c, idx, tmpl);
    r->conn = conn_index(H, c) + 1;
    if (c->state == CS_FREE) {
        c->state = CS_BUSY;
        http_parser_reset(&c->p);
        c->last_kt = 0;
        *t = mono_ns();
        if (write_more(H, c) == 0)
            return 1;
        /* the server closed this idle connection before we saw it: the request met a reset */
        loop_mark_sent(H->L, r, *t);
        H->n.resets++;
        end_request(H, c, O_RESET);
        return 2;
    }
    r->flags |= RF_NEWCONN;
    *t = mono_ns(); /* its R includes the handshake: it leaves with the SYN */
    if (http_open_socket(H, c) < 0) {
        int err = errno;
        H->n.connect_failures++;
        r->conn = 0;
        release(H, c);
        if (err != ECONNREFUSED)
            return 0;
        H->n.refused++;
        loop_mark_sent(H->L, r, *t);
        reset_at(H, r, mono_ns());
        loop_finish(H->L, r, O_RESET);
        return 2;
    }
    c->state = CS_CONNECTING;
    c->want_out = 1;
    c->last_kt = 0;
    http_parser_reset(&c->p);
    if (loop_watch(H->L, c->fd, EPOLLIN | EPOLLOUT, conn_index(H, c)) < 0) {
        http_close_conn(c);
        r->conn = 0;
        release(H, c);
        return 0;
    }
    return 1;
}

/* serve the target's queue while it has idle connections */
static void serve(http_t *H, hep_t *E) {
    ge_t *g = H->g;
    while (E->qhead < E->qtail && E->icount) {
        uint32_t idx = E->q[E->qhead++];
        if (g->reqs[idx].flags & RF_DONE) /* timed out while waiting */
            continue;
        int64_t t;
        int rc = http_start_on(H, idle_take(H, E), idx, idx, &t);
        if (rc == 1)
            loop_mark_sent(H->L, &g->reqs[idx], t);
        else if (rc == 0)
            loop_finish(H->L, &g->reqs[idx], O_ERROR);
    }
}

int http_send(void *ts, uint32_t idx, int64_t *t) {
    http_t *H = ts;
    req_t *r = &H->g->reqs[idx];
    hep_t *E = &H->eps[r->ep];
    if (E->qhead == E->qtail && E->icount)
        return http_start_on(H, idle_take(H, E), idx, idx, t);
    r->flags |= RF_QUEUED; /* every connection of its target is busy: it waits, in order */
    r->queued_ns = mono_ns() - H->g->start_mono;
    E->q[E->qtail++] = idx;
    H->n.queued++;
    if (E->icount) /* a connection came free in loop_finish: the next timers() pass serves it */
        pump_later(H, r->ep);
    return 2;
}

/* a complete response on c at t (kernel stamp kt, 0 none) */
static void complete(http_t *H, hconn_t *c, int64_t t, int64_t kt, int trailing) {
    ge_t *g = H->g;
    req_t *r = &g->reqs[c->cur];
    r->recv_ns = t - g->start_mono;
    if (kt > 0) {
        int64_t w = t - kt;
        r->rx_wait_ns = w <= 0 ? 0 : w >= UINT32_MAX ? UINT32_MAX : (uint32_t)w;
        r->flags |= RF_KSTAMP;
    }
    r->status = c->p.status;
    r->code = (uint8_t)(c->p.status / 100);
    H->n.by_class[r->code]++;
    c->served++;
    int keep = !c->p.close && !trailing && !g->http_opt.per_request && c->woff == H->len[c->tmpl];
    if (c->p.close)
        H->n.closed_by_server++;
    c->state = keep ? CS_FREE : CS_BUSY; /* end_request closes a connection that is not kept */
    end_request(H, c, r->code == 2 ? O_OK : O_ERROR);
}

/* the connection failed or closed under its request */
static void broken(http_t *H, hconn_t *c, int err) {
    if (c->state == CS_FREE || c->state == CS_CLOSED) { /* idle: nothing was lost */
        H->n.closed_by_server += c->state == CS_FREE;
        http_close_conn(c);
        return;
    }
    int outcome = O_RESET;
    if (c->state == CS_CONNECTING) {
        H->n.connect_failures++;
        H->n.refused += err == ECONNREFUSED;
    } else if (c->p.state == HP_ERR) {
        H->n.protocol_errors++;
        outcome = O_ERROR;
    } else {
        H->n.resets++;
    }
    c->state = CS_BUSY;
    end_request(H, c, outcome);
}

static void on_readable(http_t *H, hconn_t *c) {
    struct iovec iov = {H->rbuf, sizeof H->rbuf};
    rxstamp_ctl_t ctl;
    for (;;) {
        struct msghdr m = rxstamp_msg(&iov, &ctl);
        ssize_t k = recvmsg(c->fd, &m, MSG_DONTWAIT);
        if (k < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return;
            broken(H, c, errno);
            return;
        }
        int64_t t = mono_ns();
        if (c->state != CS_BUSY) { /* bytes or EOF on an idle connection: it is done for */
            broken(H, c, 0);
            return;
        }
        if (k == 0) {
            http_parse_eof(&c->p);
            if (c->p.state == HP_DONE) /* close-delimited: its last byte came with the last read */
                complete(H, c, t, c->last_kt, 0);
            else
                broken(H, c, 0);
            return;
        }
        H->n.bytes_in += (uint64_t)k;
        int64_t rt = rxstamp_realtime_ns(&m);
        c->last_kt = rt ? clock_map_to_mono(loop_clock_map(H->L), rt) : 0;
        size_t used = http_parse_feed(&c->p, H->rbuf, (size_t)k);
        if (c->p.state == HP_DONE) {
            complete(H, c, t, c->last_kt, used < (size_t)k);
            return;
        }
        if (c->p.state == HP_ERR) {
            broken(H, c, 0);
            return;
        }
        if ((size_t)k < sizeof H->rbuf) /* level-triggered: the rest comes with the next event */
            return;
    }
}

void http_on_event(void *ts, uint32_t tag, uint32_t events) {
    http_t *H = ts;
    hconn_t *c = &H->c[tag];
    if (c->fd < 0)
        return;
    uint16_t ep = c->ep;
    if (c->state == CS_CONNECTING) {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
            broken(H, c, err);
        } else {
            c->state = CS_BUSY;
            if (write_more(H, c) < 0)
                broken(H, c, errno);
        }
    } else if (c->state == CS_BUSY && (events & EPOLLOUT) && c->woff < H->len[c->tmpl]) {
        if (write_more(H, c) < 0)
            broken(H, c, errno);
    }
    if (c->fd >= 0 && (events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
        on_readable(H, c);
    serve(H, &H->eps[ep]); /* a connection may have come free */
}

void http_timers(void *ts, int64_t now) {
    (void)now;
    http_t *H = ts;
    while (H->npump) {
        hep_t *E = &H->eps[H->pump[--H->npump]];
        E->pump = 0;
        serve(H, E);
    }
}

int64_t http_next_deadline(const void *ts) {
    return ((const http_t *)ts)->npump ? 0 : INT64_MAX;
}

/* the loop ended a request itself (timeout, or interrupted): a connection it held is closed
 * (its answer may still come) and the target's queue is served on the next timers() pass */
int http_on_finish(void *ts, uint32_t idx, int outcome, int64_t now) {
    (void)now;
    http_t *H = ts;
    req_t *r = &H->g->reqs[idx];
    if (!r->conn)
        return outcome; /* ended by this file (conn released first), or still queued */
    hconn_t *c = &H->c[r->conn - 1];
    r->conn = 0;
    http_close_conn(c);
    release(H, c);
    pump_later(H, c->ep);
    return outcome;
}
