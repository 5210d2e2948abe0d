/*
 * hog: a bounded resource hog for WoTbench contention-injection episodes.
 *
 *   hog --mode cpu|membw|cache --seconds S [--start-at MONO_NS] [--cpu LIST]
 *       [--threads N] [--bytes B] [--label NAME]
 *
 *   cpu    spin on integer arithmetic (one full core per thread)
 *   membw  stream read-modify-write over a buffer larger than the LLC (memory bandwidth)
 *   cache  random read-modify-write within a buffer of about the LLC size (cache thrashing)
 *
 * --seconds is required and bounded (0 < S <= 3600): a forgotten hog cannot outlive a test by
 * more than an hour. --start-at is an absolute CLOCK_MONOTONIC instant in ns (the same clock on
 * the host and in every container), so episodes line up with the test timeline; a start in the
 * past starts at once. Buffers are allocated and touched before the start instant.
 * --cpu takes one core or a comma list ("1" or "0,1"); thread i is pinned to core LIST[i % n].
 * Needs no privileges (sched_setaffinity on itself only), runs as any uid, FROM scratch.
 *
 * On exit (deadline, SIGTERM or SIGINT) prints one JSON line on stdout:
 *   {"label","mode","threads","cpus","bytes","seconds","started","ran_s","ops","terminated"}
 * Exit codes: 0 done or stopped by SIGTERM/SIGINT, 2 bad arguments, 1 environment failure.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "clock.h" /* common/clock.h: mono_ns() */

#define MAX_SECONDS 3600.0
#define MAX_THREADS 256
#define MAX_CPUS 1024
#define MIB (1024ull * 1024ull)

enum mode { MODE_CPU, MODE_MEMBW, MODE_CACHE };
static const char *mode_names[] = {"cpu", "membw", "cache"};

static atomic_int stop_flag;          /* set by main when the episode ends */
static volatile sig_atomic_t got_signal;

struct worker {
    pthread_t tid;
    int cpu;                          /* -1: not pinned */
    enum mode mode;
    uint64_t *buf;
    size_t words;                     /* buffer length in uint64 words */
    uint64_t ops;                     /* work units done (see per mode) */
    uint64_t sink;
};

static void on_signal(int sig) { (void)sig; got_signal = 1; }

static void usage_error(const char *what) {
    fprintf(stderr, "hog: %s\n"
            "usage: hog --mode cpu|membw|cache --seconds S (0<S<=%.0f) [--start-at MONO_NS]\n"
            "           [--cpu N[,N...]] [--threads N] [--bytes B] [--label NAME]\n",
            what, MAX_SECONDS);
    exit(2);
}

/* Sleep until the absolute CLOCK_MONOTONIC instant ns; a SIGTERM/SIGINT ends the wait early. */
static void sleep_until(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (!got_signal && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end;
    if (!s || !*s || *s == '-') return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int parse_cpus(const char *s, int *cpus, int *n) {
    char tmp[4096];
    if (strlen(s) >= sizeof tmp) return -1;
    strcpy(tmp, s);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        uint64_t v;
        if (parse_u64(tok, &v) || v >= MAX_CPUS || *n >= MAX_CPUS) return -1;
        cpus[(*n)++] = (int)v;
    }
    return *n > 0 ? 0 : -1;
}

static size_t llc_bytes(void) {
    long v = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    v = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (v <= 0) v = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return v > 0 ? (size_t)v : 8 * MIB;
}

static size_t pow2_floor(size_t x) {
    size_t p = 1;
    while (p <= x / 2) p *= 2;
    return p;
}

/* Default buffer size per thread: membw streams over max(64 MiB, 2 x LLC) capped at 512 MiB,
 * cache thrashes within the LLC size (rounded down to a power of two, 1 MiB..128 MiB). */
static size_t default_bytes(enum mode m) {
    size_t llc = llc_bytes();
    if (m == MODE_MEMBW) {
        size_t b = 2 * llc > 64 * MIB ? 2 * llc : 64 * MIB;
        return b > 512 * MIB ? 512 * MIB : b;
    }
    if (m == MODE_CACHE) {
        size_t b = pow2_floor(llc);
        if (b < MIB) b = MIB;
        return b > 128 * MIB ? 128 * MIB : b;
    }
    return 0;
}

static inline int stopping(void) { return atomic_load_explicit(&stop_flag, memory_order_relaxed); }

static void *work(void *arg) {
    struct worker *w = arg;
    if (w->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(w->cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) {
            fprintf(stderr, "hog: cannot pin a thread to cpu %d: %s\n", w->cpu, strerror(errno));
            exit(1);
        }
    }
    uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)w;
    switch (w->mode) {
    case MODE_CPU:            /* ops = blocks of 65536 xorshift steps */
        while (!stopping()) {
            for (int i = 0; i < 65536; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; }
            w->ops++;
        }
        break;
    case MODE_MEMBW: {        /* ops = MiB streamed (read + write) */
        size_t chunk = MIB / sizeof(uint64_t), pos = 0;
        while (!stopping()) {
            size_t end = pos + chunk > w->words ? w->words : pos + chunk;
            for (size_t i = pos; i < end; i++) w->buf[i] += i;
            pos = end == w->words ? 0 : end;
            w->ops++;
        }
        break;
    }
    case MODE_CACHE: {        /* ops = blocks of 65536 random accesses, one per cache line */
        size_t mask = w->words - 1;
        while (!stopping()) {
            for (int i = 0; i < 65536; i++) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                w->buf[(x >> 3) & mask & ~(size_t)7] += 1;
            }
            w->ops++;
        }
        break;
    }
    }
    w->sink = x;
    return NULL;
}

