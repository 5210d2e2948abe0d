/* loop.c - the single send-loop thread: open-loop sends at the scheduled instants, responses
 * drained between sends (recvmmsg), timeouts in send order, optional RFC 7252 retransmission.
 * Nothing here allocates, logs or touches files; all state lives in preallocated arrays. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <coap3/coap.h>

#include "clock.h" /* common/clock.h */
#include "dtls.h"
#include "ge.h"
#include "rxstamp.h" /* common/rxstamp.h */

#define BATCH 32
#define RXBUF 4096
#define SENDS_BEFORE_DRAIN 16
#define ACK_TIMEOUT_NS (2LL * NS_PER_S)
#define MAX_RETRANSMIT 4
#define DRAIN_WAIT_CAP_NS (100LL * NS_PER_MS)

typedef struct {
    ge_t *g;
    int epfd;
    int direct; /* poll sockets with recvmmsg directly instead of epoll_wait(0) */
    coap_pdu_t *pdu;
    size_t next;     /* next request to send */
    size_t to_head;  /* timeout cursor (send order) */
    size_t outstanding;
    uint32_t *heap; /* retransmission min-heap on rtx_due */
    size_t heap_n;
    uint64_t rng;
    /* endpoint lookup by source address */
    uint32_t *ep_hash;
    size_t ep_hash_mask;
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_storage src[BATCH];
    rxstamp_ctl_t ctl[BATCH]; /* kernel receive stamps (SCM_TIMESTAMPNS) */
    clock_map_t cmap; /* CLOCK_REALTIME -> CLOCK_MONOTONIC for those stamps */
    uint8_t buf[BATCH][RXBUF];
} loop_t;

/* ---- endpoint hash (built before the start) ---- */
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

static int ep_hash_build(loop_t *L) {
    ge_t *g = L->g;
    size_t cap = 16;
    while (cap < g->neps * 2)
        cap *= 2;
    L->ep_hash = malloc(cap * sizeof *L->ep_hash);
    if (!L->ep_hash)
        return -1;
    memset(L->ep_hash, 0xff, cap * sizeof *L->ep_hash);
    L->ep_hash_mask = cap - 1;
    for (size_t e = 0; e < g->neps; e++) {
        size_t j = addr_hash(&g->eps[e].addr) & L->ep_hash_mask;
        while (L->ep_hash[j] != UINT32_MAX)
            j = (j + 1) & L->ep_hash_mask;
        L->ep_hash[j] = (uint32_t)e;
    }
    return 0;
}

static int ep_lookup(const loop_t *L, const struct sockaddr_storage *a) {
    size_t j = addr_hash(a) & L->ep_hash_mask;
    while (L->ep_hash[j] != UINT32_MAX) {
        if (addr_eq(&L->g->eps[L->ep_hash[j]].addr, a))
            return (int)L->ep_hash[j];
        j = (j + 1) & L->ep_hash_mask;
    }
    return -1;
}

/* ---- retransmission heap ---- */
static void heap_push(loop_t *L, uint32_t idx) {
    req_t *R = L->g->reqs;
    R[idx].flags |= RF_INHEAP;
    size_t i = L->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (R[L->heap[p]].rtx_due <= R[idx].rtx_due)
            break;
        L->heap[i] = L->heap[p];
        i = p;
    }
    L->heap[i] = idx;
}

/* an entry of idx is in the heap with a later key: make it due earlier (block.c follow-ups);
 * O(heap size) to find it, then a sift-up */
static void heap_decrease(loop_t *L, uint32_t idx, int64_t due) {
    req_t *R = L->g->reqs;
    size_t i = 0;
    while (i < L->heap_n && L->heap[i] != idx)
        i++;
    if (i == L->heap_n)
        return;
    R[idx].rtx_due = due;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (R[L->heap[p]].rtx_due <= due)
            break;
        L->heap[i] = L->heap[p];
        i = p;
    }
    L->heap[i] = idx;
}

