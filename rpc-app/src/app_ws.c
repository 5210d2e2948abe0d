/* app_ws.c - wot-rpcapp's applications on their own WebSockets (--transport websocket,
 * docs/CONNECTED.md "Applications on their own WebSockets", CONTRACTS §3d).
 *
 * Each application holds one WebSocket: the Upgrade to --ws-path with --ws-header lines
 * (common/ws_handshake.h, the 101 and Sec-WebSocket-Accept checked), then
 * - out: each RPC is ONE masked text frame. wslay's frame API encodes it (header, mask key
 *   from the process's PRNG, masked payload) into the caller's buffer through a staging send
 *   callback that takes every byte, so the frame goes out in one send() the caller makes and
 *   stamps, exactly as an HTTP request: sent only when written whole. One frame context for
 *   the whole process: after a whole frame it holds no state (allocated once, at start).
 * - in: a wslay event context per application (allocated when its WebSocket opens, not per
 *   message) reads what the server sends: a ping is answered, a close ends the connection,
 *   and every text or binary frame is ONE in-order ack of the oldest RPC frame not yet acked
 *   (ra_ack: the HTTP path's response to its request), classified by the configured texts:
 *   --ack-rejected (the RPC ends rejected), --ack-unheard (taken, nobody subscribed: counted
 *   as nchan's 202), else accepted. --no-acks: the server answers nothing; every frame on the
 *   socket is counted as an event and RPC frames wait for no answer. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <wslay/wslay.h>

#include "rpcapp.h"

static struct {
    const struct ra_config *cfg;
    struct ra_stats *st;
    wslay_frame_context_ptr fc;    /* encodes RPC frames into out[] (staging) */
    uint8_t *out;
    size_t cap, len;
} W;

/* ---- encoding an RPC frame (wslay's frame API, into a buffer) ---- */

static ssize_t stage(const uint8_t *data, size_t len, int flags, void *u) {
    (void)flags;
    (void)u;
    if (W.len + len > W.cap)
        return WSLAY_ERR_INVALID_ARGUMENT;
    memcpy(W.out + W.len, data, len);
    W.len += len;
    return (ssize_t)len;
}

static ssize_t no_recv(uint8_t *buf, size_t len, int flags, void *u) {
    (void)buf, (void)len, (void)flags, (void)u;
    return -1;                     /* never called: the frame context only encodes */
}

static int frame_mask(uint8_t *buf, size_t len, void *u) {
    (void)u;
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(ra_rnd() >> 24);
    return 0;
}

static const struct wslay_frame_callbacks frame_cb = {
    .send_callback = stage, .recv_callback = no_recv, .genmask_callback = frame_mask};

void aw_init(const struct ra_config *cfg, struct ra_stats *st) {
    W.cfg = cfg;
    W.st = st;
    if (cfg->transport == TR_WEBSOCKET && wslay_frame_context_init(&W.fc, &frame_cb, NULL))
        W.fc = NULL;               /* aw_frame then fails: every RPC unsent_write */
}

/* The whole frame of message msg into out: its length, 0 when it cannot go now (no room, or
 * a control frame of the event context (a pong, a close) is still half written: a frame of
 * ours would cut into it). */
size_t aw_frame(struct ra_app *a, char *out, size_t cap, const char *msg, size_t len) {
    wslay_event_context_ptr ev = a->ws;
    if (!W.fc || !ev)
        return 0;
    if (wslay_event_want_write(ev) && (wslay_event_send(ev) || wslay_event_want_write(ev)))
        return 0;
    W.out = (uint8_t *)out;
    W.cap = cap;
    W.len = 0;
    struct wslay_frame_iocb io = {.fin = 1, .opcode = WSLAY_TEXT_FRAME, .mask = 1,
                                  .payload_length = len, .data = (const uint8_t *)msg,
                                  .data_length = len};
    ssize_t n = wslay_frame_send(W.fc, &io);
    if (n != (ssize_t)len) {       /* cannot happen with room for it: start the next afresh */
        wslay_frame_context_free(W.fc);
        if (wslay_frame_context_init(&W.fc, &frame_cb, NULL))
            W.fc = NULL;
        return 0;
    }
    return W.len;
}

/* ---- the server's side of the application's WebSocket (wslay's event API) ---- */

