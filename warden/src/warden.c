/* wb-warden - a component's keeper: runs PROGRAM as its child and stops it when its run is over.
 *
 *   wb-warden --lease FILE [--stale-s S] [--grace-s G] -- PROGRAM [ARGS...]
 *
 * A harness killed with SIGKILL cannot stop what it started; its components would burn CPU and
 * answer nobody until someone runs `wotbench clean`. The harness keeps a lease file in the run
 * directory (which every component already mounts): it touches it every second and writes the
 * run's deadline into it. Once a second the warden checks, without any network call:
 *   - the file is gone (the run ended or its directory was removed),
 *   - its mtime is older than --stale-s (the harness is gone or frozen),
 *   - CLOCK_MONOTONIC is past the deadline written in it (the run overran its bounded end);
 * then it sends PROGRAM SIGTERM, and SIGKILL after --grace-s. It forwards the signals a
 * harness sends (TERM, INT, HUP, QUIT, USR1, USR2), reaps every child (it is PID 1 in a
 * container) and exits with PROGRAM's status (128 + signal when a signal ended it).
 *
 * Lease file: lines "deadline_mono_ns N" (0 = none) and anything else (ignored).
 * Exit codes of its own: 125 bad usage, 126 cannot start PROGRAM.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const int FORWARDED[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define NFORWARDED (sizeof FORWARDED / sizeof FORWARDED[0])

static int64_t now_ns(clockid_t clk) {
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int usage(const char *why) {
    fprintf(stderr, "wb-warden: %s\nusage: wb-warden --lease FILE [--stale-s S] [--grace-s G] "
                    "-- PROGRAM [ARGS...]\n", why);
    return 125;
}

/* Why the run is over for this component, or NULL while the lease holds. */
static const char *lease_broken(const char *path, int64_t stale_ns, char *why, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, cap, "lease %s is gone (%s): the run is over", path, strerror(errno));
        return why;
    }
    struct stat st;
    char buf[512];
    ssize_t n = fstat(fd, &st) == 0 ? read(fd, buf, sizeof buf - 1) : -1;
    close(fd);
    if (n < 0) {
        snprintf(why, cap, "cannot read lease %s: %s", path, strerror(errno));
        return why;
    }
    buf[n] = '\0';
    int64_t touched = (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    int64_t age = now_ns(CLOCK_REALTIME) - touched;
    if (age > stale_ns) {
        snprintf(why, cap, "lease %s not renewed for %.0f s: the harness is gone", path,
                 (double)age / 1e9);
        return why;
    }
    const char *d = strstr(buf, "deadline_mono_ns ");
    long long deadline = d ? strtoll(d + 17, NULL, 10) : 0;
    if (deadline > 0 && now_ns(CLOCK_MONOTONIC) > deadline) {
        snprintf(why, cap, "past the run's deadline (lease %s)", path);
        return why;
    }
    return NULL;
}

static int parse_seconds(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || v <= 0 || v > 86400)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv) {
    const char *lease = NULL;
    double stale_s = 20, grace_s = 5;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        if (i + 1 >= argc)
            return usage("an option without its value");
        if (!strcmp(argv[i], "--lease"))
            lease = argv[++i];
        else if (!strcmp(argv[i], "--stale-s") && parse_seconds(argv[i + 1], &stale_s) == 0)
            i++;
        else if (!strcmp(argv[i], "--grace-s") && parse_seconds(argv[i + 1], &grace_s) == 0)
            i++;
        else
            return usage("unknown option or a value that is not seconds in (0, 86400]");
    }
    if (!lease || i + 1 >= argc)
        return usage("expected --lease FILE and -- PROGRAM");
    char **program = argv + i + 1;

    sigset_t ours, old;
    sigemptyset(&ours);
    for (size_t k = 0; k < NFORWARDED; k++)
        sigaddset(&ours, FORWARDED[k]);
    sigaddset(&ours, SIGCHLD);
    sigprocmask(SIG_BLOCK, &ours, &old); /* before fork: no signal is lost in between */

    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "wb-warden: cannot fork: %s\n", strerror(errno));
        return 126;
    }
    if (child == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        execvp(program[0], program);
        fprintf(stderr, "wb-warden: cannot start %s: %s\n", program[0], strerror(errno));
        _exit(126);
    }

    int64_t stale_ns = (int64_t)(stale_s * 1e9), kill_at = 0;
    const struct timespec tick = {1, 0};
    char why[640];
    for (;;) {
        siginfo_t si;
        int sig = sigtimedwait(&ours, &si, &tick);
        if (sig == SIGCHLD || sig < 0) {
            int status;
            pid_t p;
            while ((p = waitpid(-1, &status, WNOHANG)) > 0) /* PID 1 reaps every orphan */
                if (p == child)
                    return WIFEXITED(status) ? WEXITSTATUS(status)
                                             : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        } else if (sig > 0) {
            kill(child, sig);
        }
        if (kill_at == 0 && lease_broken(lease, stale_ns, why, sizeof why)) {
            fprintf(stderr, "wb-warden: %s; stopping %s\n", why, program[0]);
            kill(child, SIGTERM);
            kill_at = now_ns(CLOCK_MONOTONIC) + (int64_t)(grace_s * 1e9);
        } else if (kill_at && now_ns(CLOCK_MONOTONIC) > kill_at) {
            fprintf(stderr, "wb-warden: %s did not stop within %.0f s of SIGTERM; killing it\n",
                    program[0], grace_s);
            kill(child, SIGKILL);
            kill_at = INT64_MAX; /* once */
        }
    }
}
