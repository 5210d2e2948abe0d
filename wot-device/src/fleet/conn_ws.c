/* conn_ws.c - a connected device's WebSocket session (RFC 6455, client side).
 * The opening handshake is ws_handshake.h's; frames, masking (every client frame, mask from
 * the loop's PRNG), ping/pong (a ping from the server is answered by wslay) and the closing
 * handshake are wslay's event API. A close from the server, EOF, a reset or a malformed frame
 * end the session with that cause (conn_loop.c cn_disconnect). Reads carry the kernel's
 * receive stamp (tcpstamp.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <wslay/wslay.h>

#include "conn.h"

#define WS_QUEUE_MAX (256u << 10)   /* unwritten bytes of a device's WebSocket: beyond, give up */

#define HEAD_CAP 1024

/* the loop whose thread runs the callbacks (wslay's user data is the device) */
static __thread struct cn_loop *cur;
static __thread int cur_cause;    /* why the last callback failed */
/* inside wslay_event_recv: a reply queued by a callback is sent after it returns (wslay's
 * context must not be freed under it, so nothing may end the session from in there) */
static __thread int in_recv;

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
                       void *user) {
    (void)flags;
    struct cn_device *d = user;
    struct cn_conn *c = &d->sub;
    if (c->hlen) {                /* bytes that came with the handshake's answer (their
                                     stamps: the head's read, already in cur->rs) */
        size_t n = len < c->hlen ? len : c->hlen;
        memcpy(buf, c->hbuf, n);
        memmove(c->hbuf, c->hbuf + n, c->hlen - n);
        c->hlen = (uint16_t)(c->hlen - n);
        if (c->hlen == 0) {       /* the head buffer is not kept for the session */
            free(c->hbuf);
            c->hbuf = NULL;
        }
        return (ssize_t)n;
    }
    /* stamped (cur->rs): a message wslay completes from these bytes carries this read's
     * stamps; wslay reads only when the frame it parses needs more, so the read before a
     * message's callback is the one that brought its last bytes */
    ssize_t n = tcpstamp_recv(c->fd, buf, len, &cur->cmap, &cur->rs);
    if (n > 0) {
        d->c.bytes_in += (uint64_t)n;
        return n;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    cur_cause = n == 0 ? CC_SERVER_CLOSED : cn_cause_of_errno(errno);
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user) {
    struct cn_device *d = user;
    int f = MSG_DONTWAIT | MSG_NOSIGNAL | ((flags & WSLAY_MSG_MORE) ? MSG_MORE : 0);
    ssize_t n = send(d->sub.fd, data, len, f);
    if (n >= 0) {
        d->c.bytes_out += (uint64_t)n;
        return n;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    cur_cause = cn_cause_of_errno(errno);
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
}

static int genmask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user) {
    (void)ctx;
    (void)user;
    for (size_t i = 0; i < len; i++) {
        uint64_t x = cur->rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        cur->rng = x;
        buf[i] = (uint8_t)(x >> 24);
    }
    return 0;
}

static void on_msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *a,
                      void *user) {
    (void)ctx;
    struct cn_device *d = user;
    if (a->opcode == WSLAY_TEXT_FRAME || a->opcode == WSLAY_BINARY_FRAME)
        cn_on_message(cur, d, (const char *)a->msg, a->msg_length, a->msg_length);
    else if (a->opcode == WSLAY_PONG)
        d->c.pongs++;
    else if (a->opcode == WSLAY_CONNECTION_CLOSE)
        cur_cause = CC_SERVER_CLOSED;   /* wslay answers it; the session ends after that */
}

static const struct wslay_event_callbacks callbacks = {
    .recv_callback = recv_cb, .send_callback = send_cb, .genmask_callback = genmask_cb,
    .on_msg_recv_callback = on_msg_cb};

int cn_ws_send_request(struct cn_loop *l, struct cn_device *d) {
    ws_make_key(d->key, &l->rng);
    size_t n = ws_request(l->tx, sizeof l->tx, d->host, d->path, d->key,
                          d->attach_headers ? d->attach_headers : "");
    /* a fresh socket's send buffer takes a few hundred bytes whole */
    if (n == 0 || send(d->sub.fd, l->tx, n, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)n)
        return -1;
    d->c.bytes_out += n;
    d->sub.hbuf = malloc(HEAD_CAP);
    d->sub.hlen = 0;
    d->sub.state = CS_HEAD;
    return d->sub.hbuf ? 0 : -1;
}

