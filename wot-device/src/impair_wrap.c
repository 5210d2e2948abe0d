/* impair_wrap.c - the -Wl,--wrap interposers on libcoap's socket calls: sendmsg and recvmsg
 * of the endpoint socket go through the channels (impair_chan.c); epoll_ctl is watched to learn
 * libcoap's epoll data pointer of the endpoint (for the ingress replay). Also the egress flush
 * and the ingress replay served by the I/O loop. Pings (empty CON in, empty RST out, 4 bytes)
 * are never impaired. The wrappers also feed netstamp.c (kernel arrival and response send times
 * of the endpoint socket), with or without impairments. */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "impair.h"
#include "impair_int.h"
#include "netstamp.h"
#include "service.h"

int imp_ep_fd = -1;
static void *ptr_by_fd[MAX_FD];
static int epfd_by_fd[MAX_FD]; /* the epoll set ptr_by_fd[fd] belongs to, + 1 (0 = none) */
static struct pkt *replay;     /* ingress datagram handed to libcoap's next recvmsg */
static int replay_taken;

ssize_t __real_sendmsg(int fd, const struct msghdr *m, int flags);
ssize_t __real_recvmsg(int fd, struct msghdr *m, int flags);
int __real_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
ssize_t __wrap_sendmsg(int fd, const struct msghdr *m, int flags);
ssize_t __wrap_recvmsg(int fd, struct msghdr *m, int flags);
int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);

int impair_set_endpoint(int fd) {
    imp_ep_fd = fd;
    return fd >= 0 && fd < MAX_FD && ptr_by_fd[fd] ? 0 : -1;
}

void *impair_epoll_ptr(int fd) { return fd >= 0 && fd < MAX_FD ? ptr_by_fd[fd] : NULL; }

void *impair_endpoint_ptr(void) { return impair_epoll_ptr(imp_ep_fd); }

void impair_flush_egress(uint64_t now) {
    while (imp_eg.nheap && imp_eg.slots[imp_eg.heap[0]].due <= now) {
        uint32_t idx = chan_heap_pop(&imp_eg);
        struct pkt *p = &imp_eg.slots[idx];
        struct iovec iov = {.iov_base = p->data, .iov_len = p->len};
        struct msghdr m = {.msg_name = p->namelen ? p->name : NULL, .msg_namelen = p->namelen,
                           .msg_iov = &iov, .msg_iovlen = 1,
                           .msg_control = p->ctllen ? p->ctl : NULL,
                           .msg_controllen = p->ctllen};
        if (__real_sendmsg(p->fd, &m, 0) < 0)
            imp_eg.errors++;
        imp_eg.free_[imp_eg.nfree++] = idx;
    }
}

int impair_ingress_begin(uint64_t now) {
    if (!imp_in.nheap || imp_in.slots[imp_in.heap[0]].due > now)
        return 0;
    replay = &imp_in.slots[chan_heap_pop(&imp_in)];
    replay_taken = 0;
    return 1;
}

const uint8_t *impair_ingress_other(size_t *len, uint64_t *arrival, const void **name,
                                    socklen_t *namelen) {
    if (!replay || replay->fd == imp_ep_fd)
        return NULL;
    replay_taken = 1;
    *len = replay->len;
    *arrival = replay->due;
    *name = replay->name;
    *namelen = replay->namelen;
    return replay->data;
}

/* The push client's datagrams (push_run.c): the same channels as the endpoint's, as one
 * netem qdisc on the device's link would see them. */
ssize_t impair_sendto(int fd, const void *d, size_t len, const struct sockaddr *to,
                      socklen_t tolen) {
    if (!imp_eg.on || len > PKT_MAX)
        return sendto(fd, d, len, 0, to, tolen);
    static uint8_t buf[PKT_MAX];   /* the caller's copy stays intact for retransmissions */
    memcpy(buf, d, len);
    struct meta meta = {fd, to, tolen, NULL, 0};
    if (!admit(&imp_eg, buf, len, &meta, tolen == sizeof(struct sockaddr_in6), 1, mono_ns()))
        return (ssize_t)len;       /* dropped or held: to the device, it was sent */
    ssize_t r = sendto(fd, buf, len, 0, to, tolen);
    if (r < 0)
        imp_eg.errors++;
    return r;
}

int impair_admit_in(int fd, uint8_t *d, size_t len, const struct sockaddr *from,
                    socklen_t fromlen, uint64_t arrived) {
    if (!imp_in.on || len > PKT_MAX)
        return 1;
    struct meta meta = {fd, from, fromlen, NULL, 0};
    return admit(&imp_in, d, len, &meta, fromlen == sizeof(struct sockaddr_in6), 1, arrived);
}

void impair_ingress_end(void) {
    if (!replay)
        return;
    if (!replay_taken)
        imp_in.errors++;    /* libcoap did not read it (should not happen) */
    imp_in.free_[imp_in.nfree++] = (uint32_t)(replay - imp_in.slots);
    replay = NULL;
}

