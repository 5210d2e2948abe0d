/* push_run.c - the pushing devices of one loop (fleet_push.h), run by that loop's thread.
 *
 * Each pushing device has one instant at which it next needs the loop (its next test send,
 * a retransmission, the deadline of its oldest open request) and sits in the loop's min-heap
 * of devices on it; the loop arms its timerfd for the earlier of that heap and its own. A
 * device's rows run as in wot-device (push_run.c there): setup and teardown one after
 * another, the test open loop; answers are matched by token (salt high half, salt low half
 * XOR the row), empty ACKs and RSTs by message ID and peer among the device's open rows. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "push_int.h"

/* RFC 7252 §4.8: a setup/teardown CON (and a test CON with `retransmit`) is sent again after
 * ACK_TIMEOUT x [1, 1.5), doubling, at most MAX_RETRANSMIT times, within the timeout */
#define ACK_TIMEOUT_NS 2000000000ULL
#define MAX_RETRANSMIT 4
#define TEARDOWN_BUDGET_NS 10000000000ULL   /* within the runner's stop grace */

static inline int acquire(const int *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void release(int *p, int v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

uint64_t flp_base_ns(const struct fl_push *P) {
    uint64_t s = __atomic_load_n(&P->start_ns, __ATOMIC_ACQUIRE);
    return s ? s : P->setup_begin_ns;
}

static inline struct flp_row *row(const struct fl_push_loop *pl, const struct flp_dev *pd,
                                  uint32_t i) {
    return &pl->P->rows[pd->first + i];
}

/* ---- the loop's heap of pushing devices, keyed on their wake instant ---- */

static void hset(struct fl_push_loop *pl, uint32_t pos, uint32_t dev) {
    pl->heap[pos] = dev;
    pl->devs[dev].heap_pos = pos;
}

static uint64_t hkey(const struct fl_push_loop *pl, uint32_t pos) {
    return pl->devs[pl->heap[pos]].wake;
}

static void hup(struct fl_push_loop *pl, uint32_t pos) {
    uint32_t dev = pl->heap[pos];
    uint64_t at = pl->devs[dev].wake;
    while (pos > 0 && hkey(pl, (pos - 1) / 2) > at) {
        hset(pl, pos, pl->heap[(pos - 1) / 2]);
        pos = (pos - 1) / 2;
    }
    hset(pl, pos, dev);
}

static void hdown(struct fl_push_loop *pl, uint32_t pos) {
    uint32_t dev = pl->heap[pos];
    uint64_t at = pl->devs[dev].wake;
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= pl->hn)
            break;
        if (c + 1 < pl->hn && hkey(pl, c + 1) < hkey(pl, c))
            c++;
        if (hkey(pl, c) >= at)
            break;
        hset(pl, pos, pl->heap[c]);
        pos = c;
    }
    hset(pl, pos, dev);
}

static void hremove(struct fl_push_loop *pl, struct flp_dev *pd) {
    uint32_t pos = pd->heap_pos;
    if (pos == FL_NIL)
        return;
    pd->heap_pos = FL_NIL;
    if (--pl->hn == pos)
        return;
    uint32_t moved = pl->heap[pl->hn];
    hset(pl, pos, moved);
    hup(pl, pos);
    hdown(pl, pl->devs[moved].heap_pos);
}

/* ---- one device ---- */

static int rtx_pending(const struct flp_row *r) {
    return !r->outcome && r->retx_ns && !(r->flags & FLF_ACKED) && r->retx < MAX_RETRANSMIT;
}

/* The device's next instant: its next test send, the earliest retransmission or deadline of
 * its open rows; then its place in the heap. */