static uint32_t heap_pop(loop_t *L) {
    req_t *R = L->g->reqs;
    uint32_t top = L->heap[0], last = L->heap[--L->heap_n];
    size_t i = 0, n = L->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && R[L->heap[c + 1]].rtx_due < R[L->heap[c]].rtx_due)
            c++;
        if (R[last].rtx_due <= R[L->heap[c]].rtx_due)
            break;
        L->heap[i] = L->heap[c];
        i = c;
    }
    if (n)
        L->heap[i] = last;
    R[top].flags &= (uint8_t)~RF_INHEAP;
    return top;
}

static uint64_t rng_next(loop_t *L) {
    L->rng ^= L->rng << 13;
    L->rng ^= L->rng >> 7;
    L->rng ^= L->rng << 17;
    return L->rng;
}

/* ---- outcomes ---- */
static void finish(loop_t *L, req_t *r, int outcome) {
    if (L->g->dtls) /* per-request: close the session; no handshake -> error (not the SUT) */
        outcome = dtls_on_finish(L->g, (uint32_t)(r - L->g->reqs), outcome, mono_ns());
    r->outcome = (uint8_t)outcome;
    r->flags |= RF_DONE;
    L->outstanding--;
    switch (outcome) {
    case O_OK: progress_inc(L->g, PG_OK); break;
    case O_TIMEOUT: progress_inc(L->g, PG_TIMEOUT); break;
    case O_RESET: progress_inc(L->g, PG_RESET); break;
    default: progress_inc(L->g, PG_ERROR); break;
    }
}

static void send_empty(ge_t *g, int sock, int ep, int type, uint16_t mid,
                       const struct sockaddr_storage *to, socklen_t tolen) {
    uint8_t m[4] = {(uint8_t)(1 << 6 | type << 4), 0, (uint8_t)(mid >> 8), (uint8_t)mid};
    if (g->dtls) {
        dtls_send_plain(g, sock, ep, m, sizeof m);
        return;
    }
    (void)sendto(g->socks[sock], m, sizeof m, 0, (const struct sockaddr *)to, tolen);
}

static uint64_t rng_next(loop_t *L);

/* a block-wise follow-up (block.c patched the request's datagram): send it now, schedule its
 * own retransmissions (the heap entry of an earlier block is re-keyed when it pops) */
static void send_block(loop_t *L, req_t *r) {
    ge_t *g = L->g;
    uint32_t idx = (uint32_t)(r - g->reqs);
    const endpoint_t *e = &g->eps[r->ep];
    r->flags &= (uint8_t)~RF_ACKED;
    int64_t t = mono_ns();
    if (g->dtls ? dtls_send_req(g, idx, &t) <= 0
                : sendto(g->socks[r->sock], g->arena + r->dgram_off, r->dgram_len, 0,
                         (const struct sockaddr *)&e->addr, e->addrlen) < 0) {
        finish(L, r, O_ERROR);
        return;
    }
    if (g->retransmit && !g->non) {
        r->rtx_t0_ms = (uint16_t)(ACK_TIMEOUT_NS / NS_PER_MS + rng_next(L) % 1001);
        int64_t due = t + (int64_t)r->rtx_t0_ms * NS_PER_MS;
        block_rtx_set(g, idx, due, 0);
        if (!(r->flags & RF_INHEAP)) {
            r->rtx_due = due;
            heap_push(L, idx);
        } else if (r->rtx_due > due) { /* an earlier block's backed-off entry: bring it forward */
            heap_decrease(L, idx, due);
        } /* else: it pops first and is re-keyed to this block's due time */
    }
}

/* the request of an empty ACK / RST: by (socket, endpoint, MID) */
static req_t *by_mid(loop_t *L, int sock, int ep, uint16_t mid) {
    ge_t *g = L->g;
    if (g->dtls && dtls_req_of_sock(g, sock) >= 0) { /* per-request: the slot's one request */
        req_t *r = &g->reqs[dtls_req_of_sock(g, sock)];
        return r->flags & RF_DONE ? NULL : r;
    }
    int k = sock % g->ports_used;
    pair_t *p = &g->pairs[(size_t)ep * (size_t)g->ports_used + (size_t)k];
    req_t *hit = NULL;
    for (uint32_t j = (uint16_t)(mid - p->mid_base); j < p->sent; j += 65536) {
        req_t *r = &g->reqs[g->pair_reqs[p->first + j]];
        if (!(r->flags & RF_DONE))
            hit = r;
    }
    return hit;
}

