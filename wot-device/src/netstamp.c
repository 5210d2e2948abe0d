/* netstamp.c - kernel arrival and response send times of the endpoint socket (netstamp.h). */
#include "netstamp.h"

#include <string.h>

#include "clock.h"   /* common/clock.h */
#include "rxstamp.h" /* common/rxstamp.h */

#define CTL_BYTES 256 /* SCM_TIMESTAMPNS (32) + IPV6_PKTINFO (40) with room to spare */

ssize_t __real_recvmsg(int fd, struct msghdr *m, int flags);

static int stamp_fd = -1;
static clock_map_t cmap;
static uint64_t last_rx;
static uint64_t *pending;

int netstamp_enable(int fd) {
    if (fd < 0 || rxstamp_enable(fd) < 0)
        return -1;
    clock_map_init(&cmap);
    stamp_fd = fd;
    return 0;
}

int netstamp_is_endpoint(int fd) { return fd >= 0 && fd == stamp_fd; }

ssize_t netstamp_recvmsg(int fd, struct msghdr *m, int flags) {
    union {
        struct cmsghdr align;
        uint8_t b[CTL_BYTES];
    } ctl;
    struct msghdr own = *m;
    own.msg_control = ctl.b;
    own.msg_controllen = sizeof ctl.b;
    last_rx = 0;
    ssize_t n = __real_recvmsg(fd, &own, flags);
    m->msg_namelen = own.msg_namelen;
    m->msg_flags = own.msg_flags;
    if (n < 0) {
        m->msg_controllen = 0;
        return n;
    }
    int64_t rt = rxstamp_realtime_ns(&own);
    if (rt > 0)
        last_rx = (uint64_t)clock_map_to_mono(&cmap, rt);
    /* every other control message goes to the caller's buffer, as the kernel would put it */
    size_t cap = m->msg_control ? m->msg_controllen : 0, used = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&own); c; c = CMSG_NXTHDR(&own, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS)
            continue;
        size_t space = CMSG_SPACE(c->cmsg_len - CMSG_LEN(0));
        if (used + space > cap) {
            m->msg_flags |= MSG_CTRUNC;
            break;
        }
        memcpy((uint8_t *)m->msg_control + used, c, c->cmsg_len);
        used += space;
    }
    m->msg_controllen = used;
    return n;
}

uint64_t netstamp_last_rx(void) { return last_rx; }

void netstamp_set_rx(uint64_t mono) { last_rx = mono; }

void netstamp_expect_response(uint64_t *slot) { pending = slot; }

void netstamp_on_send(const void *data, size_t len) {
    const uint8_t *d = data;
    if (pending && len >= 4 && d[1] != 0) { /* a response, not an empty ACK/RST */
        *pending = (uint64_t)mono_ns();
        pending = NULL;
    }
}

void netstamp_forget(void) { pending = NULL; }

void netstamp_refresh(void) {
    if (stamp_fd >= 0)
        clock_map_refresh(&cmap, mono_ns(), CLOCK_MAP_REFRESH_NS);
}
