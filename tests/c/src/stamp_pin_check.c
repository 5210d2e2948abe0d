/* stamp_pin_check.c - common/rxstamp_pin.h: with the pin held, every response on a fresh TCP
 * connection (a connection per request, the server closing after its answer) carries its kernel
 * receive stamp. Built and run by tests/c/test_stamp_pin.py; prints "name value ok|FAILED|info"
 * lines and exits 1 when a check failed.
 *
 * The same loop is run first without the pin, for information only: whether stamps go missing
 * there depends on whether any other process on the host holds stamping on at that moment
 * (switch_on_before says whether one did when the check began). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "rxstamp.h"
#include "rxstamp_pin.h"

#define ROUNDS 100
#define GAP_US 3000 /* between connections: time for the kernel to turn stamping off */

static int failed;

static void report(const char *name, long long value, const char *verdict) {
    printf("%s %lld %s\n", name, value, verdict);
    if (!strcmp(verdict, "FAILED"))
        failed = 1;
}

/* ROUNDS connections to srv GAP_US apart, each answered with one segment and closed by the server; returns
 * how many answers came without a kernel stamp, -1 when the sockets failed */
static int unstamped_answers(int srv, const struct sockaddr_in *sa) {
    int missing = 0;
    for (int i = 0; i < ROUNDS; i++) {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        if (c < 0 || rxstamp_enable(c) < 0 || connect(c, (const struct sockaddr *)sa, sizeof *sa))
            return -1;
        int s = accept(srv, NULL, NULL);
        if (s < 0 || send(s, "HTTP/1.1 200 OK\r\n\r\nx", 20, 0) != 20)
            return -1;
        close(s);
        char buf[64];
        struct iovec iov = {buf, sizeof buf};
        rxstamp_ctl_t ctl;
        struct msghdr m = rxstamp_msg(&iov, &ctl);
        if (recvmsg(c, &m, 0) <= 0)
            return -1;
        missing += rxstamp_realtime_ns(&m) == 0;
        close(c);
        struct timespec gap = {0, GAP_US * 1000};
        nanosleep(&gap, NULL);
    }
    return missing;
}

int main(void) {
    int srv = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (srv < 0 || bind(srv, (struct sockaddr *)&sa, sizeof sa) || listen(srv, 16) ||
        getsockname(srv, (struct sockaddr *)&sa, &sl)) {
        report("socket_setup", 0, "FAILED");
        return 1;
    }
    report("switch_on_before", rxstamp_switch_is_on(), "info"); /* held by other processes */
    report("unpinned_unstamped", unstamped_answers(srv, &sa), "info");
    int on;
    int64_t t0 = mono_ns();
    int pin = rxstamp_pin(200 * NS_PER_MS, &on);
    report("pin_fd", pin, pin >= 0 ? "ok" : "FAILED");
    report("pin_on_after_us", (mono_ns() - t0) / NS_PER_US, on ? "ok" : "FAILED");
    int missing = unstamped_answers(srv, &sa);
    report("pinned_unstamped", missing, missing == 0 ? "ok" : "FAILED");
    report("rounds", ROUNDS, "info");
    return failed;
}