/* the response's times: t = read by the loop (user space), kt = kernel receive stamp (0 = none) */
static void set_received(loop_t *L, req_t *r, int64_t t, int64_t kt) {
    r->recv_ns = t - L->g->start_mono;
    if (kt > 0) {
        int64_t w = t - kt;
        r->rx_wait_ns = w <= 0 ? 0 : w >= UINT32_MAX ? UINT32_MAX : (uint32_t)w;
        r->flags |= RF_KSTAMP;
    }
}

static void handle_coap(loop_t *L, int sock, const uint8_t *d, size_t len,
                        const struct sockaddr_storage *src, socklen_t srclen, int64_t t,
                        int64_t kt) {
    ge_t *g = L->g;
    if (len < 4 || (d[0] >> 6) != 1)
        return;
    int type = (d[0] >> 4) & 3, code = d[1];
    uint16_t mid = (uint16_t)(d[2] << 8 | d[3]);
    int ep = ep_lookup(L, src);
    if (ep < 0)
        return;
    if (code == 0) { /* empty message */
        req_t *r = (type == COAP_MESSAGE_ACK || type == COAP_MESSAGE_RST) ? by_mid(L, sock, ep, mid)
                                                                           : NULL;
        if (!r) {
            if (type == COAP_MESSAGE_CON) /* CoAP ping */
                send_empty(g, sock, ep, COAP_MESSAGE_RST, mid, src, srclen);
            return;
        }
        if (r->mid != mid) /* for an earlier block of a block-wise transfer: stale */
            return;
        if (type == COAP_MESSAGE_ACK) {
            /* a follow-up block is answered piggybacked; an empty ACK for it means the device
             * is still busy with a re-sent first block: keep retransmitting (block.c) */
            if (!g->blk || block_rtx(g, (uint32_t)(r - g->reqs), NULL) < 0)
                r->flags |= RF_ACKED;
        } else {
            set_received(L, r, t, kt);
            finish(L, r, O_RESET);
        }
        return;
    }
    if (!coap_pdu_parse(COAP_PROTO_UDP, d, len, L->pdu)) {
        if (type == COAP_MESSAGE_CON)
            send_empty(g, sock, ep, COAP_MESSAGE_RST, mid, src, srclen);
        return;
    }
    coap_bin_const_t tok = coap_pdu_get_token(L->pdu);
    req_t *r = NULL;
    int known = 0;
    if (tok.length == 8 && (code >> 5) >= 2) {
        uint32_t hi = (uint32_t)tok.s[0] << 24 | (uint32_t)tok.s[1] << 16 |
                      (uint32_t)tok.s[2] << 8 | tok.s[3];
        uint32_t lo = (uint32_t)tok.s[4] << 24 | (uint32_t)tok.s[5] << 16 |
                      (uint32_t)tok.s[6] << 8 | tok.s[7];
        uint32_t idx = lo ^ (uint32_t)g->salt;
        if (hi == (uint32_t)(g->salt >> 32) && idx < L->next) {
            req_t *c = &g->reqs[idx];
            if (c->method == M_OBSERVE && c->ep == ep && c->sock == sock &&
                (c->flags & RF_SENT)) { /* registration response, notification or cancel reply */
                int reply;
                r = observe_on_message(g, idx, type, mid, L->pdu, t, kt, &reply);
                if (type == COAP_MESSAGE_CON)
                    send_empty(g, sock, ep, reply, mid, src, srclen);
                if (r && !(r->flags & RF_DONE)) {
                    r->code = (uint8_t)code;
                    set_received(L, r, t, kt);
                    finish(L, r, (code >> 5) == 2 ? O_OK : O_ERROR);
                }
                return;
            }
            if (c->ep == ep && c->sock == sock && (c->flags & RF_SENT) &&
                (type != COAP_MESSAGE_ACK || c->mid == mid)) {
                known = 1;
                if (!(c->flags & RF_DONE))
                    r = c;
            }
        }
    }
    if (type == COAP_MESSAGE_CON) /* separate response: acknowledge (RST if not ours) */
        send_empty(g, sock, ep, known ? COAP_MESSAGE_ACK : COAP_MESSAGE_RST, mid, src, srclen);
    if (!r)
        return;
    int more = g->blk ? block_follow_up(g, (uint32_t)(r - g->reqs), L->pdu, code) : 0;
    if (more) { /* the next block of a block-wise transfer (block.c), or a stale copy */
        if (more > 0)
            send_block(L, r);
        return;
    }
    r->code = (uint8_t)code;
    set_received(L, r, t, kt);
    finish(L, r, (code >> 5) == 2 ? O_OK : O_ERROR);
}