static ssize_t ev_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *u) {
    (void)flags;
    struct ra_app *a = u;
    if (a->hoff < a->hlen) {       /* first the frames that arrived with the Upgrade's answer */
        size_t left = (size_t)(a->hlen - a->hoff), k = left < len ? left : len;
        memcpy(buf, a->head + a->hoff, k);
        a->hoff = (uint16_t)(a->hoff + k);
        return (ssize_t)k;
    }
    ssize_t n = recv(a->fd, buf, len, MSG_DONTWAIT);
    if (n > 0) {
        W.st->bytes_in += (uint64_t)n;
        return n;
    }
    if (n == 0)                    /* EOF: the server closed the connection */
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    else
        wslay_event_set_error(ctx, errno == EAGAIN || errno == EINTR ? WSLAY_ERR_WOULDBLOCK
                                                                     : WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
}

static ssize_t ev_send(wslay_event_context_ptr ctx, const uint8_t *d, size_t len, int flags,
                       void *u) {
    (void)flags;
    struct ra_app *a = u;
    ssize_t n = send(a->fd, d, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
        W.st->bytes_out += (uint64_t)n;
        return n;
    }
    wslay_event_set_error(ctx, errno == EAGAIN || errno == EINTR ? WSLAY_ERR_WOULDBLOCK
                                                                  : WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
}

static int ev_mask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *u) {
    (void)ctx;
    return frame_mask(buf, len, u);
}

static int holds(const struct wslay_event_on_msg_recv_arg *m, const char *text) {
    size_t n = text ? strlen(text) : 0;
    return n && n <= m->msg_length && memmem(m->msg, m->msg_length, text, n);
}

static void ev_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *m,
                   void *u) {
    (void)ctx;
    if (m->opcode != WSLAY_TEXT_FRAME && m->opcode != WSLAY_BINARY_FRAME)
        return;                    /* ping answered, close handled by wslay */
    if (!W.cfg->acks) {
        W.st->events_in++;         /* a server that acks nothing: whatever it sends is counted */
        return;
    }
    ra_ack(u, holds(m, W.cfg->ack_rejected) ? ACK_REJECTED
              : holds(m, W.cfg->ack_unheard) ? ACK_UNHEARD : ACK_OK);
}

static const struct wslay_event_callbacks ev_cb = {
    .recv_callback = ev_recv, .send_callback = ev_send, .genmask_callback = ev_mask,
    .on_msg_recv_callback = ev_msg};

/* the Upgrade, once the TCP connect completed */
static int upgrade(struct ra_app *a) {
    int err = 0;
    socklen_t l = sizeof err;
    getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &err, &l);
    char req[2048];
    ws_make_key(a->key, &(uint64_t){ra_rnd()});
    size_t n = ws_request(req, sizeof req, W.cfg->host, W.cfg->ws_path, a->key,
                          W.cfg->ws_headers);
    if (err || !n || send(a->fd, req, n, MSG_NOSIGNAL) != (ssize_t)n)
        return -1;
    W.st->bytes_out += n;
    a->upgrading = 1;
    return ra_watch(a->fd, &a->events, EPOLLIN, a);
}

/* the Upgrade's answer: the 101 checked, the event context made; 1 open, 0 more to read */
static int answer(struct ra_app *a) {
    ssize_t n = recv(a->fd, a->head + a->hlen, sizeof a->head - a->hlen, MSG_DONTWAIT);
    if (n <= 0)
        return n < 0 && errno == EAGAIN ? 0 : -1;
    W.st->bytes_in += (uint64_t)n;
    a->hlen = (uint16_t)(a->hlen + n);
    size_t end = http_head_end(a->head, a->hlen);
    const char *why;
    if (!end)
        return a->hlen == sizeof a->head ? -1 : 0;
    if (ws_check_response(a->head, end, a->key, &why)) {
        static int told;           /* once: the same answer for every application */
        if (!told++)
            fprintf(stderr, "wot-rpcapp: an application's WebSocket to %s refused: %s\n",
                    W.cfg->ws_path, why);
        return -1;
    }
    wslay_event_context_ptr ws;
    if (wslay_event_context_client_init(&ws, &ev_cb, a))
        return -1;
    wslay_event_config_set_max_recv_msg_length(ws, 1 << 16);
    a->ws = ws;
    a->upgrading = 0;
    a->hoff = (uint16_t)end;       /* frames that came with the 101 are read first */
    a->state = AS_THINK;           /* open: its RPCs may go */
    return 1;
}

int aw_event(struct ra_app *a, uint32_t ev) {
    if (a->state == AS_CONNECTING && !a->upgrading)
        return upgrade(a);
    if (!a->ws) {
        int r = answer(a);
        if (r <= 0)
            return r;
        if (a->hoff == a->hlen)
            return ra_watch(a->fd, &a->events, EPOLLIN, a);
        ev = EPOLLIN;
    }
    wslay_event_context_ptr ws = a->ws;
    int rc = 0;
    if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))
        rc = wslay_event_recv(ws);
    if (rc == 0 && (ev & EPOLLOUT))
        rc = wslay_event_send(ws);
    if (rc || (!wslay_event_want_read(ws) && !wslay_event_want_write(ws)))
        return -1;
    return ra_watch(a->fd, &a->events, EPOLLIN | (wslay_event_want_write(ws) ? EPOLLOUT : 0), a);
}

void aw_free(struct ra_app *a) {
    if (a->ws)
        wslay_event_context_free(a->ws);
    a->ws = NULL;
    a->upgrading = 0;
    a->hoff = 0;
}
