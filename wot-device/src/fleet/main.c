/* main.c - wot-fleet command line (docs/CONTRACTS.md §3b): many emulated CoAP devices in one
 * process, one epoll loop thread per --loops, busy-mode service on --workers threads. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conn.h"
#include "fleet.h"
#include "fleet_push.h"

#define DEFAULT_LOG_CAPACITY 1000000
/* Requested SO_RCVBUF per device socket (the kernel doubles it): room for ~50 small datagrams
 * per device. Only queued datagrams cost memory, so idle sockets cost nothing for it, but a
 * burst to many devices at once is bounded by this times the number of devices. */
#define DEFAULT_RCVBUF 32768
#define FDS_BESIDE_DEVICES 16  /* stdio, signalfd, per loop epoll/timerfd/eventfd, files */
#define DEFAULT_EVENT_ROWS (1L << 20)   /* rows of events-log-*.csv (32 B each, zero pages
                                           until used): the runner sizes it (--event-rows) */
#define DEFAULT_OBSERVERS 8    /* observer records per device with an observable resource */

static void usage(void) {
    fputs("usage: wot-fleet --devices FILE --log-dir DIR [--loops N] [--workers N] [--name NAME]\n"
          "                 [--log-capacity N] [--cpus LIST] [--rcvbuf BYTES] [--spin-us N]\n"
          "                 [--observers N] [--push FILE [--push-timeout-ms N]]\n"
          "                 [--connections FILE] [--conn-loops N] [--attach-rate N]\n"
          "                 [--id-marker TEXT] [--reply-id body|header|path] [--id-header NAME]\n"
          "                 [--reply-method POST|PUT] [--event-rows N]\n"
          "                 (--devices or --connections or both)\n", stderr);
}

static int parse_count(const char *opt, const char *s, long min, long max, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < min || v > max) {
        fprintf(stderr, "wot-fleet: bad %s '%s', expected an integer %ld..%ld\n", opt, s, min,
                max);
        return -1;
    }
    *out = v;
    return 0;
}

/* "0,1" -> cpus */
static int parse_cpus(const char *s, struct fleet *f) {
    f->cpus = calloc(strlen(s) / 2 + 1, sizeof *f->cpus);
    if (!f->cpus)
        return -1;
    char *copy = strdup(s), *save = NULL;
    if (!copy)
        return -1;
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        long c;
        if (parse_count("--cpus", t, 0, CPU_SETSIZE - 1, &c)) {
            rc = -1;
            break;
        }
        f->cpus[f->ncpus++] = (int)c;
    }
    free(copy);
    if (rc == 0 && f->ncpus == 0) {
        fprintf(stderr, "wot-fleet: bad --cpus '%s', expected a list like 0,1\n", s);
        rc = -1;
    }
    return rc;
}

/* Raises the soft RLIMIT_NOFILE to the hard limit; refuses when even that is too small. */
static int fd_limit(uint32_t ndev, int nloops, uint64_t conn_fds) {
    unsigned long long need = (unsigned long long)ndev + FDS_BESIDE_DEVICES + 3ULL * nloops +
                              conn_fds;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl))
        return -1;
    if (rl.rlim_cur < need && rl.rlim_cur < rl.rlim_max) {
        struct rlimit up = {rl.rlim_max, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl = up;
    }
    if (rl.rlim_cur < need) {
        fprintf(stderr, "wot-fleet: RLIMIT_NOFILE %llu < %llu file descriptors needed (%u device "
                "sockets + %llu): raise the limit, e.g. ulimit -n %llu (above the hard limit "
                "%llu: prlimit --nofile or docker run --ulimit nofile=%llu:%llu)\n",
                (unsigned long long)rl.rlim_cur, need, ndev, need - ndev, need,
                (unsigned long long)rl.rlim_max, need, need);
        return -1;
    }
    return 0;
}

