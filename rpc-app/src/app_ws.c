/* app_ws.c - wot-rpcapp's applications on their own WebSockets (--transport websocket,
 * docs/CONNECTED.md "Applications on their own WebSockets", CONTRACTS §3d).
 *
 * Each application holds one WebSocket: the Upgrade to --ws-path with --ws-header lines
 * (common/ws_handshake.h, the 101 and Sec-WebSocket-Accept checked), then, both ways through
 * wslay's frame API (Debian libwslay), nothing allocated per message:
 * - out: each RPC is ONE masked text frame, encoded (header, mask key from the process's PRNG,
 *   masked payload) into the caller's buffer through a staging send callback that takes every
 *   byte, so the frame goes out in one send() the caller makes and stamps, exactly as an HTTP
 *   request: sent only when written whole. One encoding context for the process: after a
 *   whole frame it holds no state. A pong is encoded and written whole the same way.
 * - in: a frame context per application (allocated when its WebSocket opens, with a fixed
 *   input buffer) parses what the server sends: a ping is answered with a pong of its
 *   payload, a close ends the connection, and every text or binary message is ONE in-order
 *   ack of the oldest RPC frame not yet acked (ra_ack: the HTTP path's response to its
 *   request), classified by the configured texts, looked for in its first RA_ACK_KEEP bytes:
 *   --ack-rejected (the RPC ends rejected), --ack-unheard (taken, nobody subscribed: counted
 *   as nchan's 202), else accepted. --no-acks: the server answers nothing; every message on
 *   the socket is counted as an event and RPC frames wait for no answer. */
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
    wslay_frame_context_ptr enc;   /* encodes frames into out[] (staging) */
    uint8_t *out;
    size_t cap, len;
} W;

/* ---- encoding a frame (into a buffer, written whole by the caller) ---- */

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
    return -1;                     /* never called: this context only encodes */
}

static int frame_mask(uint8_t *buf, size_t len, void *u) {
    (void)u;
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(ra_rnd() >> 24);
    return 0;
}

static const struct wslay_frame_callbacks enc_cb = {
    .send_callback = stage, .recv_callback = no_recv, .genmask_callback = frame_mask};

void aw_init(const struct ra_config *cfg, struct ra_stats *st) {
    W.cfg = cfg;
    W.st = st;
    if (cfg->transport == TR_WEBSOCKET && wslay_frame_context_init(&W.enc, &enc_cb, NULL))
        W.enc = NULL;              /* encode() then fails: every RPC unsent_write */
}

/* one whole masked frame of opcode op into out: its length, 0 when it does not fit */
static size_t encode(uint8_t op, char *out, size_t cap, const char *msg, size_t len) {
    if (!W.enc)
        return 0;
    W.out = (uint8_t *)out;
    W.cap = cap;
    W.len = 0;
    struct wslay_frame_iocb io = {.fin = 1, .opcode = op, .mask = 1, .payload_length = len,
                                  .data = (const uint8_t *)msg, .data_length = len};
    ssize_t n = wslay_frame_send(W.enc, &io);
    if (n != (ssize_t)len) {       /* no room: start the next frame afresh */
        wslay_frame_context_free(W.enc);
        if (wslay_frame_context_init(&W.enc, &enc_cb, NULL))
            W.enc = NULL;
        return 0;
    }
    return W.len;
}

size_t aw_frame(struct ra_app *a, char *out, size_t cap, const char *msg, size_t len) {
    return a->wf ? encode(WSLAY_TEXT_FRAME, out, cap, msg, len) : 0;
}

/* ---- what the server sends on the application's WebSocket ---- */

static ssize_t dec_recv(uint8_t *buf, size_t len, int flags, void *u) {
    (void)flags;
    struct ra_app *a = u;
    size_t k = ra_leftover(a->head, &a->hoff, a->hlen, buf, len);
    if (k)                         /* first the frames that arrived with the Upgrade's answer */
        return (ssize_t)k;
    ssize_t n = recv(a->fd, buf, len, MSG_DONTWAIT);
    if (n > 0) {
        W.st->bytes_in += (uint64_t)n;
        return n;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR))
        a->eof = 1;                /* the end, or an error: the connection is over */
    return -1;                     /* wslay: nothing to read now */
}