static void reschedule(struct fl_push_loop *pl, struct flp_dev *pd) {
    uint64_t when = 0;
    uint32_t test_end = pd->n_setup + pd->n_test;
    if (pd->state == FLS_TEST && pd->next < test_end)
        when = pl->base_ns + row(pl, pd, pd->next)->at_ns;
    for (uint32_t i = pd->oldest; i < pd->next; i++) {
        const struct flp_row *r = row(pl, pd, i);
        if (r->outcome || !r->sent_ns)
            continue;
        uint64_t t = r->sent_ns + pl->P->timeout_ns;
        if (pd->state == FLS_TEARDOWN && pd->teardown_end < t)
            t = pd->teardown_end;
        if (rtx_pending(r) && r->retx_ns < t)
            t = r->retx_ns;
        if (!when || t < when)
            when = t;
    }
    if (pd->state == FLS_TEARDOWN && (!when || pd->teardown_end < when))
        when = pd->teardown_end;
    if (pd->state == FLS_DONE || pd->state == FLS_IDLE || pd->state == FLS_WAIT)
        when = 0;                      /* nothing open, nothing due */
    uint64_t was = pd->wake;
    pd->wake = when;
    if (!when) {
        hremove(pl, pd);
    } else if (pd->heap_pos == FL_NIL) {
        uint32_t pos = pl->hn++;
        hset(pl, pos, (uint32_t)(pd - pl->devs));
        hup(pl, pos);
    } else if (when < was) {
        hup(pl, pd->heap_pos);
    } else if (when > was) {
        hdown(pl, pd->heap_pos);
    }
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static uint8_t *datagram(struct fl_push_loop *pl, const struct flp_row *r) {
    return r->flags & FLF_LOCATION ? pl->loc + r->ldg_off : pl->P->dg + r->dg_off;
}

static void send_row(struct fl_loop *l, struct flp_dev *pd, uint32_t i) {
    struct fl_push_loop *pl = l->push;
    struct flp_row *r = row(pl, pd, i);
    if (!(r->flags & FLF_READY)) {     /* @location without a location: nothing to send */
        r->outcome = FLO_ERROR;
        return;
    }
    uint8_t *d = datagram(pl, r);
    r->mid = pd->mid++;
    d[2] = (uint8_t)(r->mid >> 8);
    d[3] = (uint8_t)r->mid;
    put_be32(d + 4, pd->salt_hi);
    put_be32(d + 8, pd->salt_lo ^ i);
    const struct sockaddr_in *t = &pl->P->targets[r->target];
    r->sent_ns = (uint64_t)mono_ns();
    if (sendto(pd->d->fd, d, r->dg_len, MSG_DONTWAIT, (const struct sockaddr *)t, sizeof *t) < 0) {
        r->sent_ns = 0;                /* a local send failure: error without sent_ns */
        r->outcome = FLO_ERROR;
        pl->send_errors++;
    } else if ((r->flags & FLF_CON) && (r->phase != FLP_TEST || (r->flags & FLF_RETRANSMIT))) {
        uint64_t jitter = (uint64_t)((pd->salt_lo ^ r->mid) * 2654435761u % 1000u);
        r->retx_ns = r->sent_ns + ACK_TIMEOUT_NS + ACK_TIMEOUT_NS / 2 * jitter / 1000;
    }
}

/* The same datagram (message ID, token) again, and the time of the next one. */
static void resend(struct fl_loop *l, struct flp_dev *pd, struct flp_row *r, uint64_t now) {
    struct fl_push_loop *pl = l->push;
    const struct sockaddr_in *t = &pl->P->targets[r->target];
    if (sendto(pd->d->fd, datagram(pl, r), r->dg_len, MSG_DONTWAIT, (const struct sockaddr *)t,
               sizeof *t) >= 0) {
        r->retx++;
        pl->retransmissions++;
    } else {
        pl->send_errors++;
    }
    r->retx_ns = now + (ACK_TIMEOUT_NS << r->retx);
}

/* Open rows past their timeout end as timeouts; `oldest` moves past what has ended. */
static void expire(struct fl_push_loop *pl, struct flp_dev *pd, uint64_t now) {
    for (uint32_t i = pd->oldest; i < pd->next; i++) {
        struct flp_row *r = row(pl, pd, i);
        if (!r->outcome && r->sent_ns && now >= r->sent_ns + pl->P->timeout_ns)
            r->outcome = FLO_TIMEOUT;
    }
    while (pd->oldest < pd->next && row(pl, pd, pd->oldest)->outcome)
        pd->oldest++;
}

static void mark_unsent(struct fl_push_loop *pl, struct flp_dev *pd, uint32_t from, uint32_t to,
                        uint64_t now) {
    for (uint32_t i = from; i < to; i++) {
        struct flp_row *r = row(pl, pd, i);
        if (!r->outcome && !r->sent_ns) {
            r->outcome = FLO_UNSENT;
            if (!r->due_ns)
                r->due_ns = now;
        }
    }
}

/* wot-device's rule for requests open when the device stops: older than the timeout ->
 * timeout, else error with sent_ns kept and no code */
static void close_open(struct fl_push_loop *pl, struct flp_dev *pd, uint32_t from, uint32_t to,
                       uint64_t now) {
    for (uint32_t i = from; i < to; i++) {
        struct flp_row *r = row(pl, pd, i);
        if (!r->outcome && r->sent_ns)
            r->outcome = now >= r->sent_ns + pl->P->timeout_ns ? FLO_TIMEOUT : FLO_ERROR;
    }
}

/* The @location rows of a device whose setup answer named a location, encoded into the
 * loop's arena (once per device, at the end of its setup: not on the test's path). */
static void encode_location_rows(struct fl_push_loop *pl, struct flp_dev *pd) {
    const char *loc = (const char *)pl->loc + pd->loc_off;
    for (uint32_t i = pd->n_setup; i < pd->n; i++) {
        struct flp_row *r = row(pl, pd, i);
        if (!(r->flags & FLF_LOCATION))
            continue;
        struct flp_template t;
        flp_template_get(pl->P->dg + r->dg_off, &t);
        char path[2 * FLP_LOC_MAX];
        flp_join_location(loc, pd->loc_len, t.suffix, path, sizeof path);
        size_t room = pl->loc_cap - pl->loc_used;
        size_t n = flp_encode(pl->loc + pl->loc_used, room < FLP_MAX_DGRAM ? room : FLP_MAX_DGRAM,
                              r->flags & FLF_CON, r->method, path, t.content_format, t.payload,
                              t.plen);
        if (n == 0) {                  /* too long with this location: the row ends in error */
            pl->loc_overflow++;
            continue;
        }
        r->ldg_off = (uint32_t)pl->loc_used;
        r->dg_len = (uint16_t)n;
        r->flags |= FLF_READY;
        pl->loc_used += n;
    }
}

static void begin_test(struct fl_loop *l, struct flp_dev *pd);
static void begin_teardown(struct fl_loop *l, struct flp_dev *pd, uint64_t now);

static void device_done(struct fl_push_loop *pl, struct flp_dev *pd) {
    pd->state = FLS_DONE;
    if (--pl->active == 0)
        release(&pl->done, 1);
}

/* Setup and teardown: the next row once the previous one has ended. A failed setup step ends
 * the setup (what follows depends on it); teardown goes on regardless (best effort). */
static void advance_seq(struct fl_loop *l, struct flp_dev *pd) {
    struct fl_push_loop *pl = l->push;
    uint64_t now = (uint64_t)mono_ns();
    int setup = pd->state == FLS_SETUP;
    uint32_t first = setup ? 0 : pd->n_setup + pd->n_test;
    uint32_t end = setup ? pd->n_setup : pd->n;
    for (;;) {
        if (pd->next > first) {
            const struct flp_row *prev = row(pl, pd, pd->next - 1);
            if (!prev->outcome)
                return;                              /* waiting for its answer */
            if (setup && prev->outcome != FLO_OK) {
                mark_unsent(pl, pd, pd->next, end, now);
                pd->next = end;
            }
        }
        if (pd->next == end)
            break;
        if (row(pl, pd, pd->next)->outcome || (!setup && now >= pd->teardown_end)) {
            /* stopped during the setup (marked unsent), or the teardown's budget is spent */
            mark_unsent(pl, pd, pd->next, end, now);
            pd->next = end;
            break;
        }
        row(pl, pd, pd->next)->due_ns = now;
        send_row(l, pd, pd->next++);
    }
    pd->oldest = pd->next;
    if (setup) {
        for (uint32_t i = 0; i < pd->n_setup; i++)
            pd->setup_ok |= row(pl, pd, i)->outcome == FLO_OK;
        if (pd->have_location)
            encode_location_rows(pl, pd);
        pd->state = FLS_WAIT;
        if (--pl->setup_left == 0)
            release(&pl->setup_done, 1);
        if (pd->stopping)
            begin_teardown(l, pd, now);
        else if (pl->base_ns)
            begin_test(l, pd);
    } else {
        device_done(pl, pd);
    }
}

static void begin_setup(struct fl_loop *l, struct flp_dev *pd) {
    pd->state = FLS_SETUP;
    pd->next = pd->oldest = 0;
    advance_seq(l, pd);
    reschedule(l->push, pd);
}

static void begin_test(struct fl_loop *l, struct flp_dev *pd) {
    pd->state = FLS_TEST;
    pd->next = pd->oldest = pd->n_setup;
    reschedule(l->push, pd);
}

static void begin_teardown(struct fl_loop *l, struct flp_dev *pd, uint64_t now) {
    struct fl_push_loop *pl = l->push;
    uint32_t test_end = pd->n_setup + pd->n_test;
    close_open(pl, pd, pd->n_setup, test_end, now);
    mark_unsent(pl, pd, pd->n_setup, test_end, now);
    pd->state = FLS_TEARDOWN;
    pd->next = pd->oldest = test_end;
    if (test_end == pd->n || (pd->n_setup && !pd->setup_ok)) {   /* nothing to undo */
        mark_unsent(pl, pd, test_end, pd->n, now);
        device_done(pl, pd);
    } else {
        pd->teardown_end = now + TEARDOWN_BUDGET_NS;
        advance_seq(l, pd);
    }
    reschedule(pl, pd);
}

/* SIGTERM seen: unsent test rows become `unsent`, open ones end by the rule above, then the
 * teardown, once an open setup step has ended. */
static void stop_device(struct fl_loop *l, struct flp_dev *pd, uint64_t now) {
    struct fl_push_loop *pl = l->push;
    pd->stopping = 1;
    switch (pd->state) {
    case FLS_IDLE:
        mark_unsent(pl, pd, 0, pd->n, now);
        device_done(pl, pd);
        break;
    case FLS_SETUP:
        mark_unsent(pl, pd, pd->next, pd->n_setup + pd->n_test, now);
        break;
    case FLS_WAIT:
    case FLS_TEST:
        begin_teardown(l, pd, now);
        break;
    default:
        break;
    }
}

/* The device's instant has come: timeouts, due test sends, due retransmissions. */
static void tick(struct fl_loop *l, struct flp_dev *pd, uint64_t now) {
    struct fl_push_loop *pl = l->push;
    expire(pl, pd, now);
    if (pd->state == FLS_TEST) {
        uint32_t end = pd->n_setup + pd->n_test;
        while (pd->next < end && pl->base_ns + row(pl, pd, pd->next)->at_ns <= now) {
            struct flp_row *r = row(pl, pd, pd->next);
            r->due_ns = pl->base_ns + r->at_ns;
            send_row(l, pd, pd->next++);
            now = (uint64_t)mono_ns();
        }
    }
    for (uint32_t i = pd->oldest; i < pd->next; i++) {
        struct flp_row *r = row(pl, pd, i);
        if (rtx_pending(r) && r->retx_ns <= now)
            resend(l, pd, r, now);
    }
    if (pd->state == FLS_TEARDOWN) {
        if (now >= pd->teardown_end)   /* budget spent: what is open ends as a timeout */
            close_open(pl, pd, pd->oldest, pd->next, now + pl->P->timeout_ns);
        advance_seq(l, pd);
    } else if (pd->state == FLS_SETUP) {
        advance_seq(l, pd);
    }
    expire(pl, pd, (uint64_t)mono_ns());
    reschedule(pl, pd);
}

/* ---- the loop's entry points ---- */

uint64_t fl_push_next(const struct fl_loop *l) {
    const struct fl_push_loop *pl = l->push;
    return pl->hn ? pl->devs[pl->heap[0]].wake : 0;
}

void fl_push_on_timers(struct fl_loop *l, uint64_t now) {
    struct fl_push_loop *pl = l->push;
    while (pl->hn && pl->devs[pl->heap[0]].wake <= now) {
        tick(l, &pl->devs[pl->heap[0]], now);
        now = (uint64_t)mono_ns();
    }
}

void fl_push_on_ctl(struct fl_loop *l) {
    struct fl_push_loop *pl = l->push;
    struct fl_push *P = pl->P;
    if (!pl->seen_go && acquire(&P->go)) {
        pl->seen_go = 1;
        pl->setup_left = pl->ndevs;
        if (pl->ndevs == 0)
            release(&pl->setup_done, 1);
        for (uint32_t i = 0; i < pl->ndevs; i++)
            begin_setup(l, &pl->devs[i]);
    }
    if (!pl->base_ns && pl->seen_go) {
        uint64_t s = __atomic_load_n(&P->start_ns, __ATOMIC_ACQUIRE);
        if (s) {
            pl->base_ns = s;
            for (uint32_t i = 0; i < pl->ndevs; i++)
                if (pl->devs[i].state == FLS_WAIT && !pl->devs[i].stopping)
                    begin_test(l, &pl->devs[i]);
        }
    }
    if (!pl->seen_stop && acquire(&P->stop)) {
        pl->seen_stop = 1;
        uint64_t now = (uint64_t)mono_ns();
        if (pl->ndevs == 0)
            release(&pl->done, 1);
        for (uint32_t i = 0; i < pl->ndevs; i++)
            stop_device(l, &pl->devs[i], now);
    }
}

/* the open row of pd with message ID mid sent to peer, or NULL */
static struct flp_row *by_mid(struct fl_push_loop *pl, struct flp_dev *pd, uint16_t mid,
                              const struct sockaddr_in *peer) {
    for (uint32_t i = pd->oldest; i < pd->next; i++) {
        struct flp_row *r = row(pl, pd, i);
        const struct sockaddr_in *t = &pl->P->targets[r->target];
        if (r->mid == mid && r->sent_ns && !r->outcome &&
            t->sin_addr.s_addr == peer->sin_addr.s_addr && t->sin_port == peer->sin_port)
            return r;
    }
    return NULL;
}

static void after_answer(struct fl_loop *l, struct flp_dev *pd) {
    if (pd->state == FLS_SETUP || pd->state == FLS_TEARDOWN)
        advance_seq(l, pd);
    expire(l->push, pd, (uint64_t)mono_ns());
    reschedule(l->push, pd);
}

int fl_push_on_empty(struct fl_loop *l, struct fl_device *d, const struct fl_msg *m,
                     const struct sockaddr_in *peer, uint64_t arrival, uint64_t arrival_k) {
    struct fl_push_loop *pl = l->push;
    struct flp_dev *pd = &pl->devs[d->push];
    struct flp_row *r = by_mid(pl, pd, m->mid, peer);
    if (!r)
        return 0;                      /* not one of its requests: the server side's ACK */
    if (m->type == FL_RST) {
        r->outcome = FLO_RESET;
        r->recv_ns = arrival;
        r->recv_k_ns = arrival_k;
        after_answer(l, pd);
    } else {
        r->flags |= FLF_ACKED;         /* a separate response follows */
        reschedule(pl, pd);
    }
    return 1;
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void fl_push_on_response(struct fl_loop *l, struct fl_device *d, const uint8_t *dg, size_t n,
                         const struct fl_msg *m, const struct sockaddr_in *peer,
                         uint64_t arrival, uint64_t arrival_k) {
    struct fl_push_loop *pl = l->push;
    struct flp_dev *pd = &pl->devs[d->push];
    if (m->type == FL_CON) {           /* a separate response: acknowledged in any case */
        uint8_t ack[4] = {0x60, 0, (uint8_t)(m->mid >> 8), (uint8_t)m->mid};
        if (sendto(d->fd, ack, sizeof ack, MSG_DONTWAIT, (const struct sockaddr *)peer,
                   sizeof *peer) < 0)
            pl->send_errors++;
    }
    uint32_t i = FL_NIL;
    if (m->tkl == FLP_TKL && be32(m->token) == pd->salt_hi)
        i = be32(m->token + 4) ^ pd->salt_lo;
    struct flp_row *r = i < pd->n ? row(pl, pd, i) : NULL;
    if (!r || r->outcome || !r->sent_ns) {
        pl->late_acks += m->type == FL_CON;   /* after its row ended (or not ours) */
        return;
    }
    r->code = m->code;
    r->outcome = (m->code >> 5) == 2 ? FLO_OK : FLO_ERROR;
    r->recv_ns = arrival;
    r->recv_k_ns = arrival_k;
    if (r->phase == FLP_SETUP && r->outcome == FLO_OK && !pd->have_location &&
        pl->loc_used + FLP_LOC_MAX <= pl->loc_cap) {
        size_t k = flp_location_of(dg, n, (char *)pl->loc + pl->loc_used, FLP_LOC_MAX);
        if (k) {
            pd->loc_off = (uint32_t)pl->loc_used;
            pd->loc_len = (uint16_t)k;
            pd->have_location = 1;
            pl->loc_used += k + 1;
        }
    }
    after_answer(l, pd);
}
