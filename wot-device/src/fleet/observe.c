/* observe.c - Observe (RFC 7641, server side) in wot-fleet, as wot-device does it with
 * libcoap 4.3.1 (wot-device/src/observe.c, CONTRACTS §3 and §3b "Observe").
 *
 * Each observable resource of a device runs a notification process from the start: a TICK
 * job of the loop's heap fires at each tick (random phase, intervals drawn from its
 * notify_dist, absolute instants so they do not drift); a tick queues a READ job that takes
 * the device's slot and FIFO like a request (notify_service_us, the resource's sleep|busy
 * mode; a full queue skips the read). When the read ends, the resource's Observe value goes
 * up by one (libcoap's r->observe: 2 at start, only when it has observers) and every observer
 * of that resource gets a notification: CON (a NOTIFY job keeps it for retransmission until
 * its ACK, RFC 7252 timers) or NON, with Observe, Max-Age and the payload.
 *
 * Observers as libcoap keeps them: one per (client address and port, token, resource); a
 * registration (GET, Observe 0) with a new token but the same client, resource and query
 * replaces the older one; Observe 1 removes it; an RST to a notification, or a CON
 * notification given up after MAX_RETRANSMIT (COAP_OBS_MAX_FAIL is 1), removes it and every
 * notification still in flight to it. Registrations and cancels are answered at once,
 * piggy-backed for CON, with the current value and Max-Age, and are not requests of the
 * device log: they, and every notification, are rows of fleet-notify-<loop>.csv.
 *
 * Memory: only for the loop's devices that have an observable resource, reserved at start:
 * a record per observable resource, --observers observer records per such device (a
 * registration beyond them is answered without Observe, as libcoap does when it cannot
 * allocate one, and counted), and the notification log (--log-capacity rows).
 * Differences from wot-device: at most FL_OBS_INFLIGHT CON notifications per observer await
 * their ACK (libcoap's limit is NSTART = queue + threads per client); one more is not sent
 * and counted as coalesced (the next read sends the latest value). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "../notify_interval.h"
#include "../textout.h"
#include "fleet.h"

#define MAX_READS_PER_TICK 16  /* a late tick catches up at most this many reads */
#define FL_OBS_INFLIGHT 16     /* CON notifications awaiting their ACK, per observer */
#define OBSERVE_INITIAL 2      /* libcoap 4.3.1 coap_resource_init: r->observe = 2 */
#define SEQ_NONE UINT32_MAX

enum { K_REGISTER = 0, K_NOTIFY, K_CANCEL };
static const char *const KIND[] = {"register", "notify", "cancel"};

struct obs_res {                /* one observable resource of one device */
    const struct resource *res;
    uint64_t next_ns;           /* its next tick */
    uint64_t tick_ns, read_start_ns, read_end_ns;   /* the last finished read */
    uint32_t seq;               /* the Observe value of its last notification */
};

struct fl_obs_dev {
    uint32_t dev;               /* the device (index in the loop's block) */
    uint32_t res0;              /* its first obs_res in the loop's array */
    uint16_t nres;
    uint32_t observers;         /* list through observer.next */
};

struct observer {
    struct sockaddr_in peer;
    uint32_t next;              /* the device's list, or the free list */
    uint32_t dev, query_hash, ri;  /* ri: its obs_res */
    uint16_t last_mid, gen;     /* MID of its last notification; reuse count */
    uint8_t live, tkl, token[8];
};

struct nrow {                   /* one row of fleet-notify-<loop>.csv */
    uint64_t emit_ns, tick_ns, read_start_ns, read_end_ns;
    const struct resource *res;
    uint32_t device, seq;
    uint8_t kind, type, tkl, token[8];
};

struct obs_counts {
    uint64_t reads, reads_unobserved, reads_skipped, notifications, notifications_con,
        retransmissions, registrations, cancels, refused, removed_rst, removed_timeout,
        coalesced, untracked, replaced;
};

struct fl_obs_loop {
    struct fl_obs_dev *devs;
    struct obs_res *res;
    uint32_t ndevs, nres;
    struct observer *obs;
    uint32_t ocap, obump, ofree;
    struct nrow *log;
    size_t cap, n;
    uint64_t dropped, rng;
    struct obs_counts c;
};

