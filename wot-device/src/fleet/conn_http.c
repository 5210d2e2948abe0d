/* conn_http.c - a connected device over HTTP/1.1: a subscription held open (GET with
 * "TE: chunked"; every chunk of the 200 response's chunked body is one message, decoded by
 * http_chunked.h, or with a delimiter the body is one stream cut into messages at it,
 * msg_frame.h) and one keep-alive connection whose POSTs carry the device's replies,
 * heartbeats and events (pipelined; each response is read and its status counted). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "conn.h"

#define HEAD_CAP 1024
#define PUB_HEAD_CAP 512
#define OBUF_MAX (256u << 10)     /* POST bytes the server has not taken: beyond, give up */
#define READS_PER_EVENT 4

static __thread struct cn_loop *cur;
static __thread uint32_t feed_gen;   /* the session hc_feed decodes for */

int cn_http_send_request(struct cn_loop *l, struct cn_device *d) {
    int n = snprintf(l->tx, sizeof l->tx, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/plain\r\n"
                     "TE: chunked\r\n%s\r\n", d->path, d->host,
                     d->attach_headers ? d->attach_headers : "");
    if (n <= 0 || (size_t)n >= sizeof l->tx ||
        send(d->sub.fd, l->tx, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) != n)
        return -1;
    d->c.bytes_out += (uint64_t)n;
    d->sub.hbuf = malloc(HEAD_CAP);
    d->sub.hlen = 0;
    d->sub.state = CS_HEAD;
    return d->sub.hbuf ? 0 : -1;
}

/* a session's receive state with a delimiter: the chunk decoder and the message framer,
 * allocated together at attach (d->hc points at it) */
struct cn_rx {
    struct hc_decoder hc;
    struct mf_framer fr;
};

static void on_chunk(void *user, const char *head, size_t len, uint32_t size) {
    struct cn_device *d = user;
    if (d->gen == feed_gen && !d->dlen)   /* not after the session ended under the decoder */
        cn_on_message(cur, d, head, len, size);
}

static void on_framed(void *user, const char *head, size_t len, uint32_t size) {
    struct cn_device *d = user;
    if (d->gen == feed_gen)
        cn_on_message(cur, d, head, len, size);
}

/* chunk data with a delimiter: messages wherever it falls; one that never ends is the
 * server's protocol error (counted), the framer's memory stays fixed */
static void on_data(void *user, const char *p, size_t n) {
    struct cn_device *d = user;
    if (d->gen != feed_gen)
        return;
    struct cn_rx *rx = (struct cn_rx *)d->hc;
    if (mf_feed(&rx->fr, d->delim, d->dlen, p, n, on_framed, d))
        cn_disconnect(cur, d, CC_PROTOCOL);
}

/* feeds body bytes to the decoder; -1 when the session ended */
static int feed(struct cn_loop *l, struct cn_device *d, const char *buf, size_t len) {
    uint32_t gen = d->gen;
    struct hc_decoder *hc = d->hc;
    feed_gen = gen;
    d->hc_busy = 1;
    int r = hc_feed_data(hc, buf, len, on_chunk, d->dlen ? on_data : NULL, d);
    d->hc_busy = 0;
    if (gen != d->gen) {          /* ended by a reply's POST failing: free what close left */
        free(hc);
        return -1;
    }
    if (r) {
        cn_disconnect(l, d, r < 0 ? CC_PROTOCOL : CC_SERVER_CLOSED);
        return -1;
    }
    return 0;
}

static void sub_head(struct cn_loop *l, struct cn_device *d) {
    struct cn_conn *c = &d->sub;
    size_t end = cn_read_head(l, d, HEAD_CAP);
    if (!end)
        return;
    char te[32];
    if (http_status(c->hbuf, end) != 200 ||
        http_header(c->hbuf, end, "Transfer-Encoding", te, sizeof te) || strcmp(te, "chunked")) {
        cn_disconnect(l, d, CC_PROTOCOL);   /* not a chunked subscription */
        return;
    }
    d->hc = calloc(1, d->dlen ? sizeof(struct cn_rx) : sizeof *d->hc);
    if (!d->hc) {
        cn_disconnect(l, d, CC_TESTBED);
        return;
    }
    c->state = CS_OPEN;
    size_t rest = c->hlen - end;
    char *hb = c->hbuf;
    c->hbuf = NULL;
    c->hlen = 0;
    /* the attach message first; a POST that fails ends the session (nothing left to feed).
     * What came with the head is stamped by the read that brought it (l->rs, cn_read_head's;
     * the attach's send reads nothing) */
    if (cn_on_attached(l, d) == 0 && rest)
        feed(l, d, hb + end, rest);
    free(hb);
}

