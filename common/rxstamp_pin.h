/* rxstamp_pin.h - keep the kernel stamping arriving packets for a whole run.
 *
 * The kernel stamps a packet on arrival only while a host-wide switch is on (net/core/dev.c,
 * netstamp_needed_key). The first socket on the host that asks for receive stamps turns it on
 * and the last one closed turns it off, both later, from a workqueue (net_enable_timestamp /
 * net_disable_timestamp defer to netstamp_clear). A UDP read of a datagram that arrived while the
 * switch was off gets the time of the read as its stamp; a TCP read gets no stamp at all.
 *
 * A transport whose stamping sockets come and go (an HTTP connection per request, a keep-alive
 * connection the server closes) therefore switches stamps off and on again between its
 * connections whenever nothing else on the host holds them on, and a response that arrives before
 * the workqueue ran has no kernel stamp. The pin is one socket that asks for stamps for the
 * whole run, opened before the start; rxstamp_pin() also waits (bounded) until the switch is on:
 * it sends itself a datagram on loopback until the kernel stamps one. Its probe asks for software
 * receive stamps through SO_TIMESTAMPING only (no SO_TIMESTAMPNS), which reports the arrival
 * stamp or nothing, never a read-time stand-in. Header-only, used before the start only. */
#ifndef WB_COMMON_RXSTAMP_PIN_H
#define WB_COMMON_RXSTAMP_PIN_H

#include <time.h> /* before errqueue.h: its struct scm_timestamping holds timespecs */
#include <linux/errqueue.h>   /* struct scm_timestamping */
#include <linux/net_tstamp.h> /* SOF_TIMESTAMPING_* */
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"

/* reads one datagram of fd: 1 it carried a kernel arrival stamp, 0 it did not, -1 none waiting */
static inline int rxstamp_pin_read(int fd) {
    union {
        struct cmsghdr align;
        uint8_t b[CMSG_SPACE(sizeof(struct scm_timestamping))];
    } ctl;
    uint8_t byte;
    struct iovec iov = {&byte, 1};
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl.b;
    m.msg_controllen = sizeof ctl.b;
    if (recvmsg(fd, &m, MSG_DONTWAIT) < 0)
        return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING &&
            c->cmsg_len >= CMSG_LEN(sizeof(struct scm_timestamping))) {
            struct scm_timestamping ts;
            memcpy(&ts, CMSG_DATA(c), sizeof ts);
            return ts.ts[0].tv_sec != 0 || ts.ts[0].tv_nsec != 0;
        }
    }
    return 0;
}

/* 1 when some other socket on the host holds stamping on right now (0 off, -1 cannot tell): a
 * loopback datagram read by a socket that reports stamps without asking for them. */
static inline int rxstamp_switch_is_on(void) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int flags = SOF_TIMESTAMPING_SOFTWARE; /* report, without RX_SOFTWARE: does not ask */
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    int on = -1;
    struct pollfd p = {fd, POLLIN, 0};
    if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) == 0 &&
        bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &al) == 0 &&
        sendto(fd, "p", 1, 0, (struct sockaddr *)&a, al) == 1 && poll(&p, 1, 10) == 1)
        on = rxstamp_pin_read(fd);
    close(fd);
    return on;
}

/* Opens the pin and waits at most wait_ns for the kernel to stamp a datagram. Returns the pin's
 * fd (keep it open until the last read; -1: no socket could be opened) and sets *on to 1 when a
 * stamped datagram was seen (0: not within wait_ns, or loopback unusable: stamps may be missing
 * early in the run). */
static inline int rxstamp_pin(int64_t wait_ns, int *on) {
    *on = 0;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int flags = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) < 0) {
        int ns = 1; /* the older option holds the switch as well; no probe then */
        if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &ns, sizeof ns) < 0) {
            close(fd);
            return -1;
        }
        return fd;
    }
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) < 0)
        return fd; /* no loopback to probe on: the pin still holds the switch */
    int64_t deadline = mono_ns() + wait_ns;
    do {
        if (sendto(fd, "p", 1, 0, (struct sockaddr *)&a, al) == 1) {
            struct pollfd p = {fd, POLLIN, 0};
            if (poll(&p, 1, 1) == 1 && rxstamp_pin_read(fd) == 1) {
                *on = 1;
                break;
            }
        }
        struct timespec pause = {0, 200 * 1000}; /* the workqueue runs when this CPU lets it */
        nanosleep(&pause, NULL);
    } while (mono_ns() < deadline);
    while (rxstamp_pin_read(fd) >= 0) /* the probe's leftovers: nothing reads the pin later */
        ;
    return fd;
}

#endif
