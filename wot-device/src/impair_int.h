/* impair_int.h - what the impairment files share (see impair.h for the public interface).
 *   impair_spec.c  --impair / --impair-ge / --impair-seed parsing into imp_cfg
 *   impair_rand.c  random streams (xoshiro256** seeded by splitmix64), correlation, quantiles
 *   impair_netem.c netem's model for one datagram (dup, loss, corrupt, delay, rate), with the
 *                  configuration and random state passed in (also used by wot-fleet)
 *   impair_chan.c  the per-direction channel: the held-datagram heap, counters,
 *                  device-summary.json
 *   impair_wrap.c  the sendmsg/recvmsg/epoll_ctl wrappers, egress flush and ingress replay
 * Single-threaded: only the I/O thread touches this state after impair_parse(). */
#ifndef WOT_IMPAIR_INT_H
#define WOT_IMPAIR_INT_H
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

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
    int32_t fd;               /* the socket it came from / leaves by (endpoint or push client) */
    uint16_t len, namelen, ctllen;
    uint8_t name[NAME_MAX_], ctl[CTL_MAX], data[PKT_MAX];
};

/* the random state of one direction's netem model and what it decided */
struct netem {
    struct rng r[K_N];
    struct crnd c_delay, c_loss, c_dup, c_corrupt;
    int ge_bad;
    uint64_t last_release;
    uint64_t dropped, duplicated, corrupted;
};

struct chan {
    int on;
    struct netem n;
    uint64_t seq;
    struct pkt *slots;
    uint32_t *heap, nheap, *free_, nfree;
    uint64_t delayed, overflow, errors, oversize, pings;
};

struct meta {
    int fd;
    const void *name;
    socklen_t namelen;
    const void *ctl;
    size_t ctllen;
};

extern struct cfg imp_cfg;
extern struct chan imp_eg, imp_in;   /* egress, ingress */
extern int imp_ep_fd;                /* the impaired endpoint socket, -1 = none */

/* impair_rand.c */
uint64_t splitmix64(uint64_t *x);
uint64_t xoshiro(struct rng *r);
double u01(struct rng *r);
double crandom(struct crnd *c, struct rng *r);
double dist_q(int dist, double u);

/* impair_netem.c */
/* seeds the direction's streams from cfg->seed (dir 0 egress, 1 ingress) */
void netem_seed(struct netem *n, const struct cfg *cfg, unsigned dir);
/* a datagram that waits until `due` (CLOCK_MONOTONIC ns): copy it, it is the caller's buffer */
typedef void (*netem_hold_fn)(void *ctx, const uint8_t *buf, size_t len, uint64_t due);
/* Applies the impairments to one datagram of len <= PKT_MAX (buf is modified by corruption).
 * Returns 1 when it must go at once, 0 when it was dropped or handed to hold(). */
int netem_admit(struct netem *n, const struct cfg *cfg, uint8_t *buf, size_t len, int v6,
                int allow_dup, uint64_t now, netem_hold_fn hold, void *ctx);

/* impair_chan.c */
/* Applies the impairments to one datagram (buf is modified by corruption). Returns 1 when
 * it must go at once, 0 when it was dropped or is held. */
int admit(struct chan *c, uint8_t *buf, size_t len, const struct meta *m, int v6, int allow_dup,
          uint64_t now);
uint32_t chan_heap_pop(struct chan *c);

#endif
