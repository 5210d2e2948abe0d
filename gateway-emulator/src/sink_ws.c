/* sink_ws.c - the notification sink's WebSocket subscriptions (--websocket NAME=ws://HOST:PORT/
 * PATH; RFC 6455 client side with Debian's wslay): the opening handshake is done before the
 * run (a 101 within 5 s, else the sink stops, naming it); then every text or binary message is
 * scanned for ids. The bytes are read here with their kernel receive stamp (wslay's recv
 * callback reads through us), so a message's ids get the stamp of the read that completed it;
 * wslay buffers a message (it allocates) only after that stamp was taken. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "rxstamp.h"
#include "sink.h"

typedef struct {
    sink_t *S;
    uint32_t sub;
    uint8_t pending[SINK_HEAD_MAX]; /* bytes read with the handshake's head that follow it */
    size_t npending, pos;
    int64_t t;  /* the stamp of the last read */
    int kernel;
    wslay_event_context_ptr ctx;
} ws_t;

static ws_t *ws_of[SINK_MAX_SUBS];

static void found(void *ctx, uint64_t id) {
    ws_t *w = ctx;
    sink_note(w->S, w->sub, id, w->t, w->kernel);
}

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *ud) {
    (void)flags;
    ws_t *w = ud;
    if (w->pos < w->npending) {
        size_t k = w->npending - w->pos < len ? w->npending - w->pos : len;
        memcpy(buf, w->pending + w->pos, k);
        w->pos += k;
        return (ssize_t)k;
    }
    struct iovec iov = {buf, len};
    rxstamp_ctl_t ctl;
    struct msghdr m = rxstamp_msg(&iov, &ctl);
    ssize_t k = recvmsg(w->S->sub[w->sub].fd, &m, MSG_DONTWAIT);
    if (k > 0) {
        int64_t rt = rxstamp_realtime_ns(&m);
        w->kernel = rt != 0;
        w->t = rt ? clock_map_to_mono(&w->S->map, rt) : mono_ns();
        w->S->sub[w->sub].bytes += (uint64_t)k;
        return k;
    }
    wslay_event_set_error(ctx, k < 0 && (errno == EAGAIN || errno == EINTR)
                                   ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *ud) {
    (void)flags;
    ws_t *w = ud;
    ssize_t k = send(w->S->sub[w->sub].fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0)
        wslay_event_set_error(ctx, errno == EAGAIN ? WSLAY_ERR_WOULDBLOCK
                                                   : WSLAY_ERR_CALLBACK_FAILURE);
    return k;
}

static int genmask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *ud) {
    (void)ctx, (void)ud;
    for (size_t i = 0; i < len; i++) /* masking hides nothing here (RFC 6455 §10.3) */
        buf[i] = (uint8_t)rand();
    return 0;
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *a,
                   void *ud) {
    (void)ctx;
    ws_t *w = ud;
    if (a->opcode != WSLAY_TEXT_FRAME && a->opcode != WSLAY_BINARY_FRAME)
        return; /* ping/pong/close: wslay answers them */
    sink_sub_t *s = &w->S->sub[w->sub];
    s->messages++;
    sink_scan_feed(&s->scan, a->msg, a->msg_length, found, w);
    sink_scan_end(&s->scan, found, w);
}

/* the opening handshake on a connected blocking socket: 0 ok (101), else -1 (said) */
static int handshake(sink_sub_t *s, ws_t *w, const char *port) {
    char req[768];
    int n = snprintf(req, sizeof req,
                     "GET /%s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: d2JzaW5rLW5vdGlmeS0wMQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\n\r\n", s->path, s->host, port);
    struct timeval tv = {5, 0};
    setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (send(s->fd, req, (size_t)n, MSG_NOSIGNAL) != n)
        return -1;
    size_t got = 0;
    char head[SINK_HEAD_MAX];
    char *end = NULL;
    while (!end && got < sizeof head - 1) {
        ssize_t k = recv(s->fd, head + got, sizeof head - 1 - got, 0);
        if (k <= 0)
            break;
        got += (size_t)k;
        head[got] = 0;
        end = strstr(head, "\r\n\r\n");
    }
    if (!end || strncmp(head, "HTTP/1.1 101", 12)) {
        fprintf(stderr, "notify-sink: --websocket %s=%s answered '%.40s', expected 'HTTP/1.1 "
                        "101' (a WebSocket upgrade)\n", s->name, s->spec, got ? head : "nothing");
        return -1;
    }
    s->status = 101;
    w->npending = got - (size_t)(end + 4 - head);
    memcpy(w->pending, end + 4, w->npending);
    return 0;
}

int sink_ws_open(sink_t *S, uint32_t si, const char *port) {
    sink_sub_t *s = &S->sub[si];
    ws_t *w = calloc(1, sizeof *w);
    if (!w)
        return 1;
    w->S = S;
    w->sub = si;
    ws_of[si] = w;
    if (handshake(s, w, port) < 0)
        return 1;
    fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK);
    struct wslay_event_callbacks cb = {recv_cb, send_cb, genmask_cb, NULL, NULL, NULL, on_msg};
    if (wslay_event_context_client_init(&w->ctx, &cb, w) != 0)
        return 1;
    s->ready = 1;
    return 0;
}

void sink_ws_read(sink_t *S, uint32_t si) {
    ws_t *w = ws_of[si];
    if (wslay_event_recv(w->ctx) != 0 || !wslay_event_want_read(w->ctx)) {
        S->sub[si].errors++; /* closed or failed: no more notifications from it */
        return;
    }
    if (wslay_event_want_write(w->ctx))
        wslay_event_send(w->ctx); /* a pong or the close reply */
}

/* messages already read with the handshake (the server may send at once) */
void sink_ws_pending(sink_t *S, uint32_t si) {
    if (ws_of[si] && ws_of[si]->npending)
        sink_ws_read(S, si);
}
