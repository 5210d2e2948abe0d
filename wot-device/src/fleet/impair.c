/* impair.c - app-level network impairments in wot-fleet (CONTRACTS §3 "App-level
 * impairments", §3b): each impaired device has the link wot-device's --impair emulates,
 * with the same spec, seed and model (impair_netem.c, tc-netem's steps per datagram):
 * egress = every datagram the device sends (responses, empty ACKs, notifications,
 * retransmissions), ingress = every datagram it receives, before it is parsed. Pings (an empty
 * CON in, its empty RST out) are never impaired.
 *
 * A device's state (the random streams of both directions and its counters) comes from a
 * pool of the loop sized at start by its impaired devices; held datagrams wait in one
 * preallocated pool and min-heap per loop (release time, then arrival), served by the loop's
 * timer: a released request is processed as if it arrived then (its arrival_kernel_ns is
 * the release time), a released response goes to sendto(). A device holds at most
 * QUEUE_CAP datagrams per direction (wot-device's bound); one more, or one when the loop's
 * pool is full, is lost and counted (queue_full_in/out; the pool's share in "pool_full"). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../impair.h"
#include "../impair_int.h"
#include "../textout.h"
#include "fleet.h"

#define HELD_PER_DEVICE 64     /* the loop's pool: this many per impaired device (reserved) */
#define HELD_MIN 4096
enum { EG = 0, IN = 1 };

struct fl_imp_spec {
    struct cfg cfg;            /* seed: unused here (each device has its own) */
    char *spec, *ge;
};

struct fl_imp_dev {
    struct cfg cfg;            /* its spec with its seed */
    struct netem n[2];
    uint32_t dev;              /* index in the loop's block */
    uint32_t held[2];
    uint64_t delayed[2], queue_full[2], pings, oversize, send_errors;
};

struct held {
    uint64_t due, seq;
    uint32_t dev;
    uint16_t len;
    uint8_t dir;
    struct sockaddr_in peer;
    uint8_t data[FL_MAX_DATAGRAM + 64];
};

struct fl_imp_loop {
    struct fl_imp_dev *devs;
    uint32_t ndevs;
    struct held *slots;
    uint32_t cap, bump, free_, *heap, nheap;
    uint64_t seq, pool_full;
};

/* ---- the devices file's columns ---- */

/* "a=1;b=2" -> "a=1,b=2" (a CSV field cannot hold wot-device's commas) */
static int unsemi(char *out, size_t cap, const char *in) {
    size_t n = strlen(in);
    if (n >= cap)
        return -1;
    for (size_t i = 0; i <= n; i++)
        out[i] = in[i] == ';' ? ',' : in[i];
    return 0;
}

int fl_imp_parse_row(struct fleet *f, uint32_t dev, const char *spec, const char *ge,
                     const char *seed, const char *file, long line) {
    if (!*spec && !*ge && !*seed)
        return 0;
    if (!*spec)
        return csv_fail(file, line, "impair_ge or impair_seed without impair",
                        "an impair spec (dir=...) too, or all three empty");
    uint32_t k = 0;
    while (k < f->nimp_specs && (strcmp(f->imp_specs[k].spec, spec) || strcmp(f->imp_specs[k].ge, ge)))
        k++;
    if (k == f->nimp_specs) {   /* a new spec: parsed once, as wot-device parses --impair */
        char sbuf[1024], gbuf[1024];   /* the file separates a spec's items with ';' */
        if (unsemi(sbuf, sizeof sbuf, spec) || unsemi(gbuf, sizeof gbuf, ge))
            return csv_fail(file, line, "impair or impair_ge too long", "at most 1023 bytes");
        if (impair_parse(sbuf, *gbuf ? gbuf : NULL, NULL))
            return csv_fail(file, line, "bad impair/impair_ge (above)",
                            "wot-device's --impair SPEC and --impair-ge GE (CONTRACTS §3)");
        struct fl_imp_spec *v = realloc(f->imp_specs, (k + 1) * sizeof *v);
        if (!v)
            return csv_fail(file, line, "out of memory", "fewer distinct impair specs");
        f->imp_specs = v;
        v[k] = (struct fl_imp_spec){.cfg = imp_cfg, .spec = strdup(spec), .ge = strdup(ge)};
        if (!v[k].spec || !v[k].ge)
            return csv_fail(file, line, "out of memory", "fewer distinct impair specs");
        f->nimp_specs++;
    }
    unsigned long long s = 1;   /* wot-device's default --impair-seed */
    if (*seed && csv_parse_uint(seed, UINT64_MAX, &s))
        return csv_fail(file, line, "bad impair_seed", "an unsigned 64-bit integer");
    f->imp_spec_of[dev] = k + 1;
    f->imp_seed_of[dev] = s;
    return 0;
}

void fl_imp_specs_free(struct fleet *f) {
    for (uint32_t k = 0; k < f->nimp_specs; k++) {
        free(f->imp_specs[k].spec);
        free(f->imp_specs[k].ge);
    }
    free(f->imp_specs);
    free(f->imp_spec_of);
    free(f->imp_seed_of);
    f->imp_specs = NULL;
    f->imp_spec_of = NULL;
    f->imp_seed_of = NULL;
    f->nimp_specs = 0;
}

