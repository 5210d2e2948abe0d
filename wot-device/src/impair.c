/* impair.c - app-level network impairments with tc-netem semantics (see impair.h).
 *
 * Per direction (egress = datagrams the endpoint sends, ingress = datagrams it receives),
 * each datagram goes through, in netem's order (net/sched/sch_netem.c, netem_enqueue):
 *   duplicate? (count++), lost? (count--; random loss with correlation or Gilbert-Elliott),
 *   count == 0 -> dropped; corrupt? (one random bit of the datagram flipped);
 *   release time = now + delay sample; with rate: max(that, previous release) + wire time;
 *   a duplicate goes through the same steps again (without duplication).
 * A datagram whose release time is not in the future goes at once; the others wait in a
 * preallocated min-heap (ordered by release time, then arrival) served by the I/O loop.
 *
 * Random numbers: xoshiro256** streams seeded with splitmix64 from --impair-seed, one stream
 * per direction and impairment kind, so e.g. the loss pattern of the n-th response does not
 * depend on whether delays are drawn too. Correlation is netem's get_crandom(): with rho =
 * corr/100, u_n = (1 - rho) * U + rho * u_{n-1} with U fresh uniform; u_n is then used as
 * the probability draw (loss/dup/corrupt: event when u_n < P) or as the quantile of the
 * jitter distribution (delay = delay + jitter * F^-1(u_n)). As in netem this narrows the
 * spread of correlated values (it is a moving average, not a Markov chain with the same
 * marginal distribution). Distributions (quantile functions matching iproute2's tables):
 *   uniform       2u - 1                              (netem without a table)
 *   normal        Phi^-1(u), clipped to [-4, 4]
 *   pareto        ((1-u)^(-1/3) - 1.5) * 4/3, <= 4    (iproute2 pareto.c, alpha 3)
 *   paretonormal  (Phi^-1(u) + 3 * pareto(u)) / 4     (iproute2 paretonormal.c)
 * Negative delays are 0. Pings (empty CON in, empty RST out, 4 bytes) are never impaired. */
#include "impair.h"
#include "service.h"

#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#define PKT_MAX 2048          /* larger datagrams pass unimpaired (CoAP here: < 1.2 KB) */
#define NAME_MAX_ 32          /* sockaddr_in6 is 28 bytes */
#define CTL_MAX 64            /* IP_PKTINFO / IPV6_PKTINFO control message */
#define QUEUE_CAP 4096        /* held datagrams per direction (netem's default limit: 1000) */
#define MAX_FD 4096

enum { DIST_UNIFORM, DIST_NORMAL, DIST_PARETO, DIST_PARETONORMAL };
enum { K_DELAY, K_LOSS, K_DUP, K_CORRUPT, K_BIT, K_N };

struct cfg {
    int given, egress, ingress;
    int64_t delay_ns, jitter_ns;
    double delay_corr;
    int dist;
    double loss, loss_corr;
    int ge;
    double ge_p, ge_r, ge_1h, ge_1k;
    double rate_bps;          /* bits per second, 0 = unlimited */
    double dup, dup_corr, corrupt, corrupt_corr;
    uint64_t seed;
};

struct rng { uint64_t s[4]; };
struct crnd { double rho, last; };

struct pkt {
    uint64_t due, seq;
    uint16_t len, namelen, ctllen;
    uint8_t name[NAME_MAX_], ctl[CTL_MAX], data[PKT_MAX];
};

struct chan {
    int on;
    struct rng r[K_N];
    struct crnd c_delay, c_loss, c_dup, c_corrupt;
    int ge_bad;
    uint64_t last_release, seq;
    struct pkt *slots;
    uint32_t *heap, nheap, *free_, nfree;
    uint64_t dropped, delayed, duplicated, corrupted, overflow, errors, oversize, pings;
};

static struct cfg C;
static struct chan EG, IN;     /* egress, ingress */
static int ep_fd = -1;
static void *ptr_by_fd[MAX_FD];
static struct pkt *replay;     /* ingress datagram handed to libcoap's next recvmsg */
static int replay_taken;

ssize_t __real_sendmsg(int fd, const struct msghdr *m, int flags);
ssize_t __real_recvmsg(int fd, struct msghdr *m, int flags);
int __real_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
ssize_t __wrap_sendmsg(int fd, const struct msghdr *m, int flags);
ssize_t __wrap_recvmsg(int fd, struct msghdr *m, int flags);
int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);