/* an empty DIR/ready: every endpoint is bound and every loop runs */
static int mark_ready(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/ready", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "wot-fleet: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    close(fd);
    return 0;
}

static int wait_for_signal(int sfd) {
    struct signalfd_siginfo si;
    for (;;) {
        ssize_t n = read(sfd, &si, sizeof si);
        if (n == (ssize_t)sizeof si)
            return 0;
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "wot-fleet: signalfd: %s\n", strerror(errno));
            return -1;
        }
    }
}

/* Binds every endpoint, runs the loops until SIGTERM/SIGINT, writes the files. */
static int run(struct fleet *f, struct cn_set *cs) {
    if (fd_limit(f->ndev, f->nloops, cs ? cn_needed_fds(cs) : 0))
        return 1;
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGTERM);
    sigaddset(&ss, SIGINT);
    pthread_sigmask(SIG_BLOCK, &ss, NULL);  /* every thread inherits it; main reads signalfd */
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &ss, SFD_CLOEXEC);
    f->loops = calloc(f->nloops ? (size_t)f->nloops : 1, sizeof *f->loops);
    if (sfd < 0 || !f->loops) {
        fprintf(stderr, "wot-fleet: cannot create the signalfd or the loops\n");
        return 1;
    }
    for (int i = 0; i < f->nloops; i++)
        f->loops[i].ep = f->loops[i].tfd = f->loops[i].wfd = -1;
    int rc = 0, started = 0;
    for (int i = 0; i < f->nloops && rc == 0; i++) {
        /* device k goes to loop floor(k * loops / count): loop i holds the contiguous block
         * k = ceil(count * i / loops) .. ceil(count * (i + 1) / loops) - 1 */
        uint64_t n = f->ndev, L = (uint64_t)f->nloops;
        uint32_t first = (uint32_t)((n * (uint64_t)i + L - 1) / L);
        uint32_t end = (uint32_t)((n * (uint64_t)(i + 1) + L - 1) / L);
        if (fl_loop_init(f, &f->loops[i], i, first, end - first) ||
            fl_push_attach(f, &f->loops[i]))
            rc = 1;
    }
    if (rc == 0 && f->ndev && fl_workers_start(f))
        rc = 1;
    for (int i = 0; i < f->nloops && rc == 0; i++) {
        int e = pthread_create(&f->loops[i].thread, NULL, fl_loop_run, &f->loops[i]);
        if (e) {
            fprintf(stderr, "wot-fleet: cannot start loop %d: %s\n", i, strerror(e));
            rc = 1;
        } else {
            started++;
        }
    }
    if (rc == 0 && cs && cn_start(cs))      /* connected devices: their own loops (conn.h) */
        rc = 1;
    /* with --push the main thread runs the devices' control files and their teardown */
    if (rc == 0 && (mark_ready(f->log_dir) ||
                    (f->push ? fl_push_supervise(f, sfd) : wait_for_signal(sfd))))
        rc = 1;
    if (cs)
        cn_stop(cs);
    for (int i = 0; i < started; i++) {
        f->loops[i].stop = 1;
        fl_loop_wake(&f->loops[i]);
    }
    for (int i = 0; i < started; i++)
        pthread_join(f->loops[i].thread, NULL);
    if (f->ndev)
        fl_workers_stop(f);
    if (rc == 0 && f->ndev && fl_write_outputs(f))
        rc = 1;
    fl_push_free(f);
    if (rc == 0 && cs && cn_write_outputs(cs))
        rc = 1;
    if (cs)
        cn_release(cs);
    for (int i = 0; i < f->nloops; i++)
        fl_loop_free(&f->loops[i]);
    free(f->loops);
    close(sfd);
    return rc;
}

