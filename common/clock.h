/* clock.h - the one clock of WoTbench's C programs (gateway-emulator, wot-device, hog).
 *
 * Every time a program records or compares is CLOCK_MONOTONIC in 64-bit nanoseconds: one clock
 * per host, shared by all processes and containers (Docker uses no time namespace), so stamps
 * from the GE, the devices and the hogs can be subtracted from each other.
 *
 * Kernel receive stamps (SO_TIMESTAMPNS) are CLOCK_REALTIME. clock_map_* converts them:
 * REALTIME - MONOTONIC is constant while nobody steps the wall clock (NTP slews both clocks at
 * the same rate), so the offset is measured by bracketing one REALTIME read between two
 * MONOTONIC reads; of several brackets the tightest wins (its midpoint is off by at most half
 * its width). clock_map_refresh() re-measures now and then, off the hot path, so a wall-clock
 * step is followed within one period. Header-only: each program includes it via -I../common. */
#ifndef WB_COMMON_CLOCK_H
#define WB_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

#define NS_PER_US 1000LL
#define NS_PER_MS 1000000LL
#define NS_PER_S 1000000000LL

static inline int64_t ts_to_ns(const struct timespec *ts) {
    return (int64_t)ts->tv_sec * NS_PER_S + ts->tv_nsec;
}

static inline struct timespec ns_to_timespec(int64_t ns) {
    struct timespec ts;
    ts.tv_sec = (time_t)(ns / NS_PER_S);
    ts.tv_nsec = (long)(ns % NS_PER_S);
    return ts;
}

static inline int64_t clock_read_ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return ts_to_ns(&ts);
}

/* CLOCK_MONOTONIC now, ns */
static inline int64_t mono_ns(void) { return clock_read_ns(CLOCK_MONOTONIC); }

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* ---- CLOCK_REALTIME -> CLOCK_MONOTONIC ---- */

#define CLOCK_MAP_TRIES 16                /* brackets per measurement */
#define CLOCK_MAP_REFRESH_NS NS_PER_S     /* default re-measurement period */

typedef struct {
    int64_t offset_ns;   /* REALTIME - MONOTONIC */
    int64_t bracket_ns;  /* width of the MONOTONIC bracket the offset came from (error <= half) */
    int64_t measured_at; /* MONOTONIC instant of that measurement; 0 = never measured */
} clock_map_t;

/* One measurement: the tightest of `tries` MONOTONIC-REALTIME-MONOTONIC brackets. */
static inline clock_map_t clock_map_measure(int tries) {
    clock_map_t best = {0, INT64_MAX, 0};
    for (int i = 0; i < (tries > 0 ? tries : 1); i++) {
        int64_t m1 = mono_ns();
        int64_t r = clock_read_ns(CLOCK_REALTIME);
        int64_t m2 = mono_ns();
        if (m2 - m1 < best.bracket_ns) {
            best.bracket_ns = m2 - m1;
            best.offset_ns = r - (m1 + (m2 - m1) / 2);
            best.measured_at = m2;
        }
    }
    return best;
}

/* Takes a fresh measurement into *m. The old offset is kept when the fresh one agrees with it
 * (the intervals [offset +- bracket/2] overlap) and the old bracket is tighter; a disagreeing
 * measurement means the wall clock was stepped, so the fresh one replaces it. */
static inline void clock_map_update(clock_map_t *m, clock_map_t fresh) {
    if (m->measured_at != 0) {
        int64_t diff = fresh.offset_ns - m->offset_ns;
        if (diff < 0)
            diff = -diff;
        int agree = diff <= (fresh.bracket_ns + m->bracket_ns) / 2 + 1;
        if (agree && m->bracket_ns <= fresh.bracket_ns) {
            m->measured_at = fresh.measured_at;
            return;
        }
    }
    *m = fresh;
}

static inline void clock_map_init(clock_map_t *m) {
    m->measured_at = 0;
    clock_map_update(m, clock_map_measure(CLOCK_MAP_TRIES));
}

/* Re-measures when the last measurement is older than every_ns (call off the hot path). */
static inline void clock_map_refresh(clock_map_t *m, int64_t now, int64_t every_ns) {
    if (now - m->measured_at >= every_ns)
        clock_map_update(m, clock_map_measure(CLOCK_MAP_TRIES));
}

/* A CLOCK_REALTIME instant (e.g. a kernel receive stamp) on CLOCK_MONOTONIC. */
static inline int64_t clock_map_to_mono(const clock_map_t *m, int64_t realtime_ns) {
    return realtime_ns - m->offset_ns;
}

#endif