static int observable(const struct resource *r) { return r->notify_dist != NOTIFY_NONE; }

int fl_obs_init(struct fleet *f, struct fl_loop *l) {
    uint32_t ndevs = 0, nres = 0;
    for (uint32_t i = 0; i < l->ndev; i++) {
        const struct resource_set *rs = &l->dev[i].rf->rs;
        uint32_t k = 0;
        for (size_t r = 0; r < rs->n; r++)
            k += observable(&rs->v[r]);
        ndevs += k > 0;
        nres += k;
    }
    if (ndevs == 0)
        return 0;
    struct fl_obs_loop *o = calloc(1, sizeof *o);
    if (!o)
        return -1;
    l->obs = o;
    o->devs = calloc(ndevs, sizeof *o->devs);
    o->res = calloc(nres, sizeof *o->res);
    uint64_t ocap = (uint64_t)ndevs * (f->observers ? f->observers : 1);
    o->ocap = (uint32_t)(ocap < FL_NIL / (2 * FL_OBS_INFLIGHT) ? ocap : FL_NIL / (2 * FL_OBS_INFLIGHT));
    o->obs = fl_reserve(o->ocap, sizeof *o->obs);
    o->cap = f->log_capacity;
    o->log = fl_reserve(o->cap, sizeof *o->log);
    o->ofree = FL_NIL;
    if (!o->devs || !o->res || !o->obs || !o->log) {
        fprintf(stderr, "wot-fleet: loop %d: cannot reserve the Observe state: %s\n", l->id,
                strerror(errno));
        return -1;
    }
    if (getrandom(&o->rng, sizeof o->rng, 0) != sizeof o->rng || o->rng == 0)
        o->rng = (uint64_t)mono_ns() | 1;
    for (uint32_t i = 0; i < l->ndev; i++) {
        const struct resource_set *rs = &l->dev[i].rf->rs;
        uint32_t res0 = o->nres;
        for (size_t r = 0; r < rs->n; r++)
            if (observable(&rs->v[r]))
                o->res[o->nres++] = (struct obs_res){.res = &rs->v[r], .seq = OBSERVE_INITIAL};
        if (o->nres == res0)
            continue;   /* no record: devs holds the ndevs observable devices only */
        struct fl_obs_dev *od = &o->devs[o->ndevs++];
        od->dev = i;
        od->res0 = res0;
        od->observers = FL_NIL;
        od->nres = (uint16_t)(o->nres - res0);
        l->dev[i].obs = od;
    }
    return 0;
}

uint32_t fl_obs_jobs(const struct fl_loop *l) {
    const struct fl_obs_loop *o = l->obs;
    if (!o)
        return 0;
    uint64_t n = (uint64_t)o->nres + (uint64_t)o->ocap * FL_OBS_INFLIGHT;
    return n < FL_NIL / 2 ? (uint32_t)n : FL_NIL / 2;
}

void fl_obs_start(struct fl_loop *l) {
    struct fl_obs_loop *o = l->obs;
    if (!o)
        return;
    uint64_t now = (uint64_t)mono_ns();
    for (uint32_t d = 0; d < o->ndevs; d++) {
        const struct fl_obs_dev *od = &o->devs[d];
        for (uint32_t k = od->res0; k < od->res0 + od->nres; k++) {
            struct obs_res *r = &o->res[k];
            uint32_t j = fl_job_take(l, od->dev, FL_JOB_TICK);
            if (j == FL_NIL)
                continue;   /* cannot happen: the pool counts one per resource */
            /* a stationary start: devices started together are not in lock step, and the
             * first interval is not shorter than the others on average (notify_interval.h) */
            r->next_ns = now + notify_first_ns(r->res, &o->rng);
            l->jobs[j].state = JS_TICK;
            l->jobs[j].res = r->res;
            l->jobs[j].obs = k;
            fl_timer_at(l, j, r->next_ns);
        }
    }
}

static void log_add(struct fl_obs_loop *o, const struct nrow *r) {
    if (o->n < o->cap)
        o->log[o->n++] = *r;
    else
        o->dropped++;
}

/* ---- the notification process ---- */