int main(int argc, char **argv) {
    struct fleet f = {.name = "", .log_capacity = DEFAULT_LOG_CAPACITY, .rcvbuf = DEFAULT_RCVBUF};
    long loops = 1, workers = -1, log_cap = DEFAULT_LOG_CAPACITY, rcvbuf = DEFAULT_RCVBUF;
    long spin_us = 0, observers = DEFAULT_OBSERVERS, push_timeout_ms = 10000;
    long conn_loops = 1, attach_rate = 2000, event_rows = DEFAULT_EVENT_ROWS;
    const char *devices = NULL, *log_dir = NULL, *cpus = NULL, *push = NULL, *conns = NULL;
    const char *id_marker = "\"id\":\"", *id_header = "X-Rpc-Id", *post_method = "POST";
    int reply_id = CR_BODY;
    static const struct option opts[] = {
        {"devices", required_argument, 0, 'D'}, {"log-dir", required_argument, 0, 'd'},
        {"loops", required_argument, 0, 'L'},   {"workers", required_argument, 0, 'W'},
        {"name", required_argument, 0, 'n'},    {"log-capacity", required_argument, 0, 'c'},
        {"cpus", required_argument, 0, 'C'},    {"rcvbuf", required_argument, 0, 'R'},
        {"spin-us", required_argument, 0, 'S'}, {"observers", required_argument, 0, 'O'},
        {"push", required_argument, 0, 'P'},    {"push-timeout-ms", required_argument, 0, 'T'},
        {"connections", required_argument, 0, 'N'}, {"conn-loops", required_argument, 0, 'K'},
        {"attach-rate", required_argument, 0, 'A'}, {"id-marker", required_argument, 0, 'I'},
        {"reply-id", required_argument, 0, 'Y'}, {"id-header", required_argument, 0, 'H'},
        {"reply-method", required_argument, 0, 'M'}, {"event-rows", required_argument, 0, 'E'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int bad = 0;
        switch (o) {
        case 'D': devices = optarg; break;
        case 'd': log_dir = optarg; break;
        case 'n': f.name = optarg; break;
        case 'C': cpus = optarg; break;
        case 'L': bad = parse_count("--loops", optarg, 1, 256, &loops); break;
        case 'W': bad = parse_count("--workers", optarg, 1, 1024, &workers); break;
        case 'c': bad = parse_count("--log-capacity", optarg, 0, 1L << 30, &log_cap); break;
        case 'R': bad = parse_count("--rcvbuf", optarg, 0, 1L << 26, &rcvbuf); break;
        case 'S': bad = parse_count("--spin-us", optarg, 0, 1000, &spin_us); break;
        case 'O': bad = parse_count("--observers", optarg, 1, 100000, &observers); break;
        case 'P': push = optarg; break;
        case 'T': bad = parse_count("--push-timeout-ms", optarg, 1, 3600000, &push_timeout_ms); break;
        case 'N': conns = optarg; break;
        case 'K': bad = parse_count("--conn-loops", optarg, 1, 256, &conn_loops); break;
        case 'A': bad = parse_count("--attach-rate", optarg, 1, 1000000, &attach_rate); break;
        case 'E': bad = parse_count("--event-rows", optarg, 0, 1L << 26, &event_rows); break;
        case 'I':
            id_marker = optarg;
            bad = !*optarg || strlen(optarg) >= sizeof ((struct cn_set *)0)->id_marker;
            if (bad)
                fputs("wot-fleet: bad --id-marker, expected 1..31 characters\n", stderr);
            break;
        case 'Y':
            reply_id = !strcmp(optarg, "body") ? CR_BODY : !strcmp(optarg, "header") ? CR_HEADER
                     : !strcmp(optarg, "path") ? CR_PATH : -1;
            bad = reply_id < 0;
            if (bad)
                fprintf(stderr, "wot-fleet: bad --reply-id '%s', expected body, header or path\n",
                        optarg);
            break;
        case 'H':
            id_header = optarg;
            bad = !*optarg || strlen(optarg) >= sizeof ((struct cn_set *)0)->id_header ||
                  strspn(optarg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                 "!#$%&'*+-.^_`|~") != strlen(optarg);
            if (bad)
                fputs("wot-fleet: bad --id-header, expected an HTTP header name (a token of 1..63 "
                      "characters)\n", stderr);
            break;
        case 'M':
            post_method = optarg;
            bad = strcmp(optarg, "POST") && strcmp(optarg, "PUT");
            if (bad)
                fprintf(stderr, "wot-fleet: bad --reply-method '%s', expected POST or PUT\n",
                        optarg);
            break;
        case 'h': usage(); return 0;
        default: bad = 1; break;
        }
        if (bad) {
            usage();
            return 2;
        }
    }
    if (optind != argc || (!devices && !conns) || !log_dir) {
        fputs("wot-fleet: --log-dir and --devices or --connections are required, no positional "
              "arguments\n", stderr);
        usage();
        return 2;
    }
    if (workers < 0)
        workers = loops;
    if (workers < loops) {
        fprintf(stderr, "wot-fleet: bad --workers %ld, expected at least --loops (%ld): each "
                "loop's busy-mode jobs need a worker\n", workers, loops);
        return 2;
    }
    if (cpus && parse_cpus(cpus, &f)) {
        free(f.cpus);
        return 2;
    }
    struct stat st;
    if (stat(log_dir, &st) || !S_ISDIR(st.st_mode) || access(log_dir, W_OK)) {
        fprintf(stderr, "wot-fleet: --log-dir '%s' is not a writable directory\n", log_dir);
        free(f.cpus);
        return 2;
    }
    f.devices_file = devices;
    f.log_dir = log_dir;
    f.nloops = devices ? (int)loops : 0;    /* no CoAP loops for connected devices only */
    f.nworkers = (int)workers;
    f.log_capacity = (size_t)log_cap;
    f.rcvbuf = (int)rcvbuf;
    f.spin_ns = (uint64_t)spin_us * 1000ULL;
    f.observers = (uint32_t)observers;
    struct cn_set cs = {.file = conns, .log_dir = log_dir, .name = f.name,
                        .nloops = (int)conn_loops, .attach_rate = (uint32_t)attach_rate,
                        .log_capacity = (size_t)log_cap, .cpus = f.cpus, .ncpus = f.ncpus,
                        .event_rows = (uint64_t)event_rows};
    snprintf(cs.id_marker, sizeof cs.id_marker, "%s", id_marker);
    snprintf(cs.id_header, sizeof cs.id_header, "%s", id_header);
    cs.reply_id = (uint8_t)reply_id;
    cs.post_method = post_method;
    int bad = (devices && fl_devices_load(devices, &f)) || (conns && cn_load(conns, &cs));
    if (!bad && push && !devices) {
        fputs("wot-fleet: --push needs --devices (the pushing devices' endpoints)\n", stderr);
        bad = 1;
    }
    if (!bad && push && fl_push_load(&f, push, (uint64_t)push_timeout_ms * 1000000ULL))
        bad = 1;
    if (!bad && conns && (uint32_t)conn_loops > cs.ndev) {
        fprintf(stderr, "wot-fleet: bad --conn-loops %ld, expected at most the %u devices of %s\n",
                conn_loops, cs.ndev, conns);
        bad = 1;
    }
    if (bad) {
        fl_push_free(&f);
        fl_devices_free(&f);
        cn_free(&cs);
        free(f.cpus);
        return 2;
    }
    if (devices && (uint32_t)loops > f.ndev) {
        fprintf(stderr, "wot-fleet: bad --loops %ld, expected at most the %u devices of %s\n",
                loops, f.ndev, devices);
        fl_push_free(&f);
        fl_devices_free(&f);
        free(f.cpus);
        return 2;
    }
    int rc = run(&f, conns ? &cs : NULL);
    fl_devices_free(&f);
    cn_free(&cs);
    free(f.cpus);
    return rc;
}
