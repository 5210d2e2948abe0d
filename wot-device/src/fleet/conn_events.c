/* conn_events.c - the connected devices' upstream events (CONTRACTS §3c, docs/CONNECTED.md
 * "Upstream events: schedule and stamps"): an open-loop (Poisson) schedule per device, from its
 * first attach to the end of the run, each event due `exp(event_ms)` after the previous one's
 * DUE time (not its send: a late loop does not push the schedule back, so its lateness is
 * measured instead of hidden), whatever the device's connection. Every event whose due time
 * came ends in exactly one outcome (enum cn_ev_outcome): sent whole (stamped when its write
 * returned), queued behind what the socket did not take, not sent because the device was
 * down, its backlog full, or its write failed.
 *
 * Rows are reserved at start (the loop's share of --event-rows); beyond them an event is still
 * counted by outcome and its send lag goes into a fixed histogram (4 buckets per octave), and
 * the rows missing are counted (`unlogged`). No row is allocated and nothing logged on the way
 * (the message goes the device's way: wslay's queue copies a WebSocket device's). */
#include <stdio.h>
#include <stdlib.h>

#include "conn.h"

int cn_events_init(struct cn_loop *l) {
    const struct cn_set *s = l->set;
    uint64_t share = s->ndev ? s->event_rows * l->ndev / s->ndev : 0;
    int any = 0;
    for (uint32_t k = 0; k < l->ndev; k++)
        any |= l->dev[k].event_ms != 0;
    l->ev.cap = any ? (size_t)share : 0;
    /* calloc maps zero pages: only the rows used cost memory */
    l->ev.row = l->ev.cap ? calloc(l->ev.cap, sizeof *l->ev.row) : NULL;
    return l->ev.cap && !l->ev.row ? -1 : 0;
}

void cn_events_free(struct cn_loop *l) {
    free(l->ev.row);
    l->ev.row = NULL;
    l->ev.cap = l->ev.n = 0;
}

/* bucket of a send lag: below 4.096 us linear (1.024 us units), then 4 per octave */
static unsigned bucket(uint64_t ns) {
    uint64_t v = ns >> 10;
    if (v < 4)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v);     /* >= 2 */
    unsigned b = 4u + (e - 2u) * 4u + (unsigned)((v >> (e - 2u)) & 3u);
    return b < CN_EV_HIST ? b : CN_EV_HIST - 1;
}

uint64_t cn_ev_bucket_lo(unsigned b) {
    if (b < 4)
        return (uint64_t)b << 10;
    unsigned e = (b - 4u) / 4u + 2u, sub = (b - 4u) % 4u;
    return ((uint64_t)(4u + sub) << (e - 2u)) << 10;
}

static void record(struct cn_loop *l, const struct cn_device *d, uint64_t seq, uint64_t due,
                   uint64_t sent, uint8_t outcome) {
    struct cn_events *ev = &l->ev;
    ev->out[outcome]++;
    if (outcome == CE_SENT) {
        uint64_t lag = sent - due;
        ev->hist[bucket(lag)]++;
        if (lag > ev->lag_max_ns)
            ev->lag_max_ns = lag;
    }
    if (ev->n >= ev->cap) {
        ev->unlogged++;
        return;
    }
    ev->row[ev->n++] = (struct cn_ev_row){.due_ns = due, .sent_ns = sent, .seq = seq,
                                          .device = d->index, .outcome = outcome};
}

void cn_events_start(struct cn_loop *l, struct cn_device *d, uint64_t now) {
    d->events_on = 1;
    cn_timer_add(l, now + cn_exp_interval_ns(l, d->event_ms), d->loop_pos, CT_EVENT, 0);
}

void cn_event_due(struct cn_loop *l, struct cn_device *d, uint64_t due) {
    uint64_t seq = ++d->event_seq, sent = 0;
    uint8_t outcome;
    if (!d->attached_ns) {
        outcome = CE_UNSENT_DOWN;
    } else {
        char v[24];
        snprintf(v, sizeof v, "%llu", (unsigned long long)seq);
        size_t len = cn_build_body(l, d, "event", v, 0);
        if (cn_device_send(l, d, len, NULL) == 0) {
            d->c.events++;
            l->ev.bytes += len;
            outcome = l->tx_state == TX_QUEUED ? CE_QUEUED : CE_SENT;
            if (outcome == CE_SENT)
                sent = (uint64_t)mono_ns();
        } else {
            outcome = l->tx_state == TX_FULL ? CE_BACKLOG_FULL : CE_SEND_ERROR;
        }
    }
    record(l, d, seq, due, sent, outcome);
    /* the next from this one's due time: the schedule does not move with the loop's lateness */
    cn_timer_add(l, due + cn_exp_interval_ns(l, d->event_ms), d->loop_pos, CT_EVENT, 0);
}
