/* coapx.c - CoAP exchanges over datagrams (see coapx.h and README "Design" 5, 6, 8, 9): the
 * response path of a plaintext CoAP message, empty ACK/RST, and the retransmission min-heap.
 * Runs on the loop thread: everything preallocated in coapx_new. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <coap3/coap.h>

#include "clock.h" /* common/clock.h */
#include "coapx.h"

#define PDU_MAX 4096
#define ACK_TIMEOUT_NS (2LL * NS_PER_S)
#define MAX_RETRANSMIT 4

struct coapx {
    loop_t *L;
    ge_t *g;
    const struct coap_wire *wire;
    void *ctx;
    coap_pdu_t *pdu; /* one reusable PDU for parsing responses */
    int rtx;         /* CON with --retransmit: RFC 7252 retransmissions */
    uint32_t *heap;  /* their min-heap on rtx_due */
    size_t heap_n;
    uint64_t rng;
};

coapx_t *coapx_new(loop_t *L, ge_t *g, const struct coap_wire *wire, void *ctx) {
    coapx_t *X = calloc(1, sizeof *X);
    if (!X)
        return NULL;
    X->L = L;
    X->g = g;
    X->wire = wire;
    X->ctx = ctx;
    X->rng = g->salt | 1;
    X->rtx = g->retransmit && !g->non;
    size_t hcap = g->cap > g->n ? g->cap : g->n; /* closed loop: the record table's capacity */
    if (X->rtx && !(X->heap = malloc((hcap ? hcap : 1) * sizeof *X->heap)))
        goto fail;
    /* grow the PDU once now, not on the hot path */
    X->pdu = coap_pdu_init(0, 0, 0, PDU_MAX + 64);
    if (!X->pdu)
        goto fail;
    uint8_t warm[PDU_MAX];
    memset(warm, 0, sizeof warm);
    warm[0] = 0x40;
    warm[1] = 0x45;
    (void)coap_pdu_parse(COAP_PROTO_UDP, warm, sizeof warm, X->pdu);
    return X;
fail:
    coapx_free(X);
    errno = ENOMEM;
    return NULL;
}

void coapx_free(coapx_t *X) {
    if (!X)
        return;
    if (X->pdu)
        coap_delete_pdu(X->pdu);
    free(X->heap);
    free(X);
}

/* ---- retransmission heap ---- */
static void heap_push(coapx_t *X, uint32_t idx) {
    req_t *R = X->g->reqs;
    R[idx].flags |= RF_INHEAP;
    size_t i = X->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (R[X->heap[p]].rtx_due <= R[idx].rtx_due)
            break;
        X->heap[i] = X->heap[p];
        i = p;
    }
    X->heap[i] = idx;
}

/* an entry of idx is in the heap with a later key: make it due earlier (block.c follow-ups);
 * O(heap size) to find it, then a sift-up */
static void heap_decrease(coapx_t *X, uint32_t idx, int64_t due) {
    req_t *R = X->g->reqs;
    size_t i = 0;
    while (i < X->heap_n && X->heap[i] != idx)
        i++;
    if (i == X->heap_n)
        return;
    R[idx].rtx_due = due;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (R[X->heap[p]].rtx_due <= due)
            break;
        X->heap[i] = X->heap[p];
        i = p;
    }
    X->heap[i] = idx;
}

static uint32_t heap_pop(coapx_t *X) {
    req_t *R = X->g->reqs;
    uint32_t top = X->heap[0], last = X->heap[--X->heap_n];
    size_t i = 0, n = X->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && R[X->heap[c + 1]].rtx_due < R[X->heap[c]].rtx_due)
            c++;
        if (R[last].rtx_due <= R[X->heap[c]].rtx_due)
            break;
        X->heap[i] = X->heap[c];
        i = c;
    }
    if (n)
        X->heap[i] = last;
    R[top].flags &= (uint8_t)~RF_INHEAP;
    return top;
}

static uint64_t rng_next(coapx_t *X) { return xorshift64(&X->rng); }

/* RFC 7252 4.2: initial timeout uniform in [ACK_TIMEOUT, 1.5 ACK_TIMEOUT] (ms resolution) */
static uint16_t initial_timeout_ms(coapx_t *X) {
    return (uint16_t)(ACK_TIMEOUT_NS / NS_PER_MS + rng_next(X) % 1001);
}