static void sub_read(struct cn_loop *l, struct cn_device *d) {
    for (int i = 0; i < READS_PER_EVENT; i++) {
        ssize_t n = cn_recv(l, d, &d->sub, l->rx, sizeof l->rx);   /* stamps it: l->rs */
        if (n <= 0 || feed(l, d, (const char *)l->rx, (size_t)n))
            return;
    }
}

/* responses to the POSTs: a head (status, Content-Length), then that many body bytes */
static int pub_responses(struct cn_loop *l, struct cn_device *d, const char *p, size_t len) {
    struct cn_conn *c = &d->pub;
    while (len) {
        if (c->body_left) {
            size_t k = len < c->body_left ? len : c->body_left;
            c->body_left -= (uint32_t)k;
            p += k;
            len -= k;
            continue;
        }
        c->hbuf[c->hlen++] = *p++;
        len--;
        size_t end = c->hlen >= 4 ? http_head_end(c->hbuf + c->hlen - 4, 4) : 0;
        if (!end) {
            if (c->hlen == PUB_HEAD_CAP) {
                cn_disconnect(l, d, CC_PROTOCOL);
                return -1;
            }
            continue;
        }
        int st = http_status(c->hbuf, c->hlen);
        char cl[24];
        unsigned long long v = 0;
        if (st < 0 || !http_header(c->hbuf, c->hlen, "Transfer-Encoding", cl, sizeof cl) ||
            (!http_header(c->hbuf, c->hlen, "Content-Length", cl, sizeof cl) &&
             sscanf(cl, "%llu", &v) != 1) || v > OBUF_MAX) {
            cn_disconnect(l, d, CC_PROTOCOL);   /* only Content-Length bodies are expected */
            return -1;
        }
        if (st / 100 != 2)
            d->c.posts_rejected++;
        if (c->inflight)
            c->inflight--;
        c->body_left = (uint32_t)v;
        c->hlen = 0;
    }
    (void)l;
    return 0;
}

void cn_http_flush(struct cn_loop *l, struct cn_device *d, struct cn_conn *c) {
    while (c->ooff < c->olen) {
        ssize_t n = send(c->fd, c->obuf + c->ooff, c->olen - c->ooff, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        if (n < 0) {
            cn_disconnect(l, d, cn_cause_of_errno(errno));
            return;
        }
        d->c.bytes_out += (uint64_t)n;
        c->ooff += (uint32_t)n;
    }
    if (c->ooff == c->olen)
        c->ooff = c->olen = 0;
    if (cn_watch(l, c, EPOLLIN | (c->olen ? EPOLLOUT : 0)))
        cn_disconnect(l, d, CC_TESTBED);
}

void cn_http_on_event(struct cn_loop *l, struct cn_conn *c, uint32_t ev) {
    struct cn_device *d = c->dev;
    cur = l;
    if (c->kind == CK_SUB && d->proto == CN_CHUNKED) {
        if (c->state == CS_HEAD)
            sub_head(l, d);
        else
            sub_read(l, d);
        return;
    }
    uint32_t gen = d->gen;
    if (c->kind == CK_SUB) {      /* a held-open POST (CN_STREAM): its response, its backlog */
        if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
            if (c->state == CS_HEAD)
                sub_head(l, d);
            else
                sub_read(l, d);
        }
        if (gen == d->gen && c->state != CS_DOWN && (ev & EPOLLOUT))
            cn_http_flush(l, d, c);
        return;
    }
    if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        ssize_t n = cn_recv(l, d, c, l->rx, sizeof l->rx);
        if (n < 0 || (n > 0 && pub_responses(l, d, (const char *)l->rx, (size_t)n)))
            return;
    }
    if (gen == d->gen && (ev & EPOLLOUT))
        cn_http_flush(l, d, c);
}