static const struct wslay_frame_callbacks dec_cb = {
    .send_callback = stage, .recv_callback = dec_recv, .genmask_callback = frame_mask};

static int holds(const struct ra_app *a, const char *text) {
    size_t n = text ? strlen(text) : 0;
    return n && n <= a->klen && memmem(a->keep, a->klen, text, n);
}

/* a whole data message: one ack (or, with --no-acks, an event) */
static void on_message(struct ra_app *a) {
    if (!W.cfg->acks) {
        W.st->events_in++;         /* a server that acks nothing: whatever it sends is counted */
        return;
    }
    ra_ack(a, holds(a, W.cfg->ack_rejected) ? ACK_REJECTED
              : holds(a, W.cfg->ack_unheard) ? ACK_UNHEARD : ACK_OK);
}

/* a piece of a frame: kept, and acted on once its frame (and message) is whole; -1: the
 * connection ends (a close, a pong that cannot be written whole) */
static int on_piece(struct ra_app *a, const struct wslay_frame_iocb *io) {
    int ctl = io->opcode & 0x8;
    if (ctl) {                     /* a control frame: at most 125 bytes (wslay checks) */
        memcpy(a->ctl + a->clen, io->data, io->data_length);
        a->clen = (uint8_t)(a->clen + io->data_length);
    } else {
        if (io->opcode != WSLAY_CONTINUATION_FRAME && a->fgot == 0)
            a->inmsg = 1, a->klen = 0;           /* a new message */
        size_t room = sizeof a->keep - a->klen;
        size_t k = io->data_length < room ? io->data_length : room;
        memcpy(a->keep + a->klen, io->data, k);
        a->klen = (uint16_t)(a->klen + k);
    }
    a->fgot += io->data_length;
    if (a->fgot < io->payload_length)
        return 0;                  /* more of this frame to come */
    a->fgot = 0;
    if (!ctl) {
        if (io->fin && a->inmsg) {
            a->inmsg = 0;
            on_message(a);
        }
        return 0;
    }
    uint8_t n = a->clen;
    a->clen = 0;
    if (io->opcode == WSLAY_CONNECTION_CLOSE)
        return -1;                 /* the server ends it (no close frame sent back) */
    if (io->opcode != WSLAY_PING)
        return 0;                  /* a pong: nothing to do */
    char pong[160];
    size_t len = encode(WSLAY_PONG, pong, sizeof pong, a->ctl, n);
    return len && send(a->fd, pong, len, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* every frame piece readable now; -1 when the connection is over */
static int read_frames(struct ra_app *a) {
    for (;;) {
        struct wslay_frame_iocb io;
        ssize_t r = wslay_frame_recv(a->wf, &io);
        if (r == WSLAY_ERR_WANT_READ)
            return a->eof ? -1 : 0;
        if (r < 0 || on_piece(a, &io))
            return -1;             /* a protocol error, a close */
    }
}

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

/* the Upgrade's answer: the 101 checked, the frame reader made; 1 open, 0 more to read */
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
    wslay_frame_context_ptr wf;
    if (wslay_frame_context_init(&wf, &dec_cb, a))
        return -1;
    a->wf = wf;
    a->upgrading = 0;
    a->hoff = (uint16_t)end;       /* frames that came with the 101 are read first */
    a->state = AS_THINK;           /* open: its RPCs may go */
    return 1;
}

int aw_event(struct ra_app *a, uint32_t ev) {
    (void)ev;
    if (a->state == AS_CONNECTING && !a->upgrading)
        return upgrade(a);
    if (!a->wf) {
        int r = answer(a);
        if (r <= 0)
            return r;
    }
    return read_frames(a);
}

void aw_free(struct ra_app *a) {
    if (a->wf)
        wslay_frame_context_free(a->wf);
    a->wf = NULL;
    a->upgrading = a->eof = a->inmsg = a->clen = 0;
    a->hoff = a->klen = 0;
    a->fgot = 0;
}