void coapx_sent(coapx_t *X, uint32_t idx, int64_t t) {
    if (!X->rtx)
        return;
    req_t *r = &X->g->reqs[idx];
    r->rtx_t0_ms = initial_timeout_ms(X);
    r->rtx_due = t + (int64_t)r->rtx_t0_ms * NS_PER_MS;
    heap_push(X, idx);
}

/* ---- the response path ---- */
static void send_empty(coapx_t *X, int sock, int ep, int type, uint16_t mid,
                       const struct sockaddr_storage *to, socklen_t tolen) {
    uint8_t m[4] = {(uint8_t)(1 << 6 | type << 4), 0, (uint8_t)(mid >> 8), (uint8_t)mid};
    X->wire->send_empty(X->ctx, sock, ep, m, to, tolen);
}

/* a block-wise follow-up (block.c patched the request's datagram): send it now, schedule its
 * own retransmissions (the heap entry of an earlier block is re-keyed when it pops) */
static void send_block(coapx_t *X, req_t *r) {
    ge_t *g = X->g;
    uint32_t idx = (uint32_t)(r - g->reqs);
    r->flags &= (uint8_t)~RF_ACKED;
    int64_t t;
    if (X->wire->send_req(X->ctx, idx, &t) <= 0) {
        loop_finish(X->L, r, O_ERROR);
        return;
    }
    if (X->rtx) {
        r->rtx_t0_ms = initial_timeout_ms(X);
        int64_t due = t + (int64_t)r->rtx_t0_ms * NS_PER_MS;
        block_rtx_set(g, idx, due, 0);
        if (!(r->flags & RF_INHEAP)) {
            r->rtx_due = due;
            heap_push(X, idx);
        } else if (r->rtx_due > due) { /* an earlier block's backed-off entry: bring it forward */
            heap_decrease(X, idx, due);
        } /* else: it pops first and is re-keyed to this block's due time */
    }
}

/* the request of an empty ACK / RST: by (socket, endpoint, MID) among the pair's requests
 * whose send turn has come */
static req_t *by_mid(coapx_t *X, int sock, int ep, uint16_t mid) {
    ge_t *g = X->g;
    if (X->wire->req_of_sock) { /* per-request DTLS: the slot's one request */
        int64_t ri = X->wire->req_of_sock(X->ctx, sock);
        if (ri >= 0) {
            req_t *r = &g->reqs[ri];
            return r->flags & RF_DONE ? NULL : r;
        }
    }
    int k = sock % g->ports_used;
    pair_t *p = &g->pairs[(size_t)ep * (size_t)g->ports_used + (size_t)k];
    size_t due = loop_due_count(X->L);
    req_t *hit = NULL;
    for (uint32_t j = (uint16_t)(mid - p->mid_base); j < p->count; j += 65536) {
        uint32_t ri = g->pair_reqs[p->first + j];
        if (ri >= due) /* a pair's requests are in index order */
            break;
        req_t *r = &g->reqs[ri];
        if (!(r->flags & RF_DONE))
            hit = r;
    }
    return hit;
}

/* the response's times: t = read by the loop (user space), kt = kernel receive stamp (0 = none) */
static void set_received(coapx_t *X, req_t *r, int64_t t, int64_t kt) {
    r->recv_ns = t - X->g->start_mono;
    if (kt > 0) {
        int64_t w = t - kt;
        r->rx_wait_ns = w <= 0 ? 0 : w >= UINT32_MAX ? UINT32_MAX : (uint32_t)w;
        r->flags |= RF_KSTAMP;
    }
}

