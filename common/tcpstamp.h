/* tcpstamp.h - a read of a TCP socket with its kernel receive stamp (connected devices'
 * engine and wot-rpcapp; docs/CONNECTED.md).
 *
 * SO_TIMESTAMPNS (rxstamp_enable) works on TCP too: a recvmsg() with a control buffer gets one
 * SCM_TIMESTAMPNS, the CLOCK_REALTIME instant the last segment whose bytes this read returned
 * entered the stack (net/ipv4/tcp.c tcp_recv_timestamp: the skb of the highest sequence read,
 * coalesced skbs keep the appended one's). Unlike UDP, a segment that arrived unstamped (the
 * host-wide switch was off, rxstamp_pin.h) yields no stamp at all, never a read-time stand-in.
 * The stamp is mapped to CLOCK_MONOTONIC with the caller's clock_map_t (as the UDP paths do).
 *
 * A message completed by a read is stamped with that read: the kernel reports one stamp per
 * read, its last segment's. For the last message a read completes that is the instant it was
 * whole at this host; when one read returns several whole messages (a reader behind), the
 * earlier ones get the later segment's stamp — later than their true arrival, never later
 * than the read itself. The user-space time right
 * after the read is kept beside it: it is the fallback when the kernel gave no stamp, and
 * read - kernel is the reader's own delay. Header-only, no allocation. */
#ifndef WB_COMMON_TCPSTAMP_H
#define WB_COMMON_TCPSTAMP_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "clock.h"
#include "rxstamp.h"

typedef struct {
    uint64_t read_ns;    /* CLOCK_MONOTONIC right after the read returned bytes */
    uint64_t kernel_ns;  /* the kernel's stamp on CLOCK_MONOTONIC, 0 = none (or unusable) */
} tcpstamp_t;

/* recv() of up to len bytes (MSG_DONTWAIT) with its stamps: returns what recvmsg() returns
 * (errno kept); *st is set only when bytes came. A mapped stamp later than the read (the wall
 * clock was stepped since the map's last measurement) is dropped: the read time stands. */
static inline ssize_t tcpstamp_recv(int fd, void *buf, size_t len, const clock_map_t *map,
                                    tcpstamp_t *st) {
    struct iovec iov = {buf, len};
    rxstamp_ctl_t ctl;
    struct msghdr m = rxstamp_msg(&iov, &ctl);
    ssize_t n = recvmsg(fd, &m, MSG_DONTWAIT);
    if (n <= 0)
        return n;
    st->read_ns = (uint64_t)mono_ns();
    int64_t rt = rxstamp_realtime_ns(&m);
    int64_t k = rt > 0 ? clock_map_to_mono(map, rt) : 0;
    st->kernel_ns = k > 0 && (uint64_t)k <= st->read_ns ? (uint64_t)k : 0;
    return n;
}

/* the message's arrival: the kernel's stamp where there is one, else the read's time */
static inline uint64_t tcpstamp_at(const tcpstamp_t *st) {
    return st->kernel_ns ? st->kernel_ns : st->read_ns;
}

#endif