/* ---- the loop's state ---- */

int fl_imp_init(struct fleet *f, struct fl_loop *l) {
    if (!f->imp_spec_of)
        return 0;
    uint32_t first = (uint32_t)(l->dev - f->dev), n = 0;
    for (uint32_t i = 0; i < l->ndev; i++)
        n += f->imp_spec_of[first + i] != 0;
    if (n == 0)
        return 0;
    struct fl_imp_loop *m = calloc(1, sizeof *m);
    if (!m)
        return -1;
    l->imp = m;
    m->devs = calloc(n, sizeof *m->devs);
    uint64_t cap = (uint64_t)n * HELD_PER_DEVICE;
    m->cap = (uint32_t)(cap < HELD_MIN ? HELD_MIN : cap > (1u << 26) ? (1u << 26) : cap);
    m->slots = fl_reserve(m->cap, sizeof *m->slots);
    m->heap = fl_reserve(m->cap, sizeof *m->heap);
    m->free_ = FL_NIL;
    if (!m->devs || !m->slots || !m->heap) {
        fprintf(stderr, "wot-fleet: loop %d: cannot reserve the impairment state: %s\n", l->id,
                strerror(errno));
        return -1;
    }
    for (uint32_t i = 0; i < l->ndev; i++) {
        uint32_t k = f->imp_spec_of[first + i];
        if (!k)
            continue;
        struct fl_imp_dev *d = &m->devs[m->ndevs++];
        d->cfg = f->imp_specs[k - 1].cfg;
        d->cfg.seed = f->imp_seed_of[first + i];
        d->dev = i;
        netem_seed(&d->n[EG], &d->cfg, EG);
        netem_seed(&d->n[IN], &d->cfg, IN);
        l->dev[i].imp = d;
    }
    return 0;
}

/* ---- held datagrams: a min-heap of pool slots by (due, seq) ---- */

static int before(const struct fl_imp_loop *m, uint32_t a, uint32_t b) {
    const struct held *x = &m->slots[a], *y = &m->slots[b];
    return x->due < y->due || (x->due == y->due && x->seq < y->seq);
}

static void push(struct fl_imp_loop *m, uint32_t s) {
    uint32_t i = m->nheap++;
    while (i > 0 && before(m, s, m->heap[(i - 1) / 2])) {
        m->heap[i] = m->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    m->heap[i] = s;
}

static uint32_t pop(struct fl_imp_loop *m) {
    uint32_t top = m->heap[0], last = m->heap[--m->nheap], i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= m->nheap)
            break;
        if (c + 1 < m->nheap && before(m, m->heap[c + 1], m->heap[c]))
            c++;
        if (!before(m, m->heap[c], last))
            break;
        m->heap[i] = m->heap[c];
        i = c;
    }
    if (m->nheap)
        m->heap[i] = last;
    return top;
}

struct hold_ctx {
    struct fl_imp_loop *m;
    struct fl_imp_dev *d;
    const struct sockaddr_in *peer;
    int dir;
};

static void hold(void *ctx, const uint8_t *buf, size_t len, uint64_t due) {
    struct hold_ctx *h = ctx;
    struct fl_imp_loop *m = h->m;
    uint32_t s = m->free_;
    if (h->d->held[h->dir] >= QUEUE_CAP || len > sizeof m->slots[0].data ||
        (s == FL_NIL && m->bump == m->cap)) {
        h->d->queue_full[h->dir]++;      /* netem's limit reached: the datagram is lost */
        m->pool_full += s == FL_NIL && m->bump == m->cap;
        return;
    }
    if (s != FL_NIL)
        m->free_ = (uint32_t)m->slots[s].seq;   /* the free list links through seq */
    else
        s = m->bump++;
    struct held *p = &m->slots[s];
    *p = (struct held){.due = due, .seq = m->seq++, .dev = h->d->dev, .len = (uint16_t)len,
                       .dir = (uint8_t)h->dir, .peer = *h->peer};
    memcpy(p->data, buf, len);
    h->d->held[h->dir]++;
    h->d->delayed[h->dir]++;
    push(m, s);
}

static int is_ping(const uint8_t *b, size_t len, int type) {
    return len == 4 && (b[0] & 0xC0) == 0x40 && ((b[0] >> 4) & 3) == type && b[1] == 0;
}

static int impair_datagram(struct fl_loop *l, struct fl_device *dv, int dir, uint8_t *buf, size_t len,
                 const struct sockaddr_in *peer, uint64_t now) {
    struct fl_imp_dev *d = dv->imp;
    if (!(dir == EG ? d->cfg.egress : d->cfg.ingress))
        return 1;
    if (is_ping(buf, len, dir == EG ? FL_RST : FL_CON)) {
        d->pings++;
        return 1;
    }
    if (len > PKT_MAX) {
        d->oversize++;
        return 1;
    }
    struct hold_ctx h = {l->imp, d, peer, dir};
    return netem_admit(&d->n[dir], &d->cfg, buf, len, 0, 1, now, hold, &h);
}

