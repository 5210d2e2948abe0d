/* push_ctl.c - the main thread's part of the engine's push (fleet_push.h): while the loops
 * run it watches the engine's directory for the harness's control files (push-go: begin the
 * setup; push-start: the test start), writes push-setup.csv once every loop has finished its
 * devices' setup, and on SIGTERM/SIGINT lets the loops run their devices' teardown before
 * main() stops them. It polls: 50 wake-ups a second of a thread that is not a loop cost
 * nothing the devices see, and the harness writes push-start well before the start. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "push_int.h"

#define POLL_MS 20
#define STOP_WAIT_NS 12000000000ULL   /* the loops' teardown budget (10 s) and a margin */
#define GO_FILE "push-go"
#define START_FILE "push-start"

static int all_loops(const struct fleet *f, size_t offset) {
    for (int i = 0; i < f->nloops; i++) {
        const int *flag = (const int *)((const char *)f->loops[i].push + offset);
        if (!__atomic_load_n(flag, __ATOMIC_ACQUIRE))
            return 0;
    }
    return 1;
}

static void wake_all(struct fleet *f) {
    for (int i = 0; i < f->nloops; i++)
        fl_loop_wake(&f->loops[i]);
}

/* DIR/push-start: one CLOCK_MONOTONIC ns value, written whole by the harness; 0 = not yet */
static uint64_t read_start(const char *dir) {
    char path[4200], text[64];
    snprintf(path, sizeof path, "%s/" START_FILE, dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t k = read(fd, text, sizeof text - 1);
    close(fd);
    if (k <= 0)
        return 0;
    text[k] = '\0';
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || (*end && *end != '\n')) {
        fprintf(stderr, "wot-fleet: %s: expected one CLOCK_MONOTONIC ns value\n", path);
        return 0;
    }
    return v;
}

static int go_given(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/" GO_FILE, dir);
    return access(path, F_OK) == 0;
}

/* 1 when a signal was read, 0 on a timeout, -1 on an error */
static int wait_signal(int sfd) {
    struct pollfd p = {.fd = sfd, .events = POLLIN};
    int r = poll(&p, 1, POLL_MS);
    if (r < 0)
        return errno == EINTR ? 0 : -1;
    if (r == 0)
        return 0;
    struct signalfd_siginfo si;
    ssize_t n = read(sfd, &si, sizeof si);
    return n == (ssize_t)sizeof si ? 1 : 0;
}

int fl_push_supervise(struct fleet *f, int sfd) {
    struct fl_push *P = f->push;
    int signals = 0, setup_written = 0;
    uint64_t stop_by = 0;
    for (;;) {
        int s = wait_signal(sfd);
        if (s < 0) {
            fprintf(stderr, "wot-fleet: signalfd: %s\n", strerror(errno));
            return -1;
        }
        if (s > 0 && ++signals == 1) {     /* the stop: the loops run the teardown */
            __atomic_store_n(&P->stop, 1, __ATOMIC_RELEASE);
            stop_by = (uint64_t)mono_ns() + STOP_WAIT_NS;
            wake_all(f);
        } else if (s > 0) {
            return 0;                      /* a second signal: stop at once */
        }
        if (!signals && !P->go && go_given(f->log_dir)) {
            P->setup_begin_ns = (uint64_t)mono_ns();
            __atomic_store_n(&P->go, 1, __ATOMIC_RELEASE);
            wake_all(f);
        }
        if (P->go && !P->start_ns) {
            uint64_t start = read_start(f->log_dir);
            if (start) {
                __atomic_store_n(&P->start_ns, start, __ATOMIC_RELEASE);
                wake_all(f);
            }
        }
        if (P->go && !setup_written &&
            all_loops(f, offsetof(struct fl_push_loop, setup_done))) {
            setup_written = 1;
            if (flp_write_setup(f))
                return -1;
        }
        if (signals && all_loops(f, offsetof(struct fl_push_loop, done)))
            return 0;
        if (signals && (uint64_t)mono_ns() > stop_by) {
            fprintf(stderr, "wot-fleet: the devices' teardown requests did not end within "
                    "%llu s of the stop; the open ones are written as they are\n",
                    (unsigned long long)(STOP_WAIT_NS / 1000000000ULL));
            return 0;
        }
    }
}