static int is_ping_msg(const uint8_t *d, size_t len, int type) {
    return len == 4 && (d[0] & 0xC0) == 0x40 && ((d[0] >> 4) & 3) == type && d[1] == 0;
}

ssize_t __wrap_sendmsg(int fd, const struct msghdr *m, int flags) {
    if (netstamp_is_endpoint(fd) && m->msg_iovlen >= 1)
        netstamp_on_send(m->msg_iov[0].iov_base, m->msg_iov[0].iov_len);
    if (fd != imp_ep_fd || !imp_eg.on || m->msg_iovlen != 1 || m->msg_iov[0].iov_len > PKT_MAX) {
        if (fd == imp_ep_fd && imp_eg.on)
            imp_eg.oversize++;
        return __real_sendmsg(fd, m, flags);
    }
    const uint8_t *d = m->msg_iov[0].iov_base;
    size_t len = m->msg_iov[0].iov_len;
    if (is_ping_msg(d, len, 3)) {
        imp_eg.pings++;
        return __real_sendmsg(fd, m, flags);
    }
    static uint8_t buf[PKT_MAX];   /* libcoap keeps its copy for retransmissions intact */
    memcpy(buf, d, len);
    struct meta meta = {fd, m->msg_name, m->msg_namelen, m->msg_control, m->msg_controllen};
    int v6 = m->msg_namelen == sizeof(struct sockaddr_in6);
    if (admit(&imp_eg, buf, len, &meta, v6, 1, mono_ns())) {
        struct iovec iov = {.iov_base = buf, .iov_len = len};
        struct msghdr m2 = *m;
        m2.msg_iov = &iov;
        ssize_t r = __real_sendmsg(fd, &m2, flags);
        if (r < 0)
            imp_eg.errors++;
        return r;
    }
    return (ssize_t)len;  /* dropped or held: to libcoap, it was sent */
}

/* the endpoint's reads keep their kernel arrival stamp (netstamp.c) */
static ssize_t recv_real(int fd, struct msghdr *m, int flags) {
    return netstamp_is_endpoint(fd) ? netstamp_recvmsg(fd, m, flags) : __real_recvmsg(fd, m, flags);
}

ssize_t __wrap_recvmsg(int fd, struct msghdr *m, int flags) {
    if (fd != imp_ep_fd || !imp_in.on || m->msg_iovlen != 1)
        return recv_real(fd, m, flags);
    if (replay && !replay_taken) {
        struct pkt *p = replay;
        replay_taken = 1;
        netstamp_set_rx(p->due); /* its emulated arrival */
        size_t n = p->len < m->msg_iov[0].iov_len ? p->len : m->msg_iov[0].iov_len;
        memcpy(m->msg_iov[0].iov_base, p->data, n);
        if (m->msg_name) {
            socklen_t nl = p->namelen < m->msg_namelen ? p->namelen : m->msg_namelen;
            memcpy(m->msg_name, p->name, nl);
            m->msg_namelen = p->namelen;
        }
        if (m->msg_control && m->msg_controllen >= p->ctllen) {
            memcpy(m->msg_control, p->ctl, p->ctllen);
            m->msg_controllen = p->ctllen;
        } else {
            m->msg_controllen = 0;
        }
        m->msg_flags = n < p->len ? MSG_TRUNC : 0;
        return (ssize_t)n;
    }
    ssize_t n = recv_real(fd, m, flags | MSG_DONTWAIT);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            errno = ECONNREFUSED;   /* libcoap ignores this quietly (reads 0 bytes) */
        return n;
    }
    uint8_t *d = m->msg_iov[0].iov_base;
    if ((size_t)n > PKT_MAX || (m->msg_flags & MSG_TRUNC)) {
        imp_in.oversize++;
        return n;
    }
    if (is_ping_msg(d, (size_t)n, 0)) {
        imp_in.pings++;
        return n;
    }
    struct meta meta = {fd, m->msg_name, m->msg_namelen, m->msg_control, m->msg_controllen};
    int v6 = m->msg_namelen == sizeof(struct sockaddr_in6);
    uint64_t arrived = netstamp_last_rx(); /* netem delays from the kernel's enqueue */
    if (admit(&imp_in, d, (size_t)n, &meta, v6, 1, arrived ? arrived : (uint64_t)mono_ns()))
        return n;
    errno = ECONNREFUSED;          /* dropped or held: libcoap sees no datagram */
    return -1;
}

/* Keeps the data pointer of the first epoll set an fd joins (libcoap's, which registers its
 * sockets before the I/O loop adds the endpoint socket to its own set). */
int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev) {
    if (fd >= 0 && fd < MAX_FD && (!epfd_by_fd[fd] || epfd_by_fd[fd] == epfd + 1)) {
        if (op == EPOLL_CTL_DEL) {
            ptr_by_fd[fd] = NULL;
            epfd_by_fd[fd] = 0;
        } else if (ev) {
            ptr_by_fd[fd] = ev->data.ptr;
            epfd_by_fd[fd] = epfd + 1;
        }
    }
    return __real_epoll_ctl(epfd, op, fd, ev);
}
