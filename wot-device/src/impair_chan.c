/* impair_chan.c - one direction of the impaired path (tc-netem's model, see impair.h): the
 * decision per datagram (duplicate, lose, corrupt, delay, rate), the preallocated min-heap of
 * held datagrams, the counters and their device-summary.json block.
 *
 * Per direction (egress = datagrams the endpoint sends, ingress = datagrams it receives),
 * each datagram goes through, in netem's order (net/sched/sch_netem.c, netem_enqueue):
 *   duplicate? (count++), lost? (count--; random loss with correlation or Gilbert-Elliott),
 *   count == 0 -> dropped; corrupt? (one random bit of the datagram flipped);
 *   release time = now + delay sample; with rate: max(that, previous release) + wire time;
 *   a duplicate goes through the same steps again (without duplication).
 * A datagram whose release time is not in the future goes at once; the others wait in a
 * preallocated min-heap (ordered by release time, then arrival) served by the I/O loop. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "impair.h"
#include "impair_int.h"

struct chan imp_eg, imp_in;

static int64_t sample_delay(struct chan *c) {
    if (imp_cfg.jitter_ns == 0)
        return imp_cfg.delay_ns;
    double t = dist_q(imp_cfg.dist, crandom(&c->c_delay, &c->r[K_DELAY]));
    double d = (double)imp_cfg.delay_ns + (double)imp_cfg.jitter_ns * t;
    return d < 0 ? 0 : (int64_t)llround(d);
}

static int is_lost(struct chan *c) {
    if (imp_cfg.ge) {       /* netem loss_gilb_ell(): transition first, then the state's loss */
        struct rng *r = &c->r[K_LOSS];
        if (!c->ge_bad) {
            if (u01(r) < imp_cfg.ge_p)
                c->ge_bad = 1;
            return u01(r) < imp_cfg.ge_1k;
        }
        if (u01(r) < imp_cfg.ge_r)
            c->ge_bad = 0;
        return u01(r) < imp_cfg.ge_1h;
    }
    return imp_cfg.loss > 0 && crandom(&c->c_loss, &c->r[K_LOSS]) < imp_cfg.loss;
}

/* Wire size netem's rate sees (qdisc_pkt_len: Ethernet 14 + IPv4 20 / IPv6 40 + UDP 8). */
static uint64_t wire_ns(size_t len, int v6) {
    double bytes = (double)len + (v6 ? 62 : 42);
    return (uint64_t)llround(bytes * 8e9 / imp_cfg.rate_bps);
}

static uint64_t release_time(struct chan *c, size_t len, int v6, uint64_t now) {
    uint64_t t = now + (uint64_t)sample_delay(c);
    if (imp_cfg.rate_bps > 0) {
        if (c->last_release > t)
            t = c->last_release;
        t += wire_ns(len, v6);
        c->last_release = t;
    }
    return t;
}

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

/* Applies the impairments to one datagram (buf is modified by corruption). Returns 1 when
 * it must go at once, 0 when it was dropped or is held. */
int admit(struct chan *c, uint8_t *buf, size_t len, const struct meta *m, int v6,
                 int allow_dup, uint64_t now) {
    static uint8_t orig[PKT_MAX];
    int count = 1;
    if (allow_dup && imp_cfg.dup > 0 && crandom(&c->c_dup, &c->r[K_DUP]) < imp_cfg.dup)
        count++;
    if (is_lost(c))
        count--;
    if (count == 0) {
        c->dropped++;
        return 0;
    }
    if (count > 1) {
        memcpy(orig, buf, len);   /* the duplicate is cloned before corruption, as in netem */
        c->duplicated++;
    }
    if (imp_cfg.corrupt > 0 && crandom(&c->c_corrupt, &c->r[K_CORRUPT]) < imp_cfg.corrupt && len > 0) {
        uint64_t x = xoshiro(&c->r[K_BIT]);
        buf[(x >> 3) % len] ^= (uint8_t)(1u << (x & 7));
        c->corrupted++;
    }
    uint64_t due = release_time(c, len, v6, now);
    int now_ok = due <= now;
    if (!now_ok)
        hold(c, buf, len, m, due);
    if (count > 1) {            /* the duplicate: own loss/corruption/delay, never at once */
        /* the inner call (allow_dup 0) never copies into orig, so orig itself is the clone */
        if (admit(c, orig, len, m, v6, 0, now))
            hold(c, orig, len, m, now);
    }
    return now_ok;
}

static int chan_init(struct chan *c, int on, unsigned dir) {
    memset(c, 0, sizeof *c);
    c->on = on;
    uint64_t sm = imp_cfg.seed ^ (0x5157a1dull * (dir + 1));
    for (int k = 0; k < K_N; k++) {
        uint64_t x = splitmix64(&sm) ^ ((uint64_t)(dir * K_N + k) << 56);
        for (int i = 0; i < 4; i++)
            c->r[k].s[i] = splitmix64(&x);
    }
    c->c_delay = (struct crnd){imp_cfg.delay_corr, u01(&c->r[K_DELAY])};
    c->c_loss = (struct crnd){imp_cfg.loss_corr, u01(&c->r[K_LOSS])};
    c->c_dup = (struct crnd){imp_cfg.dup_corr, u01(&c->r[K_DUP])};
    c->c_corrupt = (struct crnd){imp_cfg.corrupt_corr, u01(&c->r[K_CORRUPT])};
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
            dir, (unsigned long long)imp_cfg.seed, (unsigned long long)imp_in.dropped,
            (unsigned long long)imp_eg.dropped, (unsigned long long)(imp_in.duplicated + imp_eg.duplicated),
            (unsigned long long)(imp_in.corrupted + imp_eg.corrupted), (unsigned long long)imp_in.delayed,
            (unsigned long long)imp_eg.delayed, (unsigned long long)imp_in.duplicated,
            (unsigned long long)imp_eg.duplicated, (unsigned long long)imp_in.corrupted,
            (unsigned long long)imp_eg.corrupted, (unsigned long long)imp_in.overflow,
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
