/* dgram.c - the receive side shared by the UDP and DTLS transports: recvmmsg() batches of up to
 * 32 datagrams (one user-space reading per batch, each slot with its own preallocated control
 * buffer for the kernel's SO_TIMESTAMPNS stamp) and the source-address -> endpoint index of
 * net.c built before the start (byte-wise FNV-1a: a hash of the whole IPv4 word in one step
 * left the index's low bits to the first octets, so 50 000 loopback devices 127.x.y.z fell
 * into a few slots and every response scanned most of them). No allocation after dgram_rx_new. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dgram.h"
#include "rxstamp.h" /* common/rxstamp.h */

#define BATCH 32

struct dgram_rx {
    const ge_t *g;
    const clock_map_t *cmap;
    ep_index_t eps; /* source address -> endpoint (net.c's index, also the warm-up's) */
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_storage src[BATCH];
    rxstamp_ctl_t ctl[BATCH];
    uint8_t buf[BATCH][DGRAM_MAX];
};

dgram_rx_t *dgram_rx_new(const ge_t *g, const clock_map_t *cmap) {
    dgram_rx_t *rx = calloc(1, sizeof *rx);
    if (!rx)
        return NULL;
    rx->g = g;
    rx->cmap = cmap;
    if (ep_index_build(g, &rx->eps) < 0) {
        free(rx);
        errno = ENOMEM;
        return NULL;
    }
    for (int i = 0; i < BATCH; i++) {
        rx->iov[i].iov_base = rx->buf[i];
        rx->iov[i].iov_len = DGRAM_MAX;
        rx->msgs[i].msg_hdr.msg_iov = &rx->iov[i];
        rx->msgs[i].msg_hdr.msg_iovlen = 1;
        rx->msgs[i].msg_hdr.msg_name = &rx->src[i];
        rx->msgs[i].msg_hdr.msg_control = rx->ctl[i].b;
    }
    return rx;
}

void dgram_rx_free(dgram_rx_t *rx) {
    if (!rx)
        return;
    free(rx->eps.slot);
    free(rx);
}

int dgram_drain(dgram_rx_t *rx, int sock, dgram_fn fn, void *ctx) {
    int total = 0;
    for (;;) {
        for (int i = 0; i < BATCH; i++) {
            rx->msgs[i].msg_hdr.msg_namelen = sizeof rx->src[i];
            rx->msgs[i].msg_hdr.msg_controllen = sizeof rx->ctl[i];
            rx->msgs[i].msg_hdr.msg_flags = 0;
        }
        int n = recvmmsg(rx->g->socks[sock], rx->msgs, BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0)
            return total;
        int64_t t = mono_ns();
        for (int i = 0; i < n; i++) {
            int ep = ep_index_find(rx->g, &rx->eps, &rx->src[i]);
            if (ep < 0) /* not from one of the trace's endpoints */
                continue;
            int64_t rt = rxstamp_realtime_ns(&rx->msgs[i].msg_hdr);
            fn(ctx, sock, ep, rx->buf[i], rx->msgs[i].msg_len, &rx->src[i],
               rx->msgs[i].msg_hdr.msg_namelen, t, rt ? clock_map_to_mono(rx->cmap, rt) : 0);
        }
        total += n;
        if (n < BATCH)
            return total;
    }
}
