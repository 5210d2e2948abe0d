/* observe.c - observations (RFC 7641) in the GE: trace OBSERVE / CANCEL lines, the
 * notifications that arrive for them, and their outputs (notifications.csv, observe.json).
 *
 * Loading (may allocate): an OBSERVE line is a GET with Observe: 0 and its own token; a CANCEL
 * line is a GET with Observe: 1 that carries the token of the oldest still-open OBSERVE with
 * the same device_id and the identical URI (FIFO; tracegen gives each observer its own
 * "?o=<k>" query, so the pairing is exact). A CANCEL without an open OBSERVE is bad input.
 *
 * Hot path (no allocation): every message carrying an OBSERVE's token comes here from
 * loop.c's handle(). The first response finishes the OBSERVE request (its outcome, code and
 * received_ns as for any request); every later one with an Observe option is a notification:
 * recorded into a preallocated array (received time, sequence number, type), compared with
 * the observation's last sequence number (RFC 7641 3.4, 24-bit serial arithmetic) to count
 * gaps (missing notifications), reordered and duplicate ones. CON notifications are ACKed,
 * or RST once the CANCEL has been sent (RFC 7641 3.6). The response to the CANCEL (the ACK
 * with its MID, or a response without Observe option after it was sent) finishes the CANCEL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <coap3/coap.h>

#include "ge.h"

#define SEQ_HALF (1u << 23)
enum { NF_AFTER_CANCEL = 1, NF_REORDERED = 2, NF_DUPLICATE = 4, NF_FIRST = 8 };

typedef struct {
    int64_t recv_ns;     /* read by the loop (user space), relative to the start instant */
    uint32_t obs;        /* the OBSERVE request's index */
    uint32_t seq;        /* Observe option value */
    uint32_t rx_wait_ns; /* recv_ns - the kernel receive stamp (saturated), with has_kstamp */
    uint8_t type, code, flags, has_kstamp;
} notif_t;

typedef struct {
    uint32_t cancel;   /* index of the CANCEL request, UINT32_MAX: none in the trace */
    uint32_t last_seq; /* highest (newest) sequence number seen */
    uint32_t notifications, gaps, reordered, duplicates;
    uint8_t seen, established;
} obs_t;

struct observe_s {
    /* loading: per URI a FIFO of open OBSERVEs (request indices), linked through next[] */
    uint32_t *head, *tail;
    size_t nuri_cap;
    uint32_t *next;
    size_t next_cap;
    /* per OBSERVE request index: its observation slot; per CANCEL: its OBSERVE */
    uint32_t *link; /* n entries: OBSERVE -> slot, CANCEL -> OBSERVE index, else UINT32_MAX */
    obs_t *o;
    size_t nobs;
    notif_t *rec;
    size_t cap, nrec;
    uint64_t dropped, acks, rsts, total, after_cancel, gaps, reordered, duplicates;
};

static int grow_u32(uint32_t **a, size_t *cap, size_t need, uint32_t fill) {
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < need)
        nc *= 2;
    uint32_t *p = realloc(*a, nc * sizeof *p);
    if (!p)
        return -1;
    for (size_t i = *cap; i < nc; i++)
        p[i] = fill;
    *a = p;
    *cap = nc;
    return 0;
}

int observe_note(ge_t *g, uint32_t idx, int method, uint32_t uri, uint32_t dev, const char **why) {
    if (!g->obs && !(g->obs = calloc(1, sizeof *g->obs)))
        return -1;
    struct observe_s *S = g->obs;
    size_t hc = S->nuri_cap, tc = S->nuri_cap;
    if (grow_u32(&S->head, &hc, uri + 1, UINT32_MAX) < 0 ||
        grow_u32(&S->tail, &tc, uri + 1, UINT32_MAX) < 0)
        return -1;
    S->nuri_cap = hc;
    size_t nc = S->next_cap;
    if (grow_u32(&S->next, &nc, idx + 1, UINT32_MAX) < 0)
        return -1;
    size_t lc = S->next_cap;
    if (grow_u32(&S->link, &lc, idx + 1, UINT32_MAX) < 0)
        return -1;
    S->next_cap = nc;
    if (method == M_OBSERVE) {
        if (S->tail[uri] == UINT32_MAX)
            S->head[uri] = idx;
        else
            S->next[S->tail[uri]] = idx;
        S->tail[uri] = idx;
        S->link[idx] = (uint32_t)S->nobs++;
        return 0;
    }
    uint32_t o = S->head[uri];
    if (o == UINT32_MAX || g->reqs[o].device != dev) {
        *why = "CANCEL without an open OBSERVE of the same device_id and uri, expected an earlier "
               "OBSERVE line with the identical uri (CANCEL ends the oldest open one)";
        return -1;
    }
    S->head[uri] = S->next[o];
    if (S->head[uri] == UINT32_MAX)
        S->tail[uri] = UINT32_MAX;
    S->link[idx] = o;
    return 0;
}