/* ------------------------------------------------------------------------------ parsing */

static int bad(const char *opt, const char *what, const char *val, const char *expected) {
    fprintf(stderr, "wot-device: %s: %s '%s', expected %s\n", opt, what, val, expected);
    return -1;
}

/* "<decimal>%" in 0..100 -> fraction 0..1 */
static int parse_pct(const char *opt, const char *key, const char *v, double *out) {
    size_t n = strlen(v);
    size_t digits = strspn(v, "0123456789.");
    char what[64];
    snprintf(what, sizeof what, "bad %s", key);
    if (n < 2 || digits != n - 1 || v[n - 1] != '%' || strchr(v, '.') != strrchr(v, '.') ||
        v[0] == '.' || v[n - 2] == '.')
        return bad(opt, what, v, "a percentage like 2% or 0.5% (0..100)");
    double x = strtod(v, NULL);
    if (!(x >= 0 && x <= 100))
        return bad(opt, what, v, "a percentage 0..100%");
    *out = x / 100.0;
    return 0;
}

/* "<int>ms" | "<int>us" -> ns */
static int parse_time(const char *key, const char *v, int64_t *out) {
    char what[64];
    snprintf(what, sizeof what, "bad %s", key);
    size_t d = strspn(v, "0123456789");
    int64_t mul = 0;
    if (!strcmp(v + d, "ms"))
        mul = 1000000;
    else if (!strcmp(v + d, "us"))
        mul = 1000;
    if (d == 0 || d > 10 || !mul)
        return bad("--impair", what, v, "<int>ms or <int>us, e.g. 40ms or 500us");
    int64_t x = strtoll(v, NULL, 10) * mul;
    if (x > 3600LL * 1000000000LL)
        return bad("--impair", what, v, "at most 3600000ms");
    *out = x;
    return 0;
}

static int parse_rate(const char *v, double *bps) {
    static const struct { const char *u; double f; } units[] = {
        {"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9},
        {"bps", 8}, {"kbps", 8e3}, {"mbps", 8e6}, {"gbps", 8e9}};
    size_t d = strspn(v, "0123456789.");
    const char *unit = v + d;
    if (d > 0 && v[0] != '.' && v[d - 1] != '.' && strchr(v, '.') == strrchr(v, '.')) {
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            if (!strcmp(unit, units[i].u)) {
                double x = strtod(v, NULL) * units[i].f;
                if (x > 0 && isfinite(x)) {
                    *bps = x;
                    return 0;
                }
            }
        }
    }
    return bad("--impair", "bad rate", v,
               "a number > 0 with a unit bit|kbit|mbit|gbit|bps|kbps|mbps|gbps, e.g. 250kbit");
}

/* Splits "k=v,k=v" in place; calls fn for each pair. */
static int each_kv(const char *opt, char *s, int (*fn)(const char *k, const char *v)) {
    if (!*s)
        return bad(opt, "empty", s, "comma-separated key=value");
    for (char *next = s, *tok; (tok = strsep(&next, ",")) != NULL;) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || !eq[1])
            return bad(opt, "bad item", tok, "key=value");
        *eq = '\0';
        if (fn(tok, eq + 1))
            return -1;
    }
    return 0;
}

static const char *const KEYS[] = {"dir", "delay", "jitter", "delay-corr", "dist", "loss",
                                   "loss-corr", "rate", "dup", "dup-corr", "corrupt",
                                   "corrupt-corr"};
#define NKEYS (sizeof KEYS / sizeof KEYS[0])
static int seen[NKEYS];