void fl_obs_tick(struct fl_loop *l, uint32_t j) {
    struct fl_obs_loop *o = l->obs;
    struct fl_job *T = &l->jobs[j];
    struct obs_res *r = &o->res[T->obs];
    uint32_t dev = T->dev, k = T->obs;
    uint64_t now = (uint64_t)mono_ns();
    for (int n = 0; n < MAX_READS_PER_TICK && r->next_ns <= now; n++) {
        uint64_t tick = r->next_ns;
        r->next_ns += notify_interval_ns(r->res, &o->rng);
        uint32_t rj = fl_job_take(l, dev, FL_JOB_READ);
        if (rj == FL_NIL) {
            o->c.reads_skipped++;
            continue;
        }
        struct fl_job *R = &l->jobs[rj];
        R->res = r->res;
        R->obs = k;
        R->arrival_ns = tick;    /* the scheduled instant of the read */
        if (fl_serve(l, rj)) {   /* the device's queue is full */
            fl_job_drop(l, rj);
            o->c.reads_skipped++;
        }
    }
    if (r->next_ns <= now)       /* still behind after the cap: skip ahead */
        r->next_ns = now + notify_interval_ns(r->res, &o->rng);
    fl_timer_at(l, j, r->next_ns);
}

static int same_peer(const struct sockaddr_in *a, const struct sockaddr_in *b) {
    return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

/* CON notifications of observer `oi` still awaiting their ACK */
static unsigned in_flight(const struct fl_loop *l, const struct fl_device *d, uint32_t oi,
                          uint16_t gen) {
    unsigned n = 0;
    for (uint32_t j = d->live_head; j != FL_NIL; j = l->jobs[j].live_next) {
        const struct fl_job *J = &l->jobs[j];
        n += J->kind == FL_JOB_NOTIFY && J->obs == oi && J->req_mid == gen;
    }
    return n;
}

/* a notification's bytes into l->tx (also its retransmissions) */
static size_t build_notify(struct fl_loop *l, uint8_t type, uint16_t mid, const uint8_t *token,
                           uint8_t tkl, uint32_t seq, const struct resource *res) {
    struct fl_opt opt[2] = {fl_opt_uint(FL_OPT_OBSERVE, seq),
                            fl_opt_uint(FL_OPT_MAX_AGE, res->max_age_s)};
    return fl_coap_build_opts(l->tx, sizeof l->tx, type, FL_CONTENT, mid, token, tkl, opt, 2,
                              res->payload_bytes);
}

static void notify(struct fl_loop *l, struct fl_device *d, uint32_t oi, const struct obs_res *r) {
    struct fl_obs_loop *o = l->obs;
    struct observer *ob = &o->obs[oi];
    int con = r->res->notify_con;
    if (con && in_flight(l, d, oi, ob->gen) >= FL_OBS_INFLIGHT) {
        o->c.coalesced++;
        return;
    }
    uint16_t mid = d->next_mid++;
    ob->last_mid = mid;
    uint32_t j = FL_NIL;
    if (con) {
        j = fl_job_take(l, (uint32_t)(d - l->dev), FL_JOB_NOTIFY);
        if (j == FL_NIL)
            o->c.untracked++;    /* sent, but not retransmitted: the pool is empty */
    }
    size_t len = build_notify(l, con ? FL_CON : FL_NON, mid, ob->token, ob->tkl, r->seq, r->res);
    uint64_t emit = fl_send(l, d, &ob->peer, len);
    struct nrow row = {.emit_ns = emit, .tick_ns = r->tick_ns, .read_start_ns = r->read_start_ns,
                       .read_end_ns = r->read_end_ns, .res = r->res, .device = d->index,
                       .seq = r->seq, .kind = K_NOTIFY, .type = con ? FL_CON : FL_NON,
                       .tkl = ob->tkl};
    memcpy(row.token, ob->token, ob->tkl);
    log_add(o, &row);
    o->c.notifications++;
    o->c.notifications_con += con;
    if (j != FL_NIL) {
        struct fl_job *N = &l->jobs[j];
        N->state = JS_AWAIT_ACK;
        N->type = FL_CON;
        N->code = FL_CONTENT;
        N->res = r->res;
        N->peer = ob->peer;
        N->tkl = ob->tkl;
        memcpy(N->token, ob->token, ob->tkl);
        N->resp_mid = mid;
        N->req_mid = ob->gen;    /* which incarnation of the observer record it is for */
        N->obs = oi;
        N->seq = r->seq;
        N->sent_ns = emit;
        N->rtx_timeout_ns = fl_ack_timeout(l);
        fl_timer_at(l, j, (uint64_t)mono_ns() + N->rtx_timeout_ns);
    }
}

void fl_obs_read_done(struct fl_loop *l, uint32_t j) {
    struct fl_obs_loop *o = l->obs;
    struct fl_job *R = &l->jobs[j];
    struct fl_device *d = &l->dev[R->dev];
    struct obs_res *r = &o->res[R->obs];
    uint32_t k = R->obs;
    r->tick_ns = R->arrival_ns;
    r->read_start_ns = R->start_ns;
    r->read_end_ns = R->end_ns;
    o->c.reads++;
    fl_job_drop(l, j);
    int any = 0;
    for (uint32_t oi = d->obs->observers; oi != FL_NIL; oi = o->obs[oi].next)
        any |= o->obs[oi].ri == k;
    if (!any) {
        o->c.reads_unobserved++;
        return;
    }
    r->seq = (r->seq + 1) & 0xFFFFFF;   /* RFC 7641 §4.4: 24 bits */
    for (uint32_t oi = d->obs->observers; oi != FL_NIL; oi = o->obs[oi].next)
        if (o->obs[oi].ri == k)
            notify(l, d, oi, r);
}

size_t fl_obs_build(struct fl_loop *l, const struct fl_job *J) {
    if (J->rtx)
        l->obs->c.retransmissions++;
    return build_notify(l, FL_CON, J->resp_mid, J->token, J->tkl, J->seq, J->res);
}

/* ---- observers ---- */

static void remove_observer(struct fl_loop *l, struct fl_device *d, uint32_t oi) {
    struct fl_obs_loop *o = l->obs;
    uint32_t *p = &d->obs->observers;
    while (*p != FL_NIL && *p != oi)
        p = &o->obs[*p].next;
    if (*p == FL_NIL)
        return;
    *p = o->obs[oi].next;
    o->obs[oi].live = 0;
    o->obs[oi].gen++;
    o->obs[oi].next = o->ofree;
    o->ofree = oi;
}

/* RST to a notification, or a CON notification given up: libcoap cancels every message to
 * that observer's token and removes it */
static void drop_observer(struct fl_loop *l, struct fl_device *d, uint32_t oi) {
    uint16_t gen = l->obs->obs[oi].gen;
    for (uint32_t j = d->live_head, next; j != FL_NIL; j = next) {
        next = l->jobs[j].live_next;
        if (l->jobs[j].kind == FL_JOB_NOTIFY && l->jobs[j].obs == oi && l->jobs[j].req_mid == gen)
            fl_job_drop(l, j);
    }
    remove_observer(l, d, oi);
}

void fl_obs_rejected(struct fl_loop *l, uint32_t j, int timed_out) {
    struct fl_obs_loop *o = l->obs;
    struct fl_job *J = &l->jobs[j];
    struct fl_device *d = &l->dev[J->dev];
    uint32_t oi = J->obs;
    if (o->obs[oi].live && o->obs[oi].gen == J->req_mid) {
        if (timed_out)
            o->c.removed_timeout++;
        else
            o->c.removed_rst++;
        drop_observer(l, d, oi);   /* J among them */
        return;
    }
    fl_job_drop(l, j);               /* its observer had gone already */
}

void fl_obs_rst(struct fl_loop *l, struct fl_device *d, uint16_t mid,
                const struct sockaddr_in *peer) {
    struct fl_obs_loop *o = l->obs;
    for (uint32_t oi = d->obs->observers; oi != FL_NIL; oi = o->obs[oi].next)
        if (o->obs[oi].last_mid == mid && same_peer(&o->obs[oi].peer, peer)) {
            o->c.removed_rst++;
            drop_observer(l, d, oi);
            return;
        }
}

static uint32_t find_observer(struct fl_loop *l, struct fl_device *d, uint32_t ri,
                              const struct sockaddr_in *peer, const struct fl_msg *m,
                              int by_token) {
    struct fl_obs_loop *o = l->obs;
    for (uint32_t oi = d->obs->observers; oi != FL_NIL; oi = o->obs[oi].next) {
        const struct observer *ob = &o->obs[oi];
        if (ob->ri != ri || !same_peer(&ob->peer, peer))
            continue;
        if (by_token ? ob->tkl == m->tkl && !memcmp(ob->token, m->token, m->tkl)
                     : ob->query_hash == m->query_hash)
            return oi;
    }
    return FL_NIL;
}

static uint32_t add_observer(struct fl_loop *l, struct fl_device *d, uint32_t ri,
                             const struct sockaddr_in *peer, const struct fl_msg *m) {
    struct fl_obs_loop *o = l->obs;
    uint32_t oi = o->ofree;
    if (oi != FL_NIL)
        o->ofree = o->obs[oi].next;
    else if (o->obump < o->ocap)
        oi = o->obump++;
    else
        return FL_NIL;
    struct observer *ob = &o->obs[oi];
    uint16_t gen = ob->gen;
    *ob = (struct observer){.peer = *peer, .next = d->obs->observers,
                            .dev = (uint32_t)(d - l->dev), .query_hash = m->query_hash,
                            .ri = ri, .gen = gen, .live = 1, .tkl = m->tkl};
    memcpy(ob->token, m->token, m->tkl);
    d->obs->observers = oi;
    return oi;
}

int fl_obs_request(struct fl_loop *l, struct fl_device *d, const struct fl_msg *m,
                   const struct sockaddr_in *peer, const struct resource *res) {
    struct fl_obs_loop *o = l->obs;
    if (!observable(res) || m->code != FL_GET || m->observe_val > 1)
        return 0;          /* an ordinary GET (RFC 7641 §2: other values are not defined) */
    uint32_t ri = FL_NIL;
    for (uint32_t k = d->obs->res0; k < d->obs->res0 + d->obs->nres; k++)
        if (o->res[k].res == res)
            ri = k;
    uint8_t type = m->type == FL_CON ? FL_ACK : FL_NON;
    /* libcoap answers a NON request with the request's own message ID */
    struct nrow row = {.res = res, .device = d->index, .seq = SEQ_NONE, .type = type,
                       .tkl = m->tkl};
    memcpy(row.token, m->token, m->tkl);
    struct fl_opt opt[2];
    int nopt = 0;
    if (m->observe_val == 0) {
        if (m->has_block2 && (m->block2 >> 4) != 0) {   /* libcoap: 4.00, no handler */
            fl_send(l, d, peer, fl_coap_build(l->tx, sizeof l->tx, type, FL_BAD_REQUEST, m->mid,
                                             m->token, m->tkl, -1, NULL, 0));
            return 1;
        }
        uint32_t oi = find_observer(l, d, ri, peer, m, 1);
        if (oi == FL_NIL) {
            uint32_t old = find_observer(l, d, ri, peer, m, 0);
            if (old != FL_NIL) {     /* the same query with a new token replaces it */
                remove_observer(l, d, old);
                o->c.replaced++;
            }
            oi = add_observer(l, d, ri, peer, m);
        }
        if (oi == FL_NIL) {
            o->c.refused++;          /* no record left: answered without Observe */
        } else {
            row.seq = o->res[ri].seq;
            opt[nopt++] = fl_opt_uint(FL_OPT_OBSERVE, row.seq);
        }
        row.kind = K_REGISTER;
        o->c.registrations++;
    } else {
        uint32_t oi = find_observer(l, d, ri, peer, m, 1);
        if (oi != FL_NIL)
            remove_observer(l, d, oi);
        row.kind = K_CANCEL;
        o->c.cancels++;
    }
    opt[nopt++] = fl_opt_uint(FL_OPT_MAX_AGE, res->max_age_s);
    size_t len = fl_coap_build_opts(l->tx, sizeof l->tx, type, FL_CONTENT, m->mid, m->token,
                                    m->tkl, opt, nopt, res->payload_bytes);
    row.emit_ns = fl_send(l, d, peer, len);
    log_add(o, &row);
    return 1;
}

/* ---- at exit ---- */

int fl_obs_write(const struct fleet *f, const struct fl_loop *l) {
    const struct fl_obs_loop *o = l->obs;
    if (!o)
        return 0;
    char name[64];
    snprintf(name, sizeof name, "fleet-notify-%d.csv", l->id);
    FILE *out = textout_open("wot-fleet", f->log_dir, name);
    if (!out)
        return -1;
    static char buf[1 << 16];
    setvbuf(out, buf, _IOFBF, sizeof buf);
    fputs("device,emit_ns,tick_ns,read_start_ns,read_end_ns,path,kind,seq,type,token\n", out);
    for (size_t i = 0; i < o->n; i++) {
        const struct nrow *e = &o->log[i];
        fprintf(out, "%u,%llu,", e->device, (unsigned long long)e->emit_ns);
        if (e->read_start_ns)
            fprintf(out, "%llu,%llu,%llu,", (unsigned long long)e->tick_ns,
                    (unsigned long long)e->read_start_ns, (unsigned long long)e->read_end_ns);
        else
            fputs(",,,", out);
        fprintf(out, "%s,%s,", e->res->path, KIND[e->kind]);
        if (e->seq != SEQ_NONE)
            fprintf(out, "%u", e->seq);
        fprintf(out, ",%s,", e->type == FL_CON ? "con" : e->type == FL_ACK ? "ack" : "non");
        for (int b = 0; b < e->tkl; b++)
            fprintf(out, "%02x", e->token[b]);
        fputc('\n', out);
    }
    return textout_close("wot-fleet", out, name);
}

void fl_obs_json(FILE *out, const struct fleet *f) {
    struct obs_counts t = {0};
    uint64_t nres = 0, ocap = 0, live = 0, n = 0, dropped = 0;
    int any = 0;
    for (int i = 0; i < f->nloops; i++) {
        const struct fl_loop *l = &f->loops[i];
        const struct fl_obs_loop *o = l->obs;
        if (!o)
            continue;
        any = 1;
        const uint64_t *src = (const uint64_t *)&o->c;
        uint64_t *dst = (uint64_t *)&t;
        for (size_t k = 0; k < sizeof t / sizeof(uint64_t); k++)
            dst[k] += src[k];
        nres += o->nres;
        ocap += o->ocap;
        for (uint32_t oi = 0; oi < o->obump; oi++)
            live += o->obs[oi].live;
        n += o->n;
        dropped += o->dropped;
    }
    if (!any) {
        fputs(", \"observe\": null", out);
        return;
    }
#define U(x) (unsigned long long)(x)
    fprintf(out,
            ", \"observe\": {\"observable_resources\": %llu, \"observer_records\": %llu, "
            "\"reads\": %llu, \"reads_unobserved\": %llu, \"reads_skipped\": %llu, "
            "\"notifications\": %llu, \"notifications_con\": %llu, \"retransmissions\": %llu, "
            "\"registrations\": %llu, \"cancels\": %llu, \"replaced\": %llu, "
            "\"refused\": %llu, \"removed_rst\": %llu, \"removed_timeout\": %llu, "
            "\"coalesced\": %llu, \"untracked\": %llu, \"observers_at_exit\": %llu, "
            "\"log_entries\": %llu, \"log_dropped\": %llu}",
            U(nres), U(ocap), U(t.reads), U(t.reads_unobserved), U(t.reads_skipped),
            U(t.notifications), U(t.notifications_con), U(t.retransmissions),
            U(t.registrations), U(t.cancels), U(t.replaced), U(t.refused), U(t.removed_rst),
            U(t.removed_timeout), U(t.coalesced), U(t.untracked), U(live), U(n), U(dropped));
#undef U
}

void fl_obs_free(struct fl_loop *l) {
    struct fl_obs_loop *o = l->obs;
    if (!o)
        return;
    fl_unreserve(o->obs, o->ocap, sizeof *o->obs);
    fl_unreserve(o->log, o->cap, sizeof *o->log);
    free(o->devs);
    free(o->res);
    free(o);
    l->obs = NULL;
}
