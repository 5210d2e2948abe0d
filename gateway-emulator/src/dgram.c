/* dgram.c - the receive side shared by the UDP and DTLS transports: recvmmsg() batches of up to
 * 32 datagrams (one user-space reading per batch, each slot with its own preallocated control
 * buffer for the kernel's SO_TIMESTAMPNS stamp) and an O(1) source-address -> endpoint hash
 * built before the start. No allocation after dgram_rx_new. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dgram.h"
#include "rxstamp.h" /* common/rxstamp.h */

#define BATCH 32

struct dgram_rx {
    const ge_t *g;
    const clock_map_t *cmap;
    uint32_t *ep_hash;
    size_t ep_hash_mask;
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_storage src[BATCH];
    rxstamp_ctl_t ctl[BATCH];
    uint8_t buf[BATCH][DGRAM_MAX];
};

/* ---- endpoint hash ---- */
static uint64_t addr_hash(const struct sockaddr_storage *a) {
    uint64_t h = 1469598103934665603ULL;
    const uint8_t *p;
    size_t n;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *s = (const void *)a;
        h = (h ^ s->sin_addr.s_addr) * 1099511628211ULL;
        return (h ^ s->sin_port) * 1099511628211ULL;
    }
    const struct sockaddr_in6 *s6 = (const void *)a;
    p = (const uint8_t *)&s6->sin6_addr;
    n = sizeof s6->sin6_addr;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return (h ^ s6->sin6_port) * 1099511628211ULL;
}

static int ep_hash_build(dgram_rx_t *rx) {
    const ge_t *g = rx->g;
    size_t cap = 16;
    while (cap < g->neps * 2)
        cap *= 2;
    rx->ep_hash = malloc(cap * sizeof *rx->ep_hash);
    if (!rx->ep_hash)
        return -1;
    memset(rx->ep_hash, 0xff, cap * sizeof *rx->ep_hash);
    rx->ep_hash_mask = cap - 1;
    for (size_t e = 0; e < g->neps; e++) {
        size_t j = addr_hash(&g->eps[e].addr) & rx->ep_hash_mask;
        while (rx->ep_hash[j] != UINT32_MAX)
            j = (j + 1) & rx->ep_hash_mask;
        rx->ep_hash[j] = (uint32_t)e;
    }
    return 0;
}

static int ep_lookup(const dgram_rx_t *rx, const struct sockaddr_storage *a) {
    size_t j = addr_hash(a) & rx->ep_hash_mask;
    while (rx->ep_hash[j] != UINT32_MAX) {
        if (addr_eq(&rx->g->eps[rx->ep_hash[j]].addr, a))
            return (int)rx->ep_hash[j];
        j = (j + 1) & rx->ep_hash_mask;
    }
    return -1;
}

dgram_rx_t *dgram_rx_new(const ge_t *g, const clock_map_t *cmap) {
    dgram_rx_t *rx = calloc(1, sizeof *rx);
    if (!rx)
        return NULL;
    rx->g = g;
    rx->cmap = cmap;
    if (ep_hash_build(rx) < 0) {
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
    free(rx->ep_hash);
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
            int ep = ep_lookup(rx, &rx->src[i]);
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