static int spec_kv(const char *k, const char *v) {
    size_t i = 0;
    while (i < NKEYS && strcmp(KEYS[i], k))
        i++;
    if (i == NKEYS)
        return bad("--impair", "unknown key", k,
                   "one of dir, delay, jitter, delay-corr, dist, loss, loss-corr, rate, dup, "
                   "dup-corr, corrupt, corrupt-corr");
    if (seen[i]++)
        return bad("--impair", "duplicate key", k, "each key once");
    switch (i) {
    case 0:
        if (!strcmp(v, "egress"))
            C.egress = 1;
        else if (!strcmp(v, "ingress"))
            C.ingress = 1;
        else if (!strcmp(v, "both"))
            C.egress = C.ingress = 1;
        else
            return bad("--impair", "bad dir", v, "egress|ingress|both");
        return 0;
    case 1: return parse_time("delay", v, &C.delay_ns);
    case 2: return parse_time("jitter", v, &C.jitter_ns);
    case 3: return parse_pct("--impair", "delay-corr", v, &C.delay_corr);
    case 4: {
        static const char *d[] = {"uniform", "normal", "pareto", "paretonormal"};
        for (int j = 0; j < 4; j++)
            if (!strcmp(v, d[j])) {
                C.dist = j;
                return 0;
            }
        return bad("--impair", "bad dist", v, "uniform|normal|pareto|paretonormal");
    }
    case 5: return parse_pct("--impair", "loss", v, &C.loss);
    case 6: return parse_pct("--impair", "loss-corr", v, &C.loss_corr);
    case 7: return parse_rate(v, &C.rate_bps);
    case 8: return parse_pct("--impair", "dup", v, &C.dup);
    case 9: return parse_pct("--impair", "dup-corr", v, &C.dup_corr);
    case 10: return parse_pct("--impair", "corrupt", v, &C.corrupt);
    default: return parse_pct("--impair", "corrupt-corr", v, &C.corrupt_corr);
    }
}

static int ge_seen[4];

static int ge_kv(const char *k, const char *v) {
    static const char *keys[] = {"p", "r", "1-h", "1-k"};
    double *dst[] = {&C.ge_p, &C.ge_r, &C.ge_1h, &C.ge_1k};
    for (int i = 0; i < 4; i++) {
        if (strcmp(k, keys[i]))
            continue;
        if (ge_seen[i]++)
            return bad("--impair-ge", "duplicate key", k, "each key once");
        return parse_pct("--impair-ge", k, v, dst[i]);
    }
    return bad("--impair-ge", "unknown key", k, "p, r, 1-h, 1-k");
}

static int need(int have, const char *key, const char *needs) {
    if (have)
        return 0;
    fprintf(stderr, "wot-device: --impair: %s given without %s, expected %s too\n", key, needs,
            needs);
    return -1;
}

int impair_parse(const char *spec, const char *ge, const char *seed) {
    memset(&C, 0, sizeof C);
    C.seed = 1;
    if (seed) {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(seed, &end, 10);
        if (!*seed || *end || errno || seed[0] == '-')
            return bad("--impair-seed", "bad seed", seed, "an unsigned 64-bit integer");
        C.seed = s;
    }
    if (!spec) {
        if (ge) {
            fputs("wot-device: --impair-ge: given without --impair, expected --impair "
                  "\"dir=...\" too\n", stderr);
            return -1;
        }
        return 0;
    }
    char buf[1024];
    if (strlen(spec) >= sizeof buf)
        return bad("--impair", "too long", "...", "at most 1023 characters");
    strcpy(buf, spec);
    if (each_kv("--impair", buf, spec_kv))
        return -1;
    if (!seen[0]) {
        fprintf(stderr, "wot-device: --impair: missing key 'dir' in '%s', expected "
                "dir=egress|ingress|both\n", spec);
        return -1;
    }
    if (need(seen[1] || !seen[2], "jitter", "delay") ||
        need(seen[2] || !seen[3], "delay-corr", "jitter") ||
        need(seen[2] || !seen[4], "dist", "jitter") ||
        need(seen[5] || !seen[6], "loss-corr", "loss") ||
        need(seen[8] || !seen[9], "dup-corr", "dup") ||
        need(seen[10] || !seen[11], "corrupt-corr", "corrupt"))
        return -1;
    if (ge) {
        if (seen[5]) {
            fputs("wot-device: --impair: loss given together with --impair-ge, expected one "
                  "of random loss (loss=) or Gilbert-Elliott loss (--impair-ge)\n", stderr);
            return -1;
        }
        C.ge_r = 1.0;     /* tc-netem defaults: r 100%, 1-h 100%, 1-k 0% */
        C.ge_1h = 1.0;
        if (strlen(ge) >= sizeof buf)
            return bad("--impair-ge", "too long", "...", "at most 1023 characters");
        strcpy(buf, ge);
        if (each_kv("--impair-ge", buf, ge_kv))
            return -1;
        if (!ge_seen[0]) {
            fprintf(stderr, "wot-device: --impair-ge: missing key 'p' in '%s', expected "
                    "p=P%%[,r=P%%,1-h=P%%,1-k=P%%]\n", ge);
            return -1;
        }
        C.ge = 1;
    }
    C.given = 1;
    return 0;
}

int impair_enabled(void) { return C.given; }