void coapx_datagram(coapx_t *X, int sock, int ep, const uint8_t *d, size_t len,
                    const struct sockaddr_storage *src, socklen_t srclen, int64_t t, int64_t kt) {
    ge_t *g = X->g;
    if (len < 4 || (d[0] >> 6) != 1)
        return;
    int type = (d[0] >> 4) & 3, code = d[1];
    uint16_t mid = (uint16_t)(d[2] << 8 | d[3]);
    if (code == 0) { /* empty message */
        req_t *r = (type == COAP_MESSAGE_ACK || type == COAP_MESSAGE_RST) ? by_mid(X, sock, ep, mid)
                                                                           : NULL;
        if (!r) {
            if (type == COAP_MESSAGE_CON) /* CoAP ping */
                send_empty(X, sock, ep, COAP_MESSAGE_RST, mid, src, srclen);
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
            set_received(X, r, t, kt);
            loop_finish(X->L, r, O_RESET);
        }
        return;
    }
    if (!coap_pdu_parse(COAP_PROTO_UDP, d, len, X->pdu)) {
        if (type == COAP_MESSAGE_CON)
            send_empty(X, sock, ep, COAP_MESSAGE_RST, mid, src, srclen);
        return;
    }
    coap_bin_const_t tok = coap_pdu_get_token(X->pdu);
    req_t *r = NULL;
    int known = 0;
    if (tok.length == 8 && (code >> 5) >= 2) {
        uint32_t hi = (uint32_t)tok.s[0] << 24 | (uint32_t)tok.s[1] << 16 |
                      (uint32_t)tok.s[2] << 8 | tok.s[3];
        uint32_t lo = (uint32_t)tok.s[4] << 24 | (uint32_t)tok.s[5] << 16 |
                      (uint32_t)tok.s[6] << 8 | tok.s[7];
        uint32_t idx = lo ^ (uint32_t)g->salt;
        if (hi == (uint32_t)(g->salt >> 32) && idx < loop_due_count(X->L)) {
            req_t *c = &g->reqs[idx];
            if (c->method == M_OBSERVE && c->ep == ep && c->sock == sock &&
                (c->flags & RF_SENT)) { /* registration response, notification or cancel reply */
                int reply;
                r = observe_on_message(g, idx, type, mid, X->pdu, t, kt, &reply);
                if (type == COAP_MESSAGE_CON)
                    send_empty(X, sock, ep, reply, mid, src, srclen);
                if (r && !(r->flags & RF_DONE)) {
                    r->code = (uint8_t)code;
                    set_received(X, r, t, kt);
                    loop_finish(X->L, r, (code >> 5) == 2 ? O_OK : O_ERROR);
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
        send_empty(X, sock, ep, known ? COAP_MESSAGE_ACK : COAP_MESSAGE_RST, mid, src, srclen);
    if (!r)
        return;
    int more = g->blk ? block_follow_up(g, (uint32_t)(r - g->reqs), X->pdu, code) : 0;
    if (more) { /* the next block of a block-wise transfer (block.c), or a stale copy */
        if (more > 0)
            send_block(X, r);
        return;
    }
    r->code = (uint8_t)code;
    set_received(X, r, t, kt);
    loop_finish(X->L, r, (code >> 5) == 2 ? O_OK : O_ERROR);
}

/* ---- retransmissions ---- */
void coapx_timers(coapx_t *X, int64_t now) {
    ge_t *g = X->g;
    while (X->heap_n && g->reqs[X->heap[0]].rtx_due <= now) {
        uint32_t idx = heap_pop(X);
        req_t *r = &g->reqs[idx];
        int64_t bdue, tx;
        int bk = g->blk ? block_rtx(g, idx, &bdue) : -1;
        if (bk >= 0) { /* a follow-up block in flight: its own RFC 7252 schedule */
            if (r->flags & (RF_DONE | RF_ACKED) || bk >= MAX_RETRANSMIT)
                continue;
            if (bdue > now) { /* an earlier block's entry: re-key to this block's due time */
                r->rtx_due = bdue;
                heap_push(X, idx);
                continue;
            }
            int sent = X->wire->send_req(X->ctx, idx, &tx) > 0;
            if (sent && r->retrans < 255)
                r->retrans++;
            int64_t due = now + ((int64_t)r->rtx_t0_ms * NS_PER_MS << (bk + sent));
            block_rtx_set(g, idx, due, sent);
            if (bk + sent < MAX_RETRANSMIT) {
                r->rtx_due = due;
                heap_push(X, idx);
            }
            continue;
        }
        if (r->flags & (RF_DONE | RF_ACKED) || r->retrans >= MAX_RETRANSMIT)
            continue;
        if (X->wire->send_req(X->ctx, idx, &tx) > 0)
            r->retrans++;
        /* RFC 7252 4.2: the timeout doubles after every retransmission */
        r->rtx_due = now + ((int64_t)r->rtx_t0_ms * NS_PER_MS << r->retrans);
        if (r->retrans < MAX_RETRANSMIT)
            heap_push(X, idx);
    }
}

int64_t coapx_next_due(const coapx_t *X) {
    return X->heap_n ? X->g->reqs[X->heap[0]].rtx_due : INT64_MAX;
}
