/* service.c - service-time emulation.
 *
 * sleep: the service ends at start + S on CLOCK_MONOTONIC regardless of load. The thread
 *        sleeps with clock_nanosleep(TIMER_ABSTIME) to start + S - SERVICE_SPIN_NS (1 ns
 *        timer slack) and spins on clock_gettime for the rest, which removes the wake-up
 *        latency of the timer (tens of µs) at the cost of <= 200 µs of CPU per request.
 * busy:  burns exactly S of the thread's own CPU time (CLOCK_THREAD_CPUTIME_ID), so the
 *        wall-clock duration stretches when the core is shared. */
#include "service.h"

#include <errno.h>
#include <sys/prctl.h>
#include <time.h>

void service_thread_init(void) { prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); }

static void emulate_sleep(uint64_t ns, uint64_t start) {
    uint64_t target = start + ns;
    if (ns > SERVICE_SPIN_NS) {
        uint64_t wake = target - SERVICE_SPIN_NS;
        struct timespec t = {.tv_sec = (time_t)(wake / 1000000000ULL),
                             .tv_nsec = (long)(wake % 1000000000ULL)};
        int r;
        do /* EINTR: retry; the deadline is absolute */
            r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
        while (r == EINTR);
    }
    while ((uint64_t)mono_ns() < target) {
        /* spin the last SERVICE_SPIN_NS */
    }
}

static void emulate_busy(uint64_t ns) {
    int64_t cpu0 = clock_read_ns(CLOCK_THREAD_CPUTIME_ID);
    volatile uint64_t sink = 0;
    while ((uint64_t)(clock_read_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0) < ns) {
        for (int i = 0; i < 16; i++)
            sink += (uint64_t)i;
    }
}

void service_run(enum svc_mode mode, uint64_t ns, uint64_t start) {
    if (ns == 0)
        return;
    if (mode == MODE_SLEEP)
        emulate_sleep(ns, start);
    else
        emulate_busy(ns);
}