/* ------------------------------------------------------------------------------ random */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro(struct rng *r) {   /* xoshiro256** */
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

static double u01(struct rng *r) { return (double)(xoshiro(r) >> 11) * 0x1.0p-53; }

static double crandom(struct crnd *c, struct rng *r) {
    double u = u01(r);
    if (c->rho == 0)
        return u;
    c->last = (1 - c->rho) * u + c->rho * c->last;
    return c->last;
}

/* Standard normal quantile (P. J. Acklam's rational approximation, |rel err| < 1.2e-9). */
static double norm_inv(double p) {
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                               -2.759285104469687e+02, 1.383577518672690e+02,
                               -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                               -1.556989798598866e+02, 6.680131188771972e+01,
                               -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                               -2.400758277161838e+00, -2.549732539343734e+00,
                               4.374664141464968e+00, 2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                               2.445134137142996e+00, 3.754408661907416e+00};
    const double lo = 0.02425;
    if (p <= 0)
        return -INFINITY;
    if (p >= 1)
        return INFINITY;
    if (p < lo) {
        double q = sqrt(-2 * log(p));
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    }
    if (p > 1 - lo) {
        double q = sqrt(-2 * log(1 - p));
        return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    }
    double q = p - 0.5, r = q * q;
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
           (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

static double clip4(double x) { return x < -4 ? -4 : x > 4 ? 4 : x; }

static double pareto_q(double u) { return clip4((pow(1 - u, -1.0 / 3.0) - 1.5) * 4.0 / 3.0); }

static double dist_q(int dist, double u) {
    switch (dist) {
    case DIST_NORMAL: return clip4(norm_inv(u));
    case DIST_PARETO: return pareto_q(u);
    case DIST_PARETONORMAL: return (clip4(norm_inv(u)) + 3 * pareto_q(u)) / 4;
    default: return 2 * u - 1;
    }
}

/* ------------------------------------------------------------------------------ model */

static int64_t sample_delay(struct chan *c) {
    if (C.jitter_ns == 0)
        return C.delay_ns;
    double t = dist_q(C.dist, crandom(&c->c_delay, &c->r[K_DELAY]));
    double d = (double)C.delay_ns + (double)C.jitter_ns * t;
    return d < 0 ? 0 : (int64_t)llround(d);
}

static int is_lost(struct chan *c) {
    if (C.ge) {       /* netem loss_gilb_ell(): transition first, then the state's loss */
        struct rng *r = &c->r[K_LOSS];
        if (!c->ge_bad) {
            if (u01(r) < C.ge_p)
                c->ge_bad = 1;
            return u01(r) < C.ge_1k;
        }
        if (u01(r) < C.ge_r)
            c->ge_bad = 0;
        return u01(r) < C.ge_1h;
    }
    return C.loss > 0 && crandom(&c->c_loss, &c->r[K_LOSS]) < C.loss;
}

/* Wire size netem's rate sees (qdisc_pkt_len: Ethernet 14 + IPv4 20 / IPv6 40 + UDP 8). */
static uint64_t wire_ns(size_t len, int v6) {
    double bytes = (double)len + (v6 ? 62 : 42);
    return (uint64_t)llround(bytes * 8e9 / C.rate_bps);
}

static uint64_t release_time(struct chan *c, size_t len, int v6, uint64_t now) {
    uint64_t t = now + (uint64_t)sample_delay(c);
    if (C.rate_bps > 0) {
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

static uint32_t heap_pop(struct chan *c) {
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

struct meta {
    const void *name;
    socklen_t namelen;
    const void *ctl;
    size_t ctllen;
};

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
static int admit(struct chan *c, uint8_t *buf, size_t len, const struct meta *m, int v6,
                 int allow_dup, uint64_t now) {
    static uint8_t orig[PKT_MAX];
    int count = 1;
    if (allow_dup && C.dup > 0 && crandom(&c->c_dup, &c->r[K_DUP]) < C.dup)
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
    if (C.corrupt > 0 && crandom(&c->c_corrupt, &c->r[K_CORRUPT]) < C.corrupt && len > 0) {
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

/* ------------------------------------------------------------------------------ runtime */

static int chan_init(struct chan *c, int on, unsigned dir) {
    memset(c, 0, sizeof *c);
    c->on = on;
    uint64_t sm = C.seed ^ (0x5157a1dull * (dir + 1));
    for (int k = 0; k < K_N; k++) {
        uint64_t x = splitmix64(&sm) ^ ((uint64_t)(dir * K_N + k) << 56);
        for (int i = 0; i < 4; i++)
            c->r[k].s[i] = splitmix64(&x);
    }
    c->c_delay = (struct crnd){C.delay_corr, u01(&c->r[K_DELAY])};
    c->c_loss = (struct crnd){C.loss_corr, u01(&c->r[K_LOSS])};
    c->c_dup = (struct crnd){C.dup_corr, u01(&c->r[K_DUP])};
    c->c_corrupt = (struct crnd){C.corrupt_corr, u01(&c->r[K_CORRUPT])};
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
    if (chan_init(&EG, C.given && C.egress, 0) || chan_init(&IN, C.given && C.ingress, 1))
        return -1;
    return 0;
}

int impair_set_endpoint(int fd) {
    ep_fd = fd;
    return fd >= 0 && fd < MAX_FD && ptr_by_fd[fd] ? 0 : -1;
}

void *impair_endpoint_ptr(void) { return ep_fd >= 0 && ep_fd < MAX_FD ? ptr_by_fd[ep_fd] : NULL; }

uint64_t impair_next_due(void) {
    uint64_t t = 0;
    if (EG.nheap)
        t = EG.slots[EG.heap[0]].due;
    if (IN.nheap && (!t || IN.slots[IN.heap[0]].due < t))
        t = IN.slots[IN.heap[0]].due;
    return t;
}

void impair_flush_egress(uint64_t now) {
    while (EG.nheap && EG.slots[EG.heap[0]].due <= now) {
        uint32_t idx = heap_pop(&EG);
        struct pkt *p = &EG.slots[idx];
        struct iovec iov = {.iov_base = p->data, .iov_len = p->len};
        struct msghdr m = {.msg_name = p->namelen ? p->name : NULL, .msg_namelen = p->namelen,
                           .msg_iov = &iov, .msg_iovlen = 1,
                           .msg_control = p->ctllen ? p->ctl : NULL,
                           .msg_controllen = p->ctllen};
        if (__real_sendmsg(ep_fd, &m, 0) < 0)
            EG.errors++;
        EG.free_[EG.nfree++] = idx;
    }
}

int impair_ingress_begin(uint64_t now) {
    if (!IN.nheap || IN.slots[IN.heap[0]].due > now)
        return 0;
    replay = &IN.slots[heap_pop(&IN)];
    replay_taken = 0;
    return 1;
}

void impair_ingress_end(void) {
    if (!replay)
        return;
    if (!replay_taken)
        IN.errors++;    /* libcoap did not read it (should not happen) */
    IN.free_[IN.nfree++] = (uint32_t)(replay - IN.slots);
    replay = NULL;
}

/* Empty message (4 bytes, code 0.00) of the given type: CON = ping, RST = its answer. */
static int is_ping_msg(const uint8_t *d, size_t len, int type) {
    return len == 4 && (d[0] & 0xC0) == 0x40 && ((d[0] >> 4) & 3) == type && d[1] == 0;
}

ssize_t __wrap_sendmsg(int fd, const struct msghdr *m, int flags) {
    if (fd != ep_fd || !EG.on || m->msg_iovlen != 1 || m->msg_iov[0].iov_len > PKT_MAX) {
        if (fd == ep_fd && EG.on)
            EG.oversize++;
        return __real_sendmsg(fd, m, flags);
    }
    const uint8_t *d = m->msg_iov[0].iov_base;
    size_t len = m->msg_iov[0].iov_len;
    if (is_ping_msg(d, len, 3)) {
        EG.pings++;
        return __real_sendmsg(fd, m, flags);
    }
    static uint8_t buf[PKT_MAX];   /* libcoap keeps its copy for retransmissions intact */
    memcpy(buf, d, len);
    struct meta meta = {m->msg_name, m->msg_namelen, m->msg_control, m->msg_controllen};
    int v6 = m->msg_namelen == sizeof(struct sockaddr_in6);
    if (admit(&EG, buf, len, &meta, v6, 1, mono_ns())) {
        struct iovec iov = {.iov_base = buf, .iov_len = len};
        struct msghdr m2 = *m;
        m2.msg_iov = &iov;
        ssize_t r = __real_sendmsg(fd, &m2, flags);
        if (r < 0)
            EG.errors++;
        return r;
    }
    return (ssize_t)len;  /* dropped or held: to libcoap, it was sent */
}

ssize_t __wrap_recvmsg(int fd, struct msghdr *m, int flags) {
    if (fd != ep_fd || !IN.on || m->msg_iovlen != 1)
        return __real_recvmsg(fd, m, flags);
    if (replay && !replay_taken) {
        struct pkt *p = replay;
        replay_taken = 1;
        size_t n = p->len < m->msg_iov[0].iov_len ? p->len : m->msg_iov[0].iov_len;
        memcpy(m->msg_iov[0].iov_base, p->data, n);
        if (m->msg_name) {
            socklen_t nl = p->namelen < m->msg_namelen ? p->namelen : m->msg_namelen;
            memcpy(m->msg_name, p->name, nl);
            m->msg_namelen = p->namelen;
        }
        if (m->msg_control && m->msg_controllen >= p->ctllen) {
            memcpy(m->msg_control, p->ctl, p->ctllen);
            m->msg_controllen = p->ctllen;
        } else {
            m->msg_controllen = 0;
        }
        m->msg_flags = n < p->len ? MSG_TRUNC : 0;
        return (ssize_t)n;
    }
    ssize_t n = __real_recvmsg(fd, m, flags | MSG_DONTWAIT);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            errno = ECONNREFUSED;   /* libcoap ignores this quietly (reads 0 bytes) */
        return n;
    }
    uint8_t *d = m->msg_iov[0].iov_base;
    if ((size_t)n > PKT_MAX || (m->msg_flags & MSG_TRUNC)) {
        IN.oversize++;
        return n;
    }
    if (is_ping_msg(d, (size_t)n, 0)) {
        IN.pings++;
        return n;
    }
    struct meta meta = {m->msg_name, m->msg_namelen, m->msg_control, m->msg_controllen};
    int v6 = m->msg_namelen == sizeof(struct sockaddr_in6);
    if (admit(&IN, d, (size_t)n, &meta, v6, 1, mono_ns()))
        return n;
    errno = ECONNREFUSED;          /* dropped or held: libcoap sees no datagram */
    return -1;
}

int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev) {
    if (fd >= 0 && fd < MAX_FD) {
        if (op == EPOLL_CTL_DEL)
            ptr_by_fd[fd] = NULL;
        else if (ev)
            ptr_by_fd[fd] = ev->data.ptr;
    }
    return __real_epoll_ctl(epfd, op, fd, ev);
}

void impair_json(FILE *f) {
    if (!C.given) {
        fputs(", \"impair\": null", f);
        return;
    }
    const char *dir = C.egress && C.ingress ? "both" : C.egress ? "egress" : "ingress";
    fprintf(f,
            ", \"impair\": {\"dir\": \"%s\", \"seed\": %llu, \"dropped_in\": %llu, "
            "\"dropped_out\": %llu, \"duplicated\": %llu, \"corrupted\": %llu, "
            "\"delayed_in\": %llu, \"delayed_out\": %llu, \"duplicated_in\": %llu, "
            "\"duplicated_out\": %llu, \"corrupted_in\": %llu, \"corrupted_out\": %llu, "
            "\"queue_full_in\": %llu, \"queue_full_out\": %llu, \"held_at_exit_in\": %u, "
            "\"held_at_exit_out\": %u, \"send_errors\": %llu, \"pings_exempt\": %llu, "
            "\"oversize_exempt\": %llu}",
            dir, (unsigned long long)C.seed, (unsigned long long)IN.dropped,
            (unsigned long long)EG.dropped, (unsigned long long)(IN.duplicated + EG.duplicated),
            (unsigned long long)(IN.corrupted + EG.corrupted), (unsigned long long)IN.delayed,
            (unsigned long long)EG.delayed, (unsigned long long)IN.duplicated,
            (unsigned long long)EG.duplicated, (unsigned long long)IN.corrupted,
            (unsigned long long)EG.corrupted, (unsigned long long)IN.overflow,
            (unsigned long long)EG.overflow, IN.nheap, EG.nheap,
            (unsigned long long)(IN.errors + EG.errors),
            (unsigned long long)(IN.pings + EG.pings),
            (unsigned long long)(IN.oversize + EG.oversize));
}

void impair_free(void) {
    struct chan *cs[] = {&EG, &IN};
    for (int i = 0; i < 2; i++) {
        free(cs[i]->slots);
        free(cs[i]->heap);
        free(cs[i]->free_);
        cs[i]->slots = NULL;
        cs[i]->heap = cs[i]->free_ = NULL;
    }
}
