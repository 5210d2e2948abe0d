/* impair_chan.c - one direction of the impaired path (see impair.h): the decision per
 * datagram (impair_netem.c: duplicate, lose, corrupt, delay, rate), the preallocated min-heap
 * of held datagrams, the counters and their device-summary.json block.
 *
 * Per direction (egress = datagrams the endpoint sends, ingress = datagrams it receives).
 * A datagram whose release time is not in the future goes at once; the others wait in a
 * preallocated min-heap (ordered by release time, then arrival) served by the I/O loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "impair.h"
#include "impair_int.h"

struct chan imp_eg, imp_in;

static int before(const struct pkt *a, const struct pkt *b) {
    return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void heap_push(struct chan *c, uint32_t idx) {
    uint32_t i = c->nheap++;
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!before(&c->slots[idx], &c->slots[c->heap[p]]))
            break;
        c->heap[i] = c->heap[p];
        i = p;
    }
    c->heap[i] = idx;
}

uint32_t chan_heap_pop(struct chan *c) {
    uint32_t top = c->heap[0], last = c->heap[--c->nheap], i = 0;
    for (;;) {
        uint32_t l = 2 * i + 1, m = l;
        if (l >= c->nheap)
            break;
        if (l + 1 < c->nheap && before(&c->slots[c->heap[l + 1]], &c->slots[c->heap[l]]))
            m = l + 1;
        if (!before(&c->slots[c->heap[m]], &c->slots[last]))
            break;
        c->heap[i] = c->heap[m];
        i = m;
    }
    if (c->nheap)
        c->heap[i] = last;
    return top;
}

static void hold(struct chan *c, const uint8_t *data, size_t len, const struct meta *m,
                 uint64_t due) {
    if (c->nfree == 0 || m->namelen > NAME_MAX_ || m->ctllen > CTL_MAX) {
        c->overflow++;      /* queue full (netem: limit reached): the datagram is lost */
        return;
    }
    uint32_t idx = c->free_[--c->nfree];
    struct pkt *p = &c->slots[idx];
    p->due = due;
    p->seq = c->seq++;
    p->fd = m->fd;
    p->len = (uint16_t)len;
    p->namelen = (uint16_t)m->namelen;
    p->ctllen = (uint16_t)m->ctllen;
    memcpy(p->data, data, len);
    if (m->namelen)
        memcpy(p->name, m->name, m->namelen);
    if (m->ctllen)
        memcpy(p->ctl, m->ctl, m->ctllen);
    heap_push(c, idx);
    c->delayed++;
}

struct held_to {
    struct chan *c;
    const struct meta *m;
};

static void hold_in_chan(void *ctx, const uint8_t *buf, size_t len, uint64_t due) {
    struct held_to *h = ctx;
    hold(h->c, buf, len, h->m, due);
}

/* Applies the impairments to one datagram (buf is modified by corruption). Returns 1 when
 * it must go at once, 0 when it was dropped or is held. */
int admit(struct chan *c, uint8_t *buf, size_t len, const struct meta *m, int v6,
                 int allow_dup, uint64_t now) {
    struct held_to h = {c, m};
    return netem_admit(&c->n, &imp_cfg, buf, len, v6, allow_dup, now, hold_in_chan, &h);
}

static int chan_init(struct chan *c, int on, unsigned dir) {
    memset(c, 0, sizeof *c);
    c->on = on;
    netem_seed(&c->n, &imp_cfg, dir);
    if (!on)
        return 0;
    c->slots = calloc(QUEUE_CAP, sizeof *c->slots);
    c->heap = calloc(QUEUE_CAP, sizeof *c->heap);
    c->free_ = calloc(QUEUE_CAP, sizeof *c->free_);
    if (!c->slots || !c->heap || !c->free_)
        return -1;
    for (uint32_t i = 0; i < QUEUE_CAP; i++)
        c->free_[c->nfree++] = QUEUE_CAP - 1 - i;
    return 0;
}

int impair_init(void) {
    if (chan_init(&imp_eg, imp_cfg.given && imp_cfg.egress, 0) || chan_init(&imp_in, imp_cfg.given && imp_cfg.ingress, 1))
        return -1;
    return 0;
}

uint64_t impair_next_due(void) {
    uint64_t t = 0;
    if (imp_eg.nheap)
        t = imp_eg.slots[imp_eg.heap[0]].due;
    if (imp_in.nheap && (!t || imp_in.slots[imp_in.heap[0]].due < t))
        t = imp_in.slots[imp_in.heap[0]].due;
    return t;
}

void impair_json(FILE *f) {
    if (!imp_cfg.given) {
        fputs(", \"impair\": null", f);
        return;
    }
    const char *dir = imp_cfg.egress && imp_cfg.ingress ? "both" : imp_cfg.egress ? "egress" : "ingress";
    fprintf(f,
            ", \"impair\": {\"dir\": \"%s\", \"seed\": %llu, \"dropped_in\": %llu, "
            "\"dropped_out\": %llu, \"duplicated\": %llu, \"corrupted\": %llu, "
            "\"delayed_in\": %llu, \"delayed_out\": %llu, \"duplicated_in\": %llu, "
            "\"duplicated_out\": %llu, \"corrupted_in\": %llu, \"corrupted_out\": %llu, "
            "\"queue_full_in\": %llu, \"queue_full_out\": %llu, \"held_at_exit_in\": %u, "
            "\"held_at_exit_out\": %u, \"send_errors\": %llu, \"pings_exempt\": %llu, "
            "\"oversize_exempt\": %llu}",
            dir, (unsigned long long)imp_cfg.seed, (unsigned long long)imp_in.n.dropped,
            (unsigned long long)imp_eg.n.dropped, (unsigned long long)(imp_in.n.duplicated + imp_eg.n.duplicated),
            (unsigned long long)(imp_in.n.corrupted + imp_eg.n.corrupted), (unsigned long long)imp_in.delayed,
            (unsigned long long)imp_eg.delayed, (unsigned long long)imp_in.n.duplicated,
            (unsigned long long)imp_eg.n.duplicated, (unsigned long long)imp_in.n.corrupted,
            (unsigned long long)imp_eg.n.corrupted, (unsigned long long)imp_in.overflow,
            (unsigned long long)imp_eg.overflow, imp_in.nheap, imp_eg.nheap,
            (unsigned long long)(imp_in.errors + imp_eg.errors),
            (unsigned long long)(imp_in.pings + imp_eg.pings),
            (unsigned long long)(imp_in.oversize + imp_eg.oversize));
}

void impair_free(void) {
    struct chan *cs[] = {&imp_eg, &imp_in};
    for (int i = 0; i < 2; i++) {
        free(cs[i]->slots);
        free(cs[i]->heap);
        free(cs[i]->free_);
        cs[i]->slots = NULL;
        cs[i]->heap = cs[i]->free_ = NULL;
    }
}