/* per-request DTLS: the session of request idx is up, send its first application record */
static void dtls_ready(loop_t *L, int64_t idx) {
    ge_t *g = L->g;
    if (idx < 0 || (g->reqs[idx].flags & RF_DONE))
        return;
    req_t *r = &g->reqs[idx];
    int64_t t;
    if (dtls_send_req(g, (uint32_t)idx, &t) <= 0) {
        finish(L, r, O_ERROR);
        return;
    }
    if (g->retransmit && !g->non) {
        r->rtx_t0_ms = (uint16_t)(ACK_TIMEOUT_NS / NS_PER_MS + rng_next(L) % 1001);
        r->rtx_due = t + (int64_t)r->rtx_t0_ms * NS_PER_MS;
        heap_push(L, (uint32_t)idx);
    }
}

/* a received datagram: plain CoAP, or DTLS records of a session (dtls.c) decrypted first */
static void handle(loop_t *L, int sock, const uint8_t *d, size_t len,
                   const struct sockaddr_storage *src, socklen_t srclen, int64_t t, int64_t kt) {
    ge_t *g = L->g;
    if (!g->dtls) {
        handle_coap(L, sock, d, len, src, srclen, t, kt);
        return;
    }
    static uint8_t plain[RXBUF];
    int ep = ep_lookup(L, src), s = ep < 0 ? -1 : dtls_session_of(g, sock, ep);
    if (s < 0)
        return;
    for (int n = dtls_input(g, s, d, len, plain, sizeof plain, kt ? kt : t);;
         n = dtls_input(g, s, NULL, 0, plain, sizeof plain, kt ? kt : t)) {
        if (n > 0) {
            handle_coap(L, sock, plain, (size_t)n, src, srclen, t, kt);
            continue;
        }
        if (n == DTLS_READY)
            dtls_ready(L, dtls_waiting(g, s));
        else if (n == DTLS_FAILED && dtls_waiting(g, s) >= 0 &&
                 !(g->reqs[dtls_waiting(g, s)].flags & RF_DONE))
            finish(L, &g->reqs[dtls_waiting(g, s)], O_ERROR);
        return;
    }
}

/* read everything queued on one socket, in batches; returns datagrams read */
static int drain_sock(loop_t *L, int s) {
    int total = 0;
    for (;;) {
        for (int i = 0; i < BATCH; i++) {
            L->msgs[i].msg_hdr.msg_namelen = sizeof L->src[i];
            L->msgs[i].msg_hdr.msg_controllen = sizeof L->ctl[i];
            L->msgs[i].msg_hdr.msg_flags = 0;
        }
        int n = recvmmsg(L->g->socks[s], L->msgs, BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0)
            return total;
        int64_t t = mono_ns();
        for (int i = 0; i < n; i++) {
            int64_t rt = rxstamp_realtime_ns(&L->msgs[i].msg_hdr);
            handle(L, s, L->buf[i], L->msgs[i].msg_len, &L->src[i],
                   L->msgs[i].msg_hdr.msg_namelen, t, rt ? clock_map_to_mono(&L->cmap, rt) : 0);
        }
        total += n;
        if (n < BATCH)
            return total;
    }
}

/* non-blocking drain of all sockets */
static void drain(loop_t *L) {
    if (L->direct) {
        for (size_t s = 0; s < L->g->nsocks; s++)
            drain_sock(L, (int)s);
        return;
    }
    struct epoll_event ev[64];
    int n = epoll_wait(L->epfd, ev, 64, 0);
    for (int i = 0; i < n; i++)
        drain_sock(L, (int)ev[i].data.u32);
}

