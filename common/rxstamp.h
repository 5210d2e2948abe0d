/* rxstamp.h - kernel software receive stamps (SO_TIMESTAMPNS) for UDP sockets.
 *
 * With SO_TIMESTAMPNS on, every recvmsg()/recvmmsg() that passes a control buffer of at least
 * RXSTAMP_CMSG_SPACE bytes gets an SCM_TIMESTAMPNS message: the CLOCK_REALTIME instant the
 * datagram entered the socket layer, before any process woke up to read it. Map it to
 * CLOCK_MONOTONIC with clock_map_to_mono() (clock.h). Header-only, no allocation. */
#ifndef WB_COMMON_RXSTAMP_H
#define WB_COMMON_RXSTAMP_H

#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "clock.h"

#define RXSTAMP_CMSG_SPACE CMSG_SPACE(sizeof(struct timespec))

/* a control buffer for one stamp, aligned for struct cmsghdr */
typedef union {
    struct cmsghdr align;
    uint8_t b[RXSTAMP_CMSG_SPACE];
} rxstamp_ctl_t;

/* A msghdr for one datagram into iov, with ctl as its control buffer (no source address). */
static inline struct msghdr rxstamp_msg(struct iovec *iov, rxstamp_ctl_t *ctl) {
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl->b;
    m.msg_controllen = sizeof ctl->b;
    return m;
}

/* 0 ok, -1 (errno set) when the kernel refuses the option */
static inline int rxstamp_enable(int fd) {
    int on = 1;
    return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
}

/* The SCM_TIMESTAMPNS stamp of a received message as CLOCK_REALTIME ns; 0 when absent. */
static inline int64_t rxstamp_realtime_ns(const struct msghdr *m) {
    if (!m->msg_control || m->msg_controllen == 0)
        return 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR((struct msghdr *)m, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS &&
            c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(c), sizeof ts);
            return ts_to_ns(&ts);
        }
    }
    return 0;
}

#endif