/* appends to the POST backlog; -1 when it would pass OBUF_MAX */
static int backlog(struct cn_conn *c, const char *p, size_t n) {
    if (c->olen + n > OBUF_MAX)
        return -1;
    if (c->olen + n > c->ocap) {
        uint32_t cap = c->ocap ? c->ocap : 1024;
        while (cap < c->olen + n)
            cap *= 2;
        char *nb = realloc(c->obuf, cap);
        if (!nb)
            return -1;
        c->obuf = nb;
        c->ocap = cap;
    }
    memcpy(c->obuf + c->olen, p, n);
    c->olen += (uint32_t)n;
    return 0;
}

int cn_http_put(struct cn_loop *l, struct cn_device *d, struct cn_conn *c, struct iovec *iov,
                int n) {
    size_t done = 0, total = 0;
    for (int i = 0; i < n; i++)
        total += iov[i].iov_len;
    int live = c->state != CS_CONNECTING;   /* else written once connected (on_connected) */
    if (live && c->olen == 0) {
        ssize_t w = writev(c->fd, iov, n);
        if (w < 0 && errno != EAGAIN && errno != EINTR) {
            l->tx_state = TX_FAILED;
            cn_disconnect(l, d, cn_cause_of_errno(errno));
            return -1;
        }
        done = w > 0 ? (size_t)w : 0;
        d->c.bytes_out += done;
    }
    if (done == total)
        return 0;
    l->tx_state = TX_QUEUED;            /* the rest waits in the backlog (events: outcome queued) */
    for (int i = 0; i < n; i++) {
        size_t skip = done < iov[i].iov_len ? done : iov[i].iov_len;
        done -= skip;
        if (iov[i].iov_len > skip &&
            backlog(c, (const char *)iov[i].iov_base + skip, iov[i].iov_len - skip)) {
            l->tx_state = TX_FULL;
            cn_disconnect(l, d, CC_PROTOCOL);   /* the server stopped taking this device's bytes */
            return -1;
        }
    }
    if (live && cn_watch(l, c, EPOLLIN | EPOLLOUT)) {
        l->tx_state = TX_FAILED;
        cn_disconnect(l, d, CC_TESTBED);
        return -1;
    }
    return 0;
}

/* reply_path with "{id}" replaced by id ("none" for what is not a reply) into out */
static const char *target(const struct cn_device *d, const char *id, char *out, size_t cap) {
    const char *p = strstr(d->reply_path, "{id}");
    if (!p)
        return d->reply_path;
    int n = snprintf(out, cap, "%.*s%s%s", (int)(p - d->reply_path), d->reply_path,
                     id ? id : "none", p + 4);
    return n > 0 && (size_t)n < cap ? out : NULL;
}

int cn_http_post(struct cn_loop *l, struct cn_device *d, const char *body, size_t len,
                 const char *id) {
    struct cn_conn *c = &d->pub;
    if (c->state != CS_OPEN && c->state != CS_CONNECTING)
        return -1;
    char head[768], path[256], idh[128] = "";
    const char *tgt = target(d, id, path, sizeof path);
    if (id && l->set->reply_id == CR_HEADER)
        snprintf(idh, sizeof idh, "%s: %s\r\n", l->set->id_header, id);
    int hn = tgt ? snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: "
                            "text/plain\r\n%sContent-Length: %zu\r\n\r\n",
                            l->set->post_method ? l->set->post_method : "POST", tgt, d->host,
                            idh, len) : -1;
    if (hn <= 0 || (size_t)hn >= sizeof head)
        return -1;
    c->inflight++;
    struct iovec iov[2] = {{head, (size_t)hn}, {(void *)body, len}};
    return cn_http_put(l, d, c, iov, 2);
}

void cn_http_close(struct cn_device *d) {
    if (!d->hc_busy)              /* else feed() frees it when hc_feed returns */
        free(d->hc);
    d->hc = NULL;
}