int main(int argc, char **argv) {
    int mode = -1, threads = 1, ncpus = 0;
    const char *cpu_arg = "";
    static int cpus[MAX_CPUS];
    double seconds = -1;
    uint64_t start_at = 0, bytes = 0;
    const char *label = "";

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("hog --mode cpu|membw|cache --seconds S [--start-at MONO_NS] [--cpu LIST] "
                   "[--threads N] [--bytes B] [--label NAME]\n");
            return 0;
        }
        if (!v) usage_error("missing value after an option (or unknown argument)");
        if (!strcmp(a, "--mode")) {
            mode = -1;
            for (int m = 0; m < 3; m++) if (!strcmp(v, mode_names[m])) mode = m;
            if (mode < 0) usage_error("--mode must be cpu, membw or cache");
        } else if (!strcmp(a, "--seconds")) {
            char *end;
            errno = 0;
            seconds = strtod(v, &end);
            if (errno || *end || !(seconds > 0) || seconds > MAX_SECONDS)
                usage_error("--seconds must be a number with 0 < S <= 3600");
        } else if (!strcmp(a, "--start-at")) {
            if (parse_u64(v, &start_at)) usage_error("--start-at must be CLOCK_MONOTONIC ns (integer >= 0)");
        } else if (!strcmp(a, "--cpu")) {
            cpu_arg = v;
            if (parse_cpus(v, cpus, &ncpus)) usage_error("--cpu must be a core id or a comma list of core ids");
        } else if (!strcmp(a, "--threads")) {
            uint64_t t;
            if (parse_u64(v, &t) || t < 1 || t > MAX_THREADS) usage_error("--threads must be 1..256");
            threads = (int)t;
        } else if (!strcmp(a, "--bytes")) {
            if (parse_u64(v, &bytes) || bytes < 4096 || bytes > 4096 * MIB)
                usage_error("--bytes must be 4096..4 GiB");
        } else if (!strcmp(a, "--label")) {
            label = v;
        } else {
            usage_error("unknown option");
        }
        i++;
    }
    if (mode < 0) usage_error("--mode is required");
    if (seconds < 0) usage_error("--seconds is required");
    uint64_t now = mono_ns();
    if (start_at > now + (uint64_t)(MAX_SECONDS * 1e9))
        usage_error("--start-at is more than an hour in the future (wrong clock?)");
    for (const char *p = label; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) usage_error("--label must not contain quotes, backslashes or control characters");

    /* SIGTERM/SIGINT go to the main thread only: workers start with them blocked. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;            /* no SA_RESTART: clock_nanosleep returns EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);

    if (ncpus > 0) {                      /* the main thread too, so it never competes elsewhere */
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int i = 0; i < ncpus; i++) CPU_SET(cpus[i], &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) {
            fprintf(stderr, "hog: cannot pin to cpu list %s: %s\n", cpu_arg, strerror(errno));
            return 1;
        }
    }

    size_t buf_bytes = mode == MODE_CPU ? 0 : (bytes ? (size_t)bytes : default_bytes(mode));
    if (mode == MODE_CACHE) buf_bytes = pow2_floor(buf_bytes);
    struct worker *ws = calloc((size_t)threads, sizeof *ws);
    if (!ws) { fprintf(stderr, "hog: out of memory\n"); return 1; }
    for (int i = 0; i < threads; i++) {
        ws[i].mode = mode;
        ws[i].cpu = ncpus ? cpus[i % ncpus] : -1;
        if (buf_bytes) {
            ws[i].words = buf_bytes / sizeof(uint64_t);
            ws[i].buf = malloc(ws[i].words * sizeof(uint64_t));
            if (!ws[i].buf) {
                fprintf(stderr, "hog: cannot allocate %zu bytes per thread\n", buf_bytes);
                return 1;
            }
            memset(ws[i].buf, 1, ws[i].words * sizeof(uint64_t));   /* fault pages in now */
        }
    }

    /* Wait for the start instant (interruptible). */
    int started = 0;
    uint64_t t0 = mono_ns();
    if (start_at > t0)
        sleep_until(start_at);
    if (!got_signal) {
        t0 = mono_ns();
        started = 1;
        pthread_sigmask(SIG_BLOCK, &block, &old);
        for (int i = 0; i < threads; i++) {
            int rc = pthread_create(&ws[i].tid, NULL, work, &ws[i]);
            if (rc) {
                fprintf(stderr, "hog: cannot start thread %d: %s\n", i, strerror(rc));
                atomic_store(&stop_flag, 1);
                for (int j = 0; j < i; j++) pthread_join(ws[j].tid, NULL);
                return 1;
            }
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        sleep_until(t0 + (uint64_t)(seconds * 1e9));
        atomic_store(&stop_flag, 1);
        for (int i = 0; i < threads; i++) pthread_join(ws[i].tid, NULL);
    }
    double ran = started ? (double)(mono_ns() - t0) / 1e9 : 0.0;
    uint64_t ops = 0;
    for (int i = 0; i < threads; i++) ops += ws[i].ops;

    printf("{\"label\":\"%s\",\"mode\":\"%s\",\"threads\":%d,\"cpus\":[", label, mode_names[mode], threads);
    for (int i = 0; i < ncpus; i++) printf("%s%d", i ? "," : "", cpus[i]);
    printf("],\"bytes\":%zu,\"seconds\":%.3f,\"started\":%s,\"ran_s\":%.3f,\"ops\":%" PRIu64
           ",\"terminated\":%s}\n", buf_bytes, seconds, started ? "true" : "false", ran, ops,
           got_signal ? "true" : "false");
    fflush(stdout);
    for (int i = 0; i < threads; i++) free(ws[i].buf);
    free(ws);
    return 0;
}
