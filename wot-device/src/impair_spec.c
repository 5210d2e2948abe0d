/* impair_spec.c - --impair SPEC, --impair-ge GE and --impair-seed N into imp_cfg
 * (keys and units as tc-netem's; messages "wot-device: OPT: what 'value', expected ..."). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "impair.h"
#include "impair_int.h"

struct cfg imp_cfg;

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
            imp_cfg.egress = 1;
        else if (!strcmp(v, "ingress"))
            imp_cfg.ingress = 1;
        else if (!strcmp(v, "both"))
            imp_cfg.egress = imp_cfg.ingress = 1;
        else
            return bad("--impair", "bad dir", v, "egress|ingress|both");
        return 0;
    case 1: return parse_time("delay", v, &imp_cfg.delay_ns);
    case 2: return parse_time("jitter", v, &imp_cfg.jitter_ns);
    case 3: return parse_pct("--impair", "delay-corr", v, &imp_cfg.delay_corr);
    case 4: {
        static const char *d[] = {"uniform", "normal", "pareto", "paretonormal"};
        for (int j = 0; j < 4; j++)
            if (!strcmp(v, d[j])) {
                imp_cfg.dist = j;
                return 0;
            }
        return bad("--impair", "bad dist", v, "uniform|normal|pareto|paretonormal");
    }
    case 5: return parse_pct("--impair", "loss", v, &imp_cfg.loss);
    case 6: return parse_pct("--impair", "loss-corr", v, &imp_cfg.loss_corr);
    case 7: return parse_rate(v, &imp_cfg.rate_bps);
    case 8: return parse_pct("--impair", "dup", v, &imp_cfg.dup);
    case 9: return parse_pct("--impair", "dup-corr", v, &imp_cfg.dup_corr);
    case 10: return parse_pct("--impair", "corrupt", v, &imp_cfg.corrupt);
    default: return parse_pct("--impair", "corrupt-corr", v, &imp_cfg.corrupt_corr);
    }
}

static int ge_seen[4];

static int ge_kv(const char *k, const char *v) {
    static const char *keys[] = {"p", "r", "1-h", "1-k"};
    double *dst[] = {&imp_cfg.ge_p, &imp_cfg.ge_r, &imp_cfg.ge_1h, &imp_cfg.ge_1k};
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
    memset(&imp_cfg, 0, sizeof imp_cfg);
    memset(seen, 0, sizeof seen);       /* wot-fleet parses one spec per devices-file line */
    memset(ge_seen, 0, sizeof ge_seen);
    imp_cfg.seed = 1;
    if (seed) {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(seed, &end, 10);
        if (!*seed || *end || errno || seed[0] == '-')
            return bad("--impair-seed", "bad seed", seed, "an unsigned 64-bit integer");
        imp_cfg.seed = s;
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
        imp_cfg.ge_r = 1.0;     /* tc-netem defaults: r 100%, 1-h 100%, 1-k 0% */
        imp_cfg.ge_1h = 1.0;
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
        imp_cfg.ge = 1;
    }
    imp_cfg.given = 1;
    return 0;
}

int impair_enabled(void) { return imp_cfg.given; }
