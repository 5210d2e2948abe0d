/* tcpstamp_check.c - common/tcpstamp.h on a loopback TCP connection: a read gets the kernel's
 * receive stamp of the last segment it returned, on CLOCK_MONOTONIC, never later than the read;
 * a socket that did not ask gets none and the read's time stands. Built and run by
 * tests/c/test_tcpstamp.py; prints "name value ok|FAILED|info" lines, exits 1 on a failure. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "rxstamp_pin.h"
#include "tcpstamp.h"

#define GAP_NS (20 * NS_PER_MS)   /* between a send and the read, or between two sends */
#define SLACK_NS (20 * NS_PER_US) /* the REALTIME->MONOTONIC map's error, generously */

static int failed;

static void report(const char *name, long long value, int ok) {
    printf("%s %lld %s\n", name, value, ok ? "ok" : "FAILED");
    failed |= !ok;
}

static void pause_ns(int64_t ns) {
    struct timespec t = ns_to_timespec(ns);
    nanosleep(&t, NULL);
}

/* a connected pair on loopback: *cli (asks for stamps when stamped) and *srv */
static int pair(int stamped, int *cli, int *srv) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) ||
        getsockname(l, (struct sockaddr *)&a, &al))
        return -1;
    *cli = socket(AF_INET, SOCK_STREAM, 0);
    if (*cli < 0 || (stamped && rxstamp_enable(*cli)) ||
        connect(*cli, (struct sockaddr *)&a, sizeof a))
        return -1;
    *srv = accept(l, NULL, NULL);
    close(l);
    /* each send its own segment */
    return *srv < 0 ? -1 : setsockopt(*srv, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int main(void) {
    int on, pin = rxstamp_pin(200 * NS_PER_MS, &on);
    printf("pin_on %d info\n", on);
    clock_map_t map;
    clock_map_init(&map);
    int cli, srv;
    char buf[64];
    tcpstamp_t st;
    if (pair(1, &cli, &srv)) {
        report("sockets", 0, 0);
        return 1;
    }
    /* 1. one segment, read GAP_NS after it arrived: the stamp is the arrival, not the read */
    int64_t t0 = mono_ns();
    if (send(srv, "a", 1, 0) != 1)
        return 1;
    pause_ns(GAP_NS);
    ssize_t n = tcpstamp_recv(cli, buf, sizeof buf, &map, &st);
    report("one_read_bytes", (long long)n, n == 1);
    report("one_kernel_stamped", st.kernel_ns != 0, st.kernel_ns != 0);
    report("one_kernel_not_after_read_ns", (long long)st.read_ns - (long long)st.kernel_ns,
           st.kernel_ns <= st.read_ns);
    report("one_kernel_after_send_ns", (long long)st.kernel_ns - t0,
           (int64_t)st.kernel_ns >= t0 - SLACK_NS);
    report("one_read_lag_ns", (long long)(st.read_ns - st.kernel_ns),
           st.read_ns - st.kernel_ns >= (uint64_t)GAP_NS - SLACK_NS);
    report("one_used_kernel", tcpstamp_at(&st) == st.kernel_ns, tcpstamp_at(&st) == st.kernel_ns);

    /* 2. a message in two segments GAP_NS apart, read in one go: the stamp is the later
     * segment's (the one that completed it), not the first's */
    if (send(srv, "hel", 3, 0) != 3)
        return 1;
    pause_ns(GAP_NS);
    int64_t t2 = mono_ns();
    if (send(srv, "lo", 2, 0) != 2)
        return 1;
    pause_ns(GAP_NS / 4);
    n = tcpstamp_recv(cli, buf, sizeof buf, &map, &st);
    report("two_read_bytes", (long long)n, n == 5);
    report("two_stamp_of_last_segment_ns", (long long)st.kernel_ns - t2,
           st.kernel_ns && (int64_t)st.kernel_ns >= t2 - SLACK_NS && st.kernel_ns <= st.read_ns);

    /* 3. a socket that did not ask: no kernel stamp, the read's time is the arrival */
    int cli2, srv2;
    if (pair(0, &cli2, &srv2) || send(srv2, "b", 1, 0) != 1)
        return 1;
    pause_ns(GAP_NS / 4);
    n = tcpstamp_recv(cli2, buf, sizeof buf, &map, &st);
    report("unasked_bytes", (long long)n, n == 1);
    report("unasked_kernel_ns", (long long)st.kernel_ns, st.kernel_ns == 0);
    report("unasked_falls_back_to_read", tcpstamp_at(&st) == st.read_ns,
           tcpstamp_at(&st) == st.read_ns && st.read_ns != 0);

    /* 4. nothing to read: -1 (EAGAIN), the stamps untouched */
    st.read_ns = 7;
    n = tcpstamp_recv(cli, buf, sizeof buf, &map, &st);
    report("empty_read_untouched", st.read_ns, n < 0 && st.read_ns == 7);
    close(cli);
    close(srv);
    close(cli2);
    close(srv2);
    if (pin >= 0)
        close(pin);
    return failed;
}
