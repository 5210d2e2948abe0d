/* pod.c - several emulated devices in one container: `wot-device --pod -- ARGS -- ARGS ...`.
 *
 * Starting a container costs the container runtime ~0.27 CPU-s on a small host, so a thousand
 * one-device containers take minutes to start. A pod runs one wot-device process per ARGS
 * segment (each its own --listen port, resources, log dir and threads) in one network
 * namespace, and acts as their init: it forwards SIGTERM/SIGINT and reaps them. A device killed
 * by a signal (a crash, an OOM kill) is reported on stderr and the others go on serving: one
 * emulated device's crash must not take its pod-mates' requests with it (the runner sees the
 * dead device's process gone and names it; the pod's exit code at the end is the first
 * failure's). A device that exits with an error (bad arguments) stops the pod. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pod.h"

#define POD_MAX 256

struct member {
    pid_t pid;
    const char *name; /* its --name, for messages */
    int code;         /* exit code once reaped, -1 before */
};

static const char *member_name(int argc, char **argv) {
    for (int i = 0; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--name"))
            return argv[i + 1];
    return "?";
}

static void signal_all(struct member *m, int n, int sig) {
    for (int i = 0; i < n; i++)
        if (m[i].code < 0 && m[i].pid > 0)
            kill(m[i].pid, sig);
}

/* Reap every child that has ended; returns how many are still running. *refused: a device
 * exited on its own with an error code (bad arguments, no socket: its pod-mates share the
 * cause, so the pod stops); a device killed by a signal (a crash, an OOM kill) is its fault
 * alone. */
static int reap(struct member *m, int n, int stopping, int *first_failure, int *refused) {
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int i = 0; i < n; i++) {
            if (m[i].pid != pid)
                continue;
            m[i].code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            if (!stopping || m[i].code != 0)
                fprintf(stderr, "wot-device pod: device %s exited with code %d%s\n", m[i].name,
                        m[i].code, stopping ? "" : " before the pod was told to stop");
            if ((m[i].code != 0 || !stopping) && *first_failure == 0)
                *first_failure = m[i].code ? m[i].code : 1;
            if (!stopping && WIFEXITED(status) && m[i].code != 0)
                *refused = 1;
        }
    }
    int alive = 0;
    for (int i = 0; i < n; i++)
        alive += m[i].code < 0;
    return alive;
}

int pod_main(int argc, char **argv, device_main_fn device_main) {
    /* argv: wot-device --pod -- ARGS... [-- ARGS...] */
    if (argc < 4 || strcmp(argv[2], "--")) {
        fputs("wot-device --pod: expected '--pod -- DEVICE ARGS [-- DEVICE ARGS ...]'\n", stderr);
        return 2;
    }
    static struct member m[POD_MAX];
    static char *seg[POD_MAX][256];
    int n = 0, k = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--")) {
            if (n == POD_MAX) {
                fprintf(stderr, "wot-device --pod: at most %d devices per pod\n", POD_MAX);
                return 2;
            }
            if (n > 0 && k == 1) {
                fputs("wot-device --pod: an empty device segment between two '--'\n", stderr);
                return 2;
            }
            seg[n][0] = argv[0];
            k = 1;
            n++;
            continue;
        }
        if (k >= 255) {
            fputs("wot-device --pod: too many arguments for one device (at most 254)\n", stderr);
            return 2;
        }
        seg[n - 1][k++] = argv[i];
        seg[n - 1][k] = NULL;
    }
    if (k == 1) {
        fputs("wot-device --pod: the last device segment is empty\n", stderr);
        return 2;
    }

    sigset_t ours, old;
    sigemptyset(&ours);
    sigaddset(&ours, SIGTERM);
    sigaddset(&ours, SIGINT);
    sigaddset(&ours, SIGCHLD);
    sigprocmask(SIG_BLOCK, &ours, &old); /* before fork: no signal is lost in between */

    int first_failure = 0, stopping = 0, refused = 0;
    for (int i = 0; i < n; i++) {
        int sc = 0;
        while (seg[i][sc])
            sc++;
        m[i] = (struct member){.pid = 0, .name = member_name(sc, seg[i]), .code = -1};
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            sigprocmask(SIG_SETMASK, &old, NULL);
            /* re-exec with the device's own argv, so that /proc/PID/cmdline names the device
             * (the runner finds each device's process by its --name); else run it in place */
            execv("/proc/self/exe", seg[i]);
            optind = 1;
            exit(device_main(sc, seg[i]));
        }
        if (pid < 0) {
            fprintf(stderr, "wot-device pod: cannot start device %s: %s\n", m[i].name,
                    strerror(errno));
            m[i].code = 1;
            first_failure = 1;
            stopping = 1;
            signal_all(m, i, SIGTERM);
            break;
        }
        m[i].pid = pid;
    }
    for (int i = 0; i < n; i++) /* never started (fork failed): nothing to wait for */
        if (m[i].pid == 0 && m[i].code < 0)
            m[i].code = 1;

    for (;;) {
        int alive = reap(m, n, stopping, &first_failure, &refused);
        if (refused && !stopping) { /* a device refused to run: so would the others */
            stopping = 1;
            signal_all(m, n, SIGTERM);
        }
        if (alive == 0)
            break;
        int sig = sigwaitinfo(&ours, NULL);
        if ((sig == SIGTERM || sig == SIGINT) && !stopping) {
            stopping = 1;
            signal_all(m, n, sig);
        }
    }
    return first_failure;
}