/* block until a response arrives or until the absolute time `until` (hybrid mode) */
static void wait_until(loop_t *L, int64_t until) {
    int64_t d = until - mono_ns();
    if (d <= 0)
        return;
    struct timespec ts = ns_to_timespec(d);
    struct epoll_event ev[64];
    int n = epoll_pwait2(L->epfd, ev, 64, &ts, NULL);
    for (int i = 0; i < n; i++)
        drain_sock(L, (int)ev[i].data.u32);
}

static void check_timeouts(loop_t *L, int64_t now) {
    ge_t *g = L->g;
    int64_t rel = now - g->start_mono;
    while (L->to_head < L->next) {
        req_t *r = &g->reqs[L->to_head];
        if (!(r->flags & RF_DONE)) {
            if (rel - r->sent_ns < g->timeout_ns)
                break;
            finish(L, r, O_TIMEOUT);
        }
        L->to_head++;
    }
}

static void retransmit_due(loop_t *L, int64_t now) {
    ge_t *g = L->g;
    while (L->heap_n && g->reqs[L->heap[0]].rtx_due <= now) {
        uint32_t idx = heap_pop(L);
        req_t *r = &g->reqs[idx];
        int64_t bdue;
        int bk = g->blk ? block_rtx(g, idx, &bdue) : -1;
        if (bk >= 0) { /* a follow-up block in flight: its own RFC 7252 schedule */
            if (r->flags & (RF_DONE | RF_ACKED) || bk >= MAX_RETRANSMIT)
                continue;
            if (bdue > now) { /* an earlier block's entry: re-key to this block's due time */
                r->rtx_due = bdue;
                heap_push(L, idx);
                continue;
            }
            const endpoint_t *e = &g->eps[r->ep];
            int64_t tx;
            int sent = g->dtls ? dtls_send_req(g, idx, &tx) > 0
                               : sendto(g->socks[r->sock], g->arena + r->dgram_off, r->dgram_len,
                                        0, (const struct sockaddr *)&e->addr, e->addrlen) >= 0;
            if (sent && r->retrans < 255)
                r->retrans++;
            int64_t due = now + ((int64_t)r->rtx_t0_ms * NS_PER_MS << (bk + sent));
            block_rtx_set(g, idx, due, sent);
            if (bk + sent < MAX_RETRANSMIT) {
                r->rtx_due = due;
                heap_push(L, idx);
            }
            continue;
        }
        if (r->flags & (RF_DONE | RF_ACKED) || r->retrans >= MAX_RETRANSMIT)
            continue;
        const endpoint_t *e = &g->eps[r->ep];
        int64_t tx;
        if (g->dtls ? dtls_send_req(g, idx, &tx) > 0
                    : sendto(g->socks[r->sock], g->arena + r->dgram_off, r->dgram_len, 0,
                             (const struct sockaddr *)&e->addr, e->addrlen) >= 0)
            r->retrans++;
        /* RFC 7252 4.2: the timeout doubles after every retransmission */
        r->rtx_due = now + ((int64_t)r->rtx_t0_ms * NS_PER_MS << r->retrans);
        if (r->retrans < MAX_RETRANSMIT)
            heap_push(L, idx);
    }
}

/* Re-measures the REALTIME->MONOTONIC offset once a second (16 brackets, about 1 µs): only when
 * no send is due, and never between a datagram's arrival and its stamp's conversion. */
static void refresh_clock_map(loop_t *L, int64_t now) {
    if (now - L->cmap.measured_at < CLOCK_MAP_REFRESH_NS)
        return;
    clock_map_refresh(&L->cmap, now, CLOCK_MAP_REFRESH_NS);
    if (L->cmap.bracket_ns > L->g->map_bracket_ns)
        L->g->map_bracket_ns = L->cmap.bracket_ns;
}

/* DTLS (dtls.c): reuse -> encrypt into the pair's session and send; per-request -> start the
 * request's own session (its ClientHello is the exchange's first transmission, sent_ns; the
 * request itself leaves when the handshake is done, dtls_ready). sent_ns is read in the BIO
 * right before sendto(). */