/* the server's answer to the Upgrade: 101 with the right accept key opens the session */
static void on_head(struct cn_loop *l, struct cn_device *d) {
    struct cn_conn *c = &d->sub;
    size_t end = cn_read_head(l, d, HEAD_CAP);
    const char *why;
    if (!end)
        return;
    if (ws_check_response(c->hbuf, end, d->key, &why)) {
        cn_disconnect(l, d, CC_PROTOCOL);
        return;
    }
    memmove(c->hbuf, c->hbuf + end, c->hlen - end);  /* frames that came along */
    c->hlen = (uint16_t)(c->hlen - end);
    if (c->hlen == 0) {
        free(c->hbuf);
        c->hbuf = NULL;
    }
    wslay_event_context_ptr ws;
    if (wslay_event_context_client_init(&ws, &callbacks, d)) {
        cn_disconnect(l, d, CC_TESTBED);
        return;
    }
    wslay_event_config_set_max_recv_msg_length(ws, CN_REPLY_MAX);
    d->ws = ws;
    c->state = CS_OPEN;
    /* the attach message (if any) goes first; sending it may end the session */
    if (cn_on_attached(l, d) == 0 && c->hlen)
        cn_ws_on_event(l, d, EPOLLIN);
}

/* after wslay did its reads/writes: what to watch, or the end of the session */
static void settle(struct cn_loop *l, struct cn_device *d, int rc) {
    wslay_event_context_ptr ws = d->ws;
    if (rc != 0 || (!wslay_event_want_read(ws) && !wslay_event_want_write(ws))) {
        int cause = wslay_event_get_close_received(ws) ? CC_SERVER_CLOSED
                    : rc == WSLAY_ERR_CALLBACK_FAILURE ? cur_cause
                    : rc == WSLAY_ERR_NOMEM ? CC_TESTBED : CC_PROTOCOL;
        cn_disconnect(l, d, cause);
        return;
    }
    if (cn_watch(l, &d->sub, EPOLLIN | (wslay_event_want_write(ws) ? EPOLLOUT : 0)))
        cn_disconnect(l, d, CC_TESTBED);
}

void cn_ws_on_event(struct cn_loop *l, struct cn_device *d, uint32_t ev) {
    cur = l;
    cur_cause = CC_PROTOCOL;
    if (d->sub.state == CS_HEAD) {
        on_head(l, d);
        return;
    }
    if (!d->ws)
        return;
    int rc = 0;
    if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        in_recv = 1;
        rc = wslay_event_recv(d->ws);
        in_recv = 0;
    }
    /* also what the callbacks queued (replies of 0 µs service, pongs, a close answer) */
    if (rc == 0 && wslay_event_want_write(d->ws))
        rc = wslay_event_send(d->ws);
    settle(l, d, rc);
}

int cn_ws_send(struct cn_loop *l, struct cn_device *d, const char *msg, size_t len, int ping) {
    if (!d->ws || d->sub.state != CS_OPEN)
        return -1;
    /* the POST backlog's bound (conn_http.c OBUF_MAX) on what wslay holds unwritten: a server
     * that stopped reading ends the session (protocol) instead of growing the queue. Not
     * inside wslay_event_recv (the context must outlive its callbacks): what is queued there
     * answers what was just read, so it is bounded by the server's own sending. */
    if (!in_recv && wslay_event_get_queued_msg_length(d->ws) + len > WS_QUEUE_MAX) {
        l->tx_state = TX_FULL;
        cn_disconnect(l, d, CC_PROTOCOL);
        return -1;
    }
    struct wslay_event_msg m = {.opcode = ping ? WSLAY_PING : WSLAY_TEXT_FRAME,
                                .msg = (const uint8_t *)msg, .msg_length = len};
    int rc = wslay_event_queue_msg(d->ws, &m);   /* copies the message */
    if (in_recv)
        return rc == 0 ? 0 : -1;                  /* sent when wslay_event_recv returns */
    cur = l;
    cur_cause = CC_PROTOCOL;
    if (rc == 0)
        rc = wslay_event_send(d->ws);
    uint32_t gen = d->gen;
    settle(l, d, rc);
    if (gen != d->gen) {
        l->tx_state = TX_FAILED;
        return -1;
    }
    /* what wslay could not write now waits in its queue (an event's outcome: queued) */
    if (wslay_event_want_write(d->ws))
        l->tx_state = TX_QUEUED;
    return 0;
}

void cn_ws_close(struct cn_device *d) {
    if (d->ws)
        wslay_event_context_free(d->ws);
    d->ws = NULL;
}