int fl_imp_out(struct fl_loop *l, struct fl_device *d, const struct sockaddr_in *peer,
               size_t len, uint64_t now) {
    return impair_datagram(l, d, EG, l->tx, len, peer, now);
}

int fl_imp_in(struct fl_loop *l, struct fl_device *d, size_t n, const struct sockaddr_in *peer,
              uint64_t arrived) {
    return impair_datagram(l, d, IN, l->rx, n, peer, arrived);
}

uint64_t fl_imp_next_due(const struct fl_loop *l) {
    const struct fl_imp_loop *m = l->imp;
    return m->nheap ? m->slots[m->heap[0]].due : 0;
}

void fl_imp_release(struct fl_loop *l, uint64_t now) {
    struct fl_imp_loop *m = l->imp;
    while (m->nheap && m->slots[m->heap[0]].due <= now) {
        uint32_t s = pop(m);
        struct held *p = &m->slots[s];
        struct fl_device *dv = &l->dev[p->dev];
        struct fl_imp_dev *d = dv->imp;
        d->held[p->dir]--;
        if (p->dir == EG) {
            if (sendto(dv->fd, p->data, p->len, MSG_DONTWAIT, (const struct sockaddr *)&p->peer,
                       sizeof p->peer) < 0)
                d->send_errors++;
        } else {                        /* processed as if it arrived now */
            memcpy(l->rx, p->data, p->len);
            struct sockaddr_in peer = p->peer;
            size_t len = p->len;
            uint64_t due = p->due;
            p->seq = m->free_;
            m->free_ = s;
            fl_process_datagram(l, dv, len, &peer, (uint64_t)mono_ns(), due);
            now = (uint64_t)mono_ns();
            continue;
        }
        p->seq = m->free_;
        m->free_ = s;
    }
}

/* ---- at exit ---- */

#define U(x) (unsigned long long)(x)

int fl_imp_write(const struct fleet *f) {
    if (!f->imp_spec_of)
        return 0;
    FILE *out = textout_open("wot-fleet", f->log_dir, "fleet-impair.csv");
    if (!out)
        return -1;
    fputs("device,seed,dropped_in,dropped_out,duplicated_in,duplicated_out,corrupted_in,"
          "corrupted_out,delayed_in,delayed_out,queue_full_in,queue_full_out,held_at_exit_in,"
          "held_at_exit_out,send_errors,pings_exempt,oversize_exempt\n", out);
    for (int i = 0; i < f->nloops; i++) {
        const struct fl_imp_loop *m = f->loops[i].imp;
        for (uint32_t k = 0; m && k < m->ndevs; k++) {
            const struct fl_imp_dev *d = &m->devs[k];
            fprintf(out, "%u,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%u,%u,%llu,"
                    "%llu,%llu\n", f->loops[i].dev[d->dev].index, U(d->cfg.seed),
                    U(d->n[IN].dropped), U(d->n[EG].dropped), U(d->n[IN].duplicated),
                    U(d->n[EG].duplicated), U(d->n[IN].corrupted), U(d->n[EG].corrupted),
                    U(d->delayed[IN]), U(d->delayed[EG]), U(d->queue_full[IN]),
                    U(d->queue_full[EG]), d->held[IN], d->held[EG], U(d->send_errors),
                    U(d->pings), U(d->oversize));
        }
    }
    return textout_close("wot-fleet", out, "fleet-impair.csv");
}

void fl_imp_json(FILE *out, const struct fleet *f) {
    uint64_t devs = 0, dropped = 0, delayed = 0, held = 0, full = 0, pool_full = 0;
    for (int i = 0; i < f->nloops; i++) {
        const struct fl_imp_loop *m = f->loops[i].imp;
        if (!m)
            continue;
        devs += m->ndevs;
        pool_full += m->pool_full;
        for (uint32_t k = 0; k < m->ndevs; k++) {
            const struct fl_imp_dev *d = &m->devs[k];
            dropped += d->n[IN].dropped + d->n[EG].dropped;
            delayed += d->delayed[IN] + d->delayed[EG];
            held += d->held[IN] + d->held[EG];
            full += d->queue_full[IN] + d->queue_full[EG];
        }
    }
    if (!f->imp_spec_of) {
        fputs(", \"impair\": null", out);
        return;
    }
    fprintf(out, ", \"impair\": {\"devices\": %llu, \"dropped\": %llu, \"delayed\": %llu, "
            "\"queue_full\": %llu, \"pool_full\": %llu, \"held_at_exit\": %llu}",
            U(devs), U(dropped), U(delayed), U(full), U(pool_full), U(held));
}

void fl_imp_free(struct fl_loop *l) {
    struct fl_imp_loop *m = l->imp;
    if (!m)
        return;
    fl_unreserve(m->slots, m->cap, sizeof *m->slots);
    fl_unreserve(m->heap, m->cap, sizeof *m->heap);
    free(m->devs);
    free(m);
    l->imp = NULL;
}