static void send_next_dtls(loop_t *L, uint32_t idx) {
    ge_t *g = L->g;
    req_t *r = &g->reqs[idx];
    const int per_request = g->dtls_opt.mode == DTLS_PER_REQUEST;
    for (int attempt = 0;; attempt++) {
        int64_t t;
        int rc = per_request ? dtls_start_req(g, idx, &t) : dtls_send_req(g, idx, &t);
        if (rc > 0) {
            r->sent_ns = t - g->start_mono;
            r->flags |= RF_SENT;
            progress_inc(g, PG_SENT);
            if (!per_request && g->retransmit && !g->non) {
                r->rtx_t0_ms = (uint16_t)(ACK_TIMEOUT_NS / NS_PER_MS + rng_next(L) % 1001);
                r->rtx_due = t + (int64_t)r->rtx_t0_ms * NS_PER_MS;
                heap_push(L, idx);
            }
            return;
        }
        if (rc < 0 && (errno == EAGAIN || errno == ENOBUFS || errno == EINTR) && attempt < 1000) {
            drain(L);
            continue;
        }
        finish(L, r, O_ERROR); /* no session (handshake failed) or a local failure: not sent */
        return;
    }
}

/* send request `next` now; the sent timestamp is read right before sendto() */
static void send_next(loop_t *L) {
    ge_t *g = L->g;
    uint32_t idx = (uint32_t)L->next;
    req_t *r = &g->reqs[idx];
    const endpoint_t *e = &g->eps[r->ep];
    L->next++;
    g->pairs[r->pair].sent++;
    L->outstanding++;
    if (g->dtls) {
        send_next_dtls(L, idx);
        return;
    }
    for (int attempt = 0;; attempt++) {
        int64_t t = mono_ns();
        if (sendto(g->socks[r->sock], g->arena + r->dgram_off, r->dgram_len, 0,
                   (const struct sockaddr *)&e->addr, e->addrlen) >= 0) {
            r->sent_ns = t - g->start_mono;
            r->flags |= RF_SENT;
            progress_inc(g, PG_SENT);
            if (g->retransmit && !g->non) {
                r->rtx_t0_ms = (uint16_t)(ACK_TIMEOUT_NS / NS_PER_MS + rng_next(L) % 1001);
                r->rtx_due = t + (int64_t)r->rtx_t0_ms * NS_PER_MS;
                heap_push(L, idx);
            }
            return;
        }
        /* full socket buffer: read responses and retry briefly; otherwise a local failure */
        if ((errno == EAGAIN || errno == ENOBUFS || errno == EINTR) && attempt < 1000) {
            drain(L);
            continue;
        }
        finish(L, r, O_ERROR); /* local send failure: no sent_ns, no code */
        return;
    }
}

static void wait_for_start(loop_t *L) {
    ge_t *g = L->g;
    /* sleep until 1 ms before the start, then spin */
    struct timespec ts = ns_to_timespec(g->start_mono - NS_PER_MS);
    while (!ge_stop_signal && mono_ns() < g->start_mono - NS_PER_MS)
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    while (!ge_stop_signal && mono_ns() < g->start_mono)
        cpu_relax();
}

/* Called right after check_timeouts(), which leaves to_head == next or on a request that is not
 * done (retransmit_due() in between never finishes one): that request's timeout is the next. */
static int64_t next_deadline(const loop_t *L) {
    const ge_t *g = L->g;
    int64_t d = INT64_MAX;
    if (L->to_head < L->next)
        d = g->start_mono + g->reqs[L->to_head].sent_ns + g->timeout_ns;
    if (L->heap_n && g->reqs[L->heap[0]].rtx_due < d)
        d = g->reqs[L->heap[0]].rtx_due;
    if (g->dtls && dtls_next_timer(g) < d)
        d = dtls_next_timer(g);
    return d;
}

