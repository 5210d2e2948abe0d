/* impair_rand.c - the random streams of the impairments: xoshiro256** seeded with
 * splitmix64, netem's correlated draw (get_crandom) and the jitter quantile functions.
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
 * Negative delays are 0 (impair_chan.c). */
#include <math.h>

#include "impair_int.h"

uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t xoshiro(struct rng *r) {   /* xoshiro256** */
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

double u01(struct rng *r) { return (double)(xoshiro(r) >> 11) * 0x1.0p-53; }

double crandom(struct crnd *c, struct rng *r) {
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

double dist_q(int dist, double u) {
    switch (dist) {
    case DIST_NORMAL: return clip4(norm_inv(u));
    case DIST_PARETO: return pareto_q(u);
    case DIST_PARETONORMAL: return (clip4(norm_inv(u)) + 3 * pareto_q(u)) / 4;
    default: return 2 * u - 1;
    }
}
