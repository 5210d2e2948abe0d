/* impair_netem.c - tc-netem's decision for one datagram of one direction (see impair_chan.c),
 * with the configuration and the random state passed in: wot-device has one channel per
 * direction (impair_chan.c), wot-fleet one per direction of each impaired device
 * (fleet/impair.c). No allocation; the held datagram is handed to the caller's `hold`.
 *
 * Per datagram, in netem's order (net/sched/sch_netem.c, netem_enqueue):
 *   duplicate? (count++), lost? (count--; random loss with correlation or Gilbert-Elliott),
 *   count == 0 -> dropped; corrupt? (one random bit of the datagram flipped);
 *   release time = now + delay sample; with rate: max(that, previous release) + wire time;
 *   a duplicate goes through the same steps again (without duplication). */
#include <math.h>
#include <string.h>

#include "impair_int.h"

void netem_seed(struct netem *n, const struct cfg *cfg, unsigned dir) {
    memset(n, 0, sizeof *n);
    uint64_t sm = cfg->seed ^ (0x5157a1dull * (dir + 1));
    for (int k = 0; k < K_N; k++) {
        uint64_t x = splitmix64(&sm) ^ ((uint64_t)(dir * K_N + k) << 56);
        for (int i = 0; i < 4; i++)
            n->r[k].s[i] = splitmix64(&x);
    }
    n->c_delay = (struct crnd){cfg->delay_corr, u01(&n->r[K_DELAY])};
    n->c_loss = (struct crnd){cfg->loss_corr, u01(&n->r[K_LOSS])};
    n->c_dup = (struct crnd){cfg->dup_corr, u01(&n->r[K_DUP])};
    n->c_corrupt = (struct crnd){cfg->corrupt_corr, u01(&n->r[K_CORRUPT])};
}

static int64_t sample_delay(struct netem *n, const struct cfg *cfg) {
    if (cfg->jitter_ns == 0)
        return cfg->delay_ns;
    double t = dist_q(cfg->dist, crandom(&n->c_delay, &n->r[K_DELAY]));
    double d = (double)cfg->delay_ns + (double)cfg->jitter_ns * t;
    return d < 0 ? 0 : (int64_t)llround(d);
}

static int is_lost(struct netem *n, const struct cfg *cfg) {
    if (cfg->ge) {          /* netem loss_gilb_ell(): transition first, then the state's loss */
        struct rng *r = &n->r[K_LOSS];
        if (!n->ge_bad) {
            if (u01(r) < cfg->ge_p)
                n->ge_bad = 1;
            return u01(r) < cfg->ge_1k;
        }
        if (u01(r) < cfg->ge_r)
            n->ge_bad = 0;
        return u01(r) < cfg->ge_1h;
    }
    return cfg->loss > 0 && crandom(&n->c_loss, &n->r[K_LOSS]) < cfg->loss;
}

/* Wire size netem's rate sees (qdisc_pkt_len: Ethernet 14 + IPv4 20 / IPv6 40 + UDP 8). */
static uint64_t wire_ns(const struct cfg *cfg, size_t len, int v6) {
    double bytes = (double)len + (v6 ? 62 : 42);
    return (uint64_t)llround(bytes * 8e9 / cfg->rate_bps);
}

static uint64_t release_time(struct netem *n, const struct cfg *cfg, size_t len, int v6,
                             uint64_t now) {
    uint64_t t = now + (uint64_t)sample_delay(n, cfg);
    if (cfg->rate_bps > 0) {
        if (n->last_release > t)
            t = n->last_release;
        t += wire_ns(cfg, len, v6);
        n->last_release = t;
    }
    return t;
}

int netem_admit(struct netem *n, const struct cfg *cfg, uint8_t *buf, size_t len, int v6,
                int allow_dup, uint64_t now, netem_hold_fn hold, void *ctx) {
    uint8_t orig[PKT_MAX];
    int count = 1;
    if (allow_dup && cfg->dup > 0 && crandom(&n->c_dup, &n->r[K_DUP]) < cfg->dup)
        count++;
    if (is_lost(n, cfg))
        count--;
    if (count == 0) {
        n->dropped++;
        return 0;
    }
    if (count > 1) {
        memcpy(orig, buf, len);   /* the duplicate is cloned before corruption, as in netem */
        n->duplicated++;
    }
    if (cfg->corrupt > 0 && crandom(&n->c_corrupt, &n->r[K_CORRUPT]) < cfg->corrupt && len > 0) {
        uint64_t x = xoshiro(&n->r[K_BIT]);
        buf[(x >> 3) % len] ^= (uint8_t)(1u << (x & 7));
        n->corrupted++;
    }
    uint64_t due = release_time(n, cfg, len, v6, now);
    int now_ok = due <= now;
    if (!now_ok)
        hold(ctx, buf, len, due);
    if (count > 1) {            /* the duplicate: own loss/corruption/delay, never at once */
        if (netem_admit(n, cfg, orig, len, v6, 0, now, hold, ctx))
            hold(ctx, orig, len, now);
    }
    return now_ok;
}