int loop_run(ge_t *g) {
    loop_t *L = calloc(1, sizeof *L);
    if (!L) {
        fprintf(stderr, "gateway-emulator: out of memory\n");
        return 1;
    }
    L->g = g;
    L->rng = g->salt | 1;
    int rc = 1;
    L->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (L->epfd < 0 || ep_hash_build(L) < 0)
        goto out;
    for (size_t s = 0; s < g->nsocks; s++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)s};
        if (epoll_ctl(L->epfd, EPOLL_CTL_ADD, g->socks[s], &ev) < 0)
            goto out;
    }
    L->direct = g->nsocks <= 2;
    for (int i = 0; i < BATCH; i++) {
        L->iov[i].iov_base = L->buf[i];
        L->iov[i].iov_len = RXBUF;
        L->msgs[i].msg_hdr.msg_iov = &L->iov[i];
        L->msgs[i].msg_hdr.msg_iovlen = 1;
        L->msgs[i].msg_hdr.msg_name = &L->src[i];
        L->msgs[i].msg_hdr.msg_control = L->ctl[i].b;
    }
    clock_map_init(&L->cmap);
    g->map_bracket_ns = L->cmap.bracket_ns;
    if (g->retransmit && !g->non) {
        L->heap = malloc(g->n * sizeof *L->heap);
        if (!L->heap)
            goto out;
    }
    /* one reusable PDU for parsing responses; grow it once now, not on the hot path */
    L->pdu = coap_pdu_init(0, 0, 0, RXBUF + 64);
    if (!L->pdu)
        goto out;
    {
        uint8_t warm[RXBUF];
        memset(warm, 0, sizeof warm);
        warm[0] = 0x40;
        warm[1] = 0x45;
        (void)coap_pdu_parse(COAP_PROTO_UDP, warm, sizeof warm, L->pdu);
    }
    if (g->wait == WAIT_HYBRID)
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    rc = 0;
    /* Lock what the loop uses, now that it is all allocated: no page faults on the hot path.
     * Best effort, and never MCL_FUTURE: under RLIMIT_MEMLOCK (8 MiB in a default container)
     * that made every later allocation fail once the trace's arrays outgrew it. */
    g->memory_locked = mlockall(MCL_CURRENT) == 0;

    progress_set(g, PG_STATE, ST_WAITING);
    wait_for_start(L);
    progress_set(g, PG_STATE, ST_SENDING);

    const int busy = g->wait == WAIT_BUSY;
    int burst = 0;
    while (L->next < g->n && !ge_stop_signal) {
        int64_t due = g->start_mono + g->reqs[L->next].sched_ns;
        int64_t now = mono_ns();
        if (now >= due && burst < SENDS_BEFORE_DRAIN) {
            send_next(L);
            burst++;
            continue;
        }
        burst = 0;
        drain(L);
        now = mono_ns();
        check_timeouts(L, now);
        retransmit_due(L, now);
        if (g->dtls)
            dtls_timers(g, now);
        refresh_clock_map(L, now);
        if (!busy && due - now > g->spin_ns) {
            int64_t until = due - g->spin_ns, d = next_deadline(L);
            wait_until(L, d < until ? d : until);
        }
    }

    progress_set(g, PG_STATE, ST_DRAINING);
    while (L->outstanding > 0 && !ge_stop_signal) {
        drain(L);
        int64_t now = mono_ns();
        check_timeouts(L, now);
        retransmit_due(L, now);
        if (g->dtls)
            dtls_timers(g, now);
        refresh_clock_map(L, now);
        if (!busy && L->outstanding > 0) {
            int64_t d = next_deadline(L);
            if (d - now > DRAIN_WAIT_CAP_NS)
                d = now + DRAIN_WAIT_CAP_NS;
            wait_until(L, d);
        }
    }
    g->end_mono = mono_ns();

    /* interrupted: what is not finished gets its honest outcome (see README) */
    int64_t rel = g->end_mono - g->start_mono;
    for (size_t i = 0; i < g->n; i++) {
        req_t *r = &g->reqs[i];
        if (r->flags & RF_DONE)
            continue;
        if (!(r->flags & RF_SENT)) {
            r->outcome = O_UNSENT;
            r->flags |= RF_DONE;
        } else {
            finish(L, r, rel - r->sent_ns >= g->timeout_ns ? O_TIMEOUT : O_ERROR);
        }
    }
    progress_set(g, PG_STATE, ST_DONE);
out:
    if (rc)
        fprintf(stderr, "gateway-emulator: cannot set up the event loop: %s\n", strerror(errno));
    if (g->memory_locked)
        munlockall();
    if (L->pdu)
        coap_delete_pdu(L->pdu);
    if (L->epfd >= 0)
        close(L->epfd);
    free(L->heap);
    free(L->ep_hash);
    free(L);
    return rc;
}
