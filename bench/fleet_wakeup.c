/* The bare timer wake-up of a wot-fleet loop, without the engine (issue 29, docs/FLEET.md):
 * usage: fleet_wakeup CPU SECONDS [SPIN_US] -> quantiles of (return from epoll_wait - due), µs
 * build: cc -O2 -o /tmp/fleet_wakeup bench/fleet_wakeup.c; run under the host lock. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
static int64_t now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
static int cmp(const void *a, const void *b) { int64_t x = *(int64_t *)a, y = *(int64_t *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    if (argc < 3 || atof(argv[2]) <= 0 || atof(argv[2]) > 600) {
        fprintf(stderr, "usage: fleet_wakeup CPU SECONDS(0<s<=600) [SPIN_US]\n");
        return 2;
    }
    int cpu = atoi(argv[1]); double secs = atof(argv[2]); int64_t spin = argc > 3 ? atoll(argv[3]) * 1000 : 0;
    cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); sched_setaffinity(0, sizeof s, &s);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    int tfd = timerfd_create(CLOCK_MONOTONIC, 0), ep = epoll_create1(0);
    struct epoll_event e = {.events = EPOLLIN}; epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &e);
    size_t cap = (size_t)(secs * 4000) + 16, n = 0; int64_t *lat = malloc(cap * sizeof *lat);
    int64_t end = now() + (int64_t)(secs * 1e9); unsigned seed = 1;
    while (now() < end && n < cap) {
        int64_t due = now() + 100000 + rand_r(&seed) % 900000, arm = due - spin;
        struct itimerspec its = {0}; its.it_value.tv_sec = arm / 1000000000; its.it_value.tv_nsec = arm % 1000000000;
        timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
        struct epoll_event ev; epoll_wait(ep, &ev, 1, -1); uint64_t x; if (read(tfd, &x, 8)) {}
        int64_t t; while ((t = now()) < due) {}
        lat[n++] = t - due;
    }
    qsort(lat, n, sizeof *lat, cmp);
    printf("cpu %d spin %lld us: %zu wake-ups, lateness p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f us\n", cpu, (long long)spin / 1000, n,
           lat[n / 2] / 1e3, lat[n * 9 / 10] / 1e3, lat[n * 99 / 100] / 1e3, lat[n * 999 / 1000] / 1e3, lat[n - 1] / 1e3);
    return 0;
}
