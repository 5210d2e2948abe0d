/* limits.c - can this process open n UDP sockets? Checked before anything is sent: the
 * file-descriptor limit (the soft RLIMIT_NOFILE is raised up to the hard one when needed) and
 * the kernel's ephemeral port range (every socket binds to port 0: one port each). A client
 * count beyond either is bad input (exit 2) with the limit and the fix, never a failure
 * half-way through opening sockets. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "ge.h"

#define FD_MARGIN 64 /* stdio, the epoll fd, the trace/output files, the warm-up socket */
#define PORT_RANGE_FILE "/proc/sys/net/ipv4/ip_local_port_range"

static int check_fds(size_t n, const char *what) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 0; /* cannot tell: the socket() calls will say */
    rlim_t need = (rlim_t)n + FD_MARGIN;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_cur == RLIM_INFINITY)
        return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
        fprintf(stderr,
                "gateway-emulator: %s %zu needs %llu file descriptors, but RLIMIT_NOFILE allows "
                "at most %llu (hard limit); raise it (ulimit -Hn %llu as root, or docker run "
                "--ulimit nofile=%llu:%llu) or use fewer clients\n",
                what, n, (unsigned long long)need, (unsigned long long)rl.rlim_max,
                (unsigned long long)need, (unsigned long long)need, (unsigned long long)need);
        return 2;
    }
    rl.rlim_cur = need;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
        fprintf(stderr, "gateway-emulator: %s %zu: cannot raise RLIMIT_NOFILE to %llu: %s\n",
                what, n, (unsigned long long)need, strerror(errno));
        return 2;
    }
    return 0;
}

static int check_ports(size_t n, const char *what) {
    FILE *f = fopen(PORT_RANGE_FILE, "r");
    if (!f)
        return 0; /* not Linux-like: bind() will say */
    long lo = 0, hi = 0;
    int ok = fscanf(f, "%ld %ld", &lo, &hi) == 2;
    fclose(f);
    if (!ok || hi < lo)
        return 0;
    size_t range = (size_t)(hi - lo + 1);
    if (n <= range)
        return 0;
    fprintf(stderr,
            "gateway-emulator: %s %zu needs %zu source ports, but the ephemeral port range %ld-%ld "
            "(%s) has %zu; widen it (sysctl net.ipv4.ip_local_port_range=\"1024 65000\") or use "
            "fewer clients\n",
            what, n, n, lo, hi, PORT_RANGE_FILE, range);
    return 2;
}

int limits_check_sockets(size_t n, const char *what) {
    int rc = check_fds(n, what);
    return rc ? rc : check_ports(n, what);
}