uint32_t observe_token_index(const ge_t *g, uint32_t idx) {
    if (g->obs && g->reqs[idx].method == M_CANCEL)
        return g->obs->link[idx];
    return idx;
}

int observe_prepare(ge_t *g) {
    struct observe_s *S = g->obs;
    if (!S)
        return 0;
    size_t lc = S->next_cap;
    if (grow_u32(&S->link, &lc, g->n, UINT32_MAX) < 0)
        goto oom;
    S->o = calloc(S->nobs ? S->nobs : 1, sizeof *S->o);
    if (!S->o)
        goto oom;
    for (size_t k = 0; k < S->nobs; k++)
        S->o[k].cancel = UINT32_MAX;
    for (size_t i = 0; i < g->n; i++)
        if (g->reqs[i].method == M_CANCEL)
            S->o[S->link[S->link[i]]].cancel = (uint32_t)i;
    S->cap = g->max_notifications;
    if (S->cap) { /* reserved, not committed: pages are touched as records arrive */
        void *p = mmap(NULL, S->cap * sizeof *S->rec, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            goto oom;
        S->rec = p;
    }
    free(S->head);
    free(S->tail);
    free(S->next);
    S->head = S->tail = S->next = NULL;
    return 0;
oom:
    fprintf(stderr, "gateway-emulator: out of memory preparing %zu observations\n", S->nobs);
    return 1;
}

static int get_seq(const coap_pdu_t *pdu, uint32_t *seq) {
    coap_opt_iterator_t it;
    coap_opt_t *o = coap_check_option(pdu, COAP_OPTION_OBSERVE, &it);
    if (!o)
        return 0;
    *seq = coap_decode_var_bytes(coap_opt_value(o), coap_opt_length(o)) & 0xFFFFFF;
    return 1;
}

/* RFC 7641 3.4 ordering on the observation; returns the flags of this notification */
static uint8_t order(struct observe_s *S, obs_t *o, uint32_t seq) {
    if (!o->seen) {
        o->seen = 1;
        o->last_seq = seq;
        return NF_FIRST;
    }
    uint32_t d = (seq - o->last_seq) & 0xFFFFFF;
    if (d == 0) {
        o->duplicates++;
        S->duplicates++;
        return NF_DUPLICATE;
    }
    if (d < SEQ_HALF) { /* newer: d - 1 numbers skipped */
        o->gaps += d - 1;
        S->gaps += d - 1;
        o->last_seq = seq;
        return 0;
    }
    o->reordered++; /* older than the newest: arrived late, fills one counted gap */
    S->reordered++;
    if (o->gaps) {
        o->gaps--;
        S->gaps--;
    }
    return NF_REORDERED;
}

req_t *observe_on_message(ge_t *g, uint32_t idx, int type, uint16_t mid, const void *pdu_v,
                          int64_t t, int64_t kt, int *reply) {
    struct observe_s *S = g->obs;
    const coap_pdu_t *pdu = pdu_v;
    req_t *r = &g->reqs[idx];
    obs_t *o = &S->o[S->link[idx]];
    req_t *c = o->cancel != UINT32_MAX ? &g->reqs[o->cancel] : NULL;
    int cancelled = c && (c->flags & RF_SENT);
    uint32_t seq = 0;
    int has_seq = get_seq(pdu, &seq);
    *reply = cancelled ? COAP_MESSAGE_RST : COAP_MESSAGE_ACK;
    if (cancelled && !(c->flags & RF_DONE) &&
        ((type == COAP_MESSAGE_ACK && mid == c->mid) || (type != COAP_MESSAGE_ACK && !has_seq))) {
        *reply = COAP_MESSAGE_ACK; /* the response to our CANCEL */
        return c;
    }
    if (!(r->flags & RF_DONE)) { /* the registration's response */
        if (type == COAP_MESSAGE_ACK && mid != r->mid)
            return NULL;
        o->established = has_seq && coap_pdu_get_code(pdu) == COAP_RESPONSE_CODE_CONTENT;
        if (has_seq)
            order(S, o, seq);
        return r;
    }
    if (!has_seq || type == COAP_MESSAGE_ACK) /* not a notification (e.g. a stale ACK) */
        return NULL;
    uint8_t fl = order(S, o, seq);
    if (cancelled) {
        fl |= NF_AFTER_CANCEL;
        S->after_cancel++;
    }
    o->notifications++;
    S->total++;
    if (type == COAP_MESSAGE_CON) {
        if (*reply == COAP_MESSAGE_ACK)
            S->acks++;
        else
            S->rsts++;
    }
    if (S->nrec < S->cap) {
        notif_t *n = &S->rec[S->nrec++];
        n->recv_ns = t - g->start_mono;
        /* the kernel stamp: a burst of notifications read in one recvmmsg() batch shares t */
        int64_t w = t - kt;
        n->has_kstamp = kt > 0;
        n->rx_wait_ns = kt <= 0 || w <= 0 ? 0 : w >= UINT32_MAX ? UINT32_MAX : (uint32_t)w;
        n->obs = idx;
        n->seq = seq;
        n->type = (uint8_t)type;
        n->code = (uint8_t)coap_pdu_get_code(pdu);
        n->flags = fl;
    } else {
        S->dropped++;
    }
    return NULL;
}

int observe_write(const ge_t *g) {
    const struct observe_s *S = g->obs;
    if (!S)
        return 0;
    char path[OUT_PATH_MAX];
    FILE *f = outfile_open(g, "notifications.csv", path);
    if (!f)
        return 1;
    static const char *TYPE[] = {"con", "non", "ack", "rst"};
    fputs("observation,device,path,seq,received_ns,type,code,flags,received_kernel_ns\n", f);
    for (size_t i = 0; i < S->nrec; i++) {
        const notif_t *n = &S->rec[i];
        const req_t *r = &g->reqs[n->obs];
        fprintf(f, "%u,%u,%s,%u,%lld,%s,%u.%02u,", n->obs, r->device, g->uris[r->path_id].path,
                n->seq, (long long)n->recv_ns, TYPE[n->type & 3], n->code >> 5, n->code & 31);
        int first = 1;
        if (n->flags & NF_AFTER_CANCEL)
            fputs("after_cancel", f), first = 0;
        if (n->flags & NF_REORDERED)
            fputs(first ? "reordered" : "|reordered", f), first = 0;
        if (n->flags & NF_DUPLICATE)
            fputs(first ? "duplicate" : "|duplicate", f);
        if (n->has_kstamp)
            fprintf(f, ",%lld\n", (long long)(n->recv_ns - (int64_t)n->rx_wait_ns));
        else
            fputs(",\n", f);
    }
    if (outfile_close(f, path))
        return 1;
    size_t est = 0;
    for (size_t k = 0; k < S->nobs; k++)
        est += S->o[k].established;
    if (!(f = outfile_open(g, "observe.json", path)))
        return 1;
    fprintf(f,
            "{\"observations\": %zu, \"established\": %zu, \"notifications\": %llu, "
            "\"recorded\": %zu, \"dropped\": %llu, \"capacity\": %zu, \"gaps\": %llu, "
            "\"reordered\": %llu, \"duplicates\": %llu, \"after_cancel\": %llu, "
            "\"acks_sent\": %llu, \"rsts_sent\": %llu}\n",
            S->nobs, est, (unsigned long long)S->total, S->nrec, (unsigned long long)S->dropped,
            S->cap, (unsigned long long)S->gaps, (unsigned long long)S->reordered,
            (unsigned long long)S->duplicates, (unsigned long long)S->after_cancel,
            (unsigned long long)S->acks, (unsigned long long)S->rsts);
    return outfile_close(f, path);
}

void observe_free(ge_t *g) {
    struct observe_s *S = g->obs;
    if (!S)
        return;
    free(S->head);
    free(S->tail);
    free(S->next);
    free(S->link);
    free(S->o);
    free(S->rec);
    free(S);
    g->obs = NULL;
}
