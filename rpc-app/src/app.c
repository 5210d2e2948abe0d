/* app.c - wot-rpcapp's event loop (rpcapp.h): the applications' keep-alive POST connections,
 * the WebSocket reply subscriptions (wslay), think/timeout timers in a min-heap and the
 * open-loop schedule behind one absolute timerfd, every RPC a preallocated row. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <netinet/tcp.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "rpcapp.h"
#include "rxstamp_pin.h"

#define NIL UINT32_MAX

volatile sig_atomic_t ra_stop;   /* SIGTERM/SIGINT: end now, pending RPCs time out, files kept */
#define EP_EVENTS 256

static struct {
    const struct ra_config *cfg;
    struct ra_app *apps;
    struct ra_sub *subs;
    struct ra_row *rows;
    size_t nrows;
    uint32_t *heap;                /* application indices, keyed by their wake_ns */
    uint32_t hn;
    uint32_t *slots;               /* every application's pend[] and resp[] (window each) */
    uint64_t next_arrival, t_stop; /* open loop: the next scheduled RPC */
    int ep, tfd;
    uint64_t rng, armed;
    struct ra_stats st;
    char tx[8192], rx[65536];
    size_t marker_len;
    tcpstamp_t rs;                 /* the stamps of the subscription read being decoded
                                      (tcpstamp.h); read_ns 0 between events */
    clock_map_t cmap;              /* the kernel's REALTIME stamps -> MONOTONIC */
    int stamp_pin, pin_on;         /* rxstamp_pin.h: the kernel's stamping held on */
} G;

static uint64_t rnd(void) {
    uint64_t x = G.rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return G.rng = x;
}

uint64_t ra_rnd(void) {
    return rnd();
}

/* ---- timers ---- */

/* One timer per application (its think time's end, or its pending RPC's timeout) in an
 * indexed min-heap: re-arming an application moves its entry, nothing stale accumulates. */
static void heap_place(uint32_t pos, uint32_t ai) {
    G.heap[pos] = ai;
    G.apps[ai].heap_pos = pos;
}

static void sift_up(uint32_t pos) {
    uint32_t ai = G.heap[pos];
    uint64_t at = G.apps[ai].wake_ns;
    while (pos > 0 && G.apps[G.heap[(pos - 1) / 2]].wake_ns > at) {
        heap_place(pos, G.heap[(pos - 1) / 2]);
        pos = (pos - 1) / 2;
    }
    heap_place(pos, ai);
}

static void sift_down(uint32_t pos) {
    uint32_t ai = G.heap[pos];
    uint64_t at = G.apps[ai].wake_ns;
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= G.hn)
            break;
        if (c + 1 < G.hn && G.apps[G.heap[c + 1]].wake_ns < G.apps[G.heap[c]].wake_ns)
            c++;
        if (G.apps[G.heap[c]].wake_ns >= at)
            break;
        heap_place(pos, G.heap[c]);
        pos = c;
    }
    heap_place(pos, ai);
}

static void set_timer(uint32_t ai, uint64_t at) {
    struct ra_app *a = &G.apps[ai];
    a->wake_ns = at;
    if (a->heap_pos == NIL) {
        heap_place(G.hn++, ai);
        sift_up(G.hn - 1);
    } else {
        sift_up(a->heap_pos);
        sift_down(G.apps[ai].heap_pos);
    }
}

static void heap_remove(uint32_t ai) {
    uint32_t pos = G.apps[ai].heap_pos;
    if (pos == NIL)
        return;
    G.apps[ai].heap_pos = NIL;
    if (--G.hn == pos)
        return;
    uint32_t moved = G.heap[G.hn];
    heap_place(pos, moved);
    sift_up(pos);
    sift_down(G.apps[moved].heap_pos);
}

static uint32_t heap_pop(void) {
    uint32_t top = G.heap[0];
    G.apps[top].heap_pos = NIL;
    if (--G.hn) {
        heap_place(0, G.heap[G.hn]);
        sift_down(0);
    }
    return top;
}

static int open_loop(void) {
    return G.cfg->rate > 0;
}

static void arm(void) {
    uint64_t next = G.hn ? G.apps[G.heap[0]].wake_ns : 0;
    if (open_loop() && G.next_arrival < G.t_stop && (!next || G.next_arrival < next))
        next = G.next_arrival;
    if (next == G.armed)
        return;
    struct itimerspec its = {.it_value = ns_to_timespec((int64_t)next)};
    timerfd_settime(G.tfd, TFD_TIMER_ABSTIME, &its, NULL);
    G.armed = next;
}

int ra_watch(int fd, uint32_t *cur, uint32_t events, void *ptr) {
    if (events == *cur)
        return 0;
    struct epoll_event e = {.events = events, .data.ptr = ptr};
    int r = epoll_ctl(G.ep, *cur ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &e);
    if (r == 0)
        *cur = events;
    return r;
}

static int tcp_connect(void) {
    const struct ra_config *c = G.cfg;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (c->source.sin_addr.s_addr) {
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        if (bind(fd, (const struct sockaddr *)&c->source, sizeof c->source)) {
            close(fd);
            return -1;
        }
    }
    if (connect(fd, (const struct sockaddr *)&c->server, sizeof c->server) && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- applications ---- */

/* uniform in (0, 1] */
static double unit(void) {
    return (double)((rnd() >> 11) + 1) * (1.0 / 9007199254740992.0);
}

/* open loop: the time to the next scheduled RPC */
static uint64_t gap_ns(void) {
    double mean = 1e9 / G.cfg->rate;
    return (uint64_t)(G.cfg->arrival == ARR_CONSTANT ? mean : -log(unit()) * mean);
}

static uint64_t think_ns(void) {
    const struct ra_config *c = G.cfg;
    uint64_t span = (uint64_t)(c->think_max_ms - c->think_min_ms) * 1000000ULL;
    return (uint64_t)c->think_min_ms * 1000000ULL + (span ? rnd() % (span + 1) : 0);
}

static uint64_t timeout_ns(void) {
    return (uint64_t)G.cfg->timeout_ms * 1000000ULL;
}

/* open loop: the application's timer is its oldest pending RPC's timeout, or none */
static void rearm(uint32_t ai) {
    struct ra_app *a = &G.apps[ai];
    if (a->npend)
        set_timer(ai, G.rows[a->pend[0]].send_ns + timeout_ns());
    else
        heap_remove(ai);
}

/* the application's i-th pending RPC ends: its one outcome */
static void end_rpc(struct ra_app *a, uint32_t i, uint8_t outcome, uint64_t now) {
    uint32_t ai = (uint32_t)(a - G.apps);
    struct ra_row *r = &G.rows[a->pend[i]];
    r->outcome = outcome;
    if (outcome == RO_OK)
        r->reply_ns = now;
    G.st.outcome[outcome]++;
    memmove(a->pend + i, a->pend + i + 1, (size_t)(a->npend - i - 1) * sizeof *a->pend);
    a->npend--;
    if (open_loop()) {
        rearm(ai);
    } else {
        a->state = AS_THINK;
        /* the think time starts when the application has the reply in hand (now), not at the
         * kernel's receive stamp an ok reply carries: the app's read delay is not thinking */
        a->due_ns = (uint64_t)mono_ns() + think_ns();
        set_timer(ai, a->due_ns);
    }
}

static void app_down(struct ra_app *a, uint64_t now) {
    G.st.app_disconnects++;
    while (a->npend)
        end_rpc(a, 0, RO_LOST, now);
    a->nresp = a->resp_head = 0;
    a->body_left = 0;
    a->hlen = 0;
    aw_free(a);
    if (a->fd >= 0)
        close(a->fd);
    a->fd = -1;
    a->state = AS_DOWN;
    a->events = 0;
}

/* template t with its "{id}" replaced by id, into out; returns the length, 0 when too long */
static size_t fill_id(char *out, size_t cap, const char *t, const char *id) {
    const char *p = strstr(t, "{id}");
    int n = p ? snprintf(out, cap, "%.*s%s%s", (int)(p - t), t, id, p + 4)
              : snprintf(out, cap, "%s", t);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* a uniformly chosen id of the devices it calls (a cell: only its own devices' ranges) */
static uint32_t pick_device(void) {
    const struct ra_config *c = G.cfg;
    uint32_t k = (uint32_t)(rnd() % c->dev_count), i = 0;
    while (k >= c->range_count[i])
        k -= c->range_count[i++];
    return c->range_first[i] + k;
}

/* template t with every "{device}" and "{id}" replaced, into out; the length, 0 when too long */
static size_t fill_frame(char *out, size_t cap, const char *t, const char *dev, const char *id) {
    size_t n = 0;
    while (*t) {
        const char *v = NULL;
        size_t skip = 1;
        if (t[0] == '{' && strncmp(t, "{id}", 4) == 0)
            v = id, skip = 4;
        else if (t[0] == '{' && strncmp(t, "{device}", 8) == 0)
            v = dev, skip = 8;
        size_t k = v ? strlen(v) : 1;
        if (n + k >= cap)
            return 0;
        memcpy(out + n, v ? v : t, k);
        n += k;
        t += skip;
    }
    return n;
}

/* the RPC's HTTP request written (one writev), its send time in *t_send and the write's result
 * in *n; returns the request's length */
static ssize_t http_request(struct ra_app *a, uint32_t dev, const char *id, uint64_t *t_send,
                            ssize_t *n) {
    const struct ra_config *c = G.cfg;
    char body[4096], fmt[256], path[256], idh[96] = "";
    /* the id where the config puts it: the body template's or the path's {id}, or a header */
    size_t blen = fill_id(body, sizeof body, c->body, id);
    snprintf(fmt, sizeof fmt, c->rpc_path, dev);
    fill_id(path, sizeof path, fmt, id);
    if (c->id_header)
        snprintf(idh, sizeof idh, "%s: %s\r\n", c->id_header, id);
    int hn;
    if (strcmp(c->method, "GET") == 0) {   /* everything in the target (webdis /PUBLISH/..) */
        blen = 0;
        hn = snprintf(G.tx, sizeof G.tx, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", path,
                      c->host, idh);
    } else {
        hn = snprintf(G.tx, sizeof G.tx, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: "
                      "text/plain\r\n%sContent-Length: %zu\r\n\r\n", c->method, path,
                      c->host, idh, blen);
    }
    struct iovec iov[2] = {{G.tx, (size_t)hn}, {body, blen}};
    *t_send = (uint64_t)mono_ns();
    *n = writev(a->fd, iov, 2);
    return (ssize_t)hn + (ssize_t)blen;
}

/* one RPC scheduled at sched: a row, sent now unless the application cannot take it */
static void send_rpc(struct ra_app *a, uint64_t sched) {
    const struct ra_config *c = G.cfg;
    uint32_t ai = (uint32_t)(a - G.apps);
    if (G.nrows >= c->max_rows) {
        if (!open_loop())
            a->state = AS_DOWN;    /* out of rows: this application stops (counted in summary) */
        return;
    }
    uint32_t dev = pick_device(), ri = (uint32_t)G.nrows++;
    struct ra_row *r = &G.rows[ri];
    *r = (struct ra_row){.sched_ns = sched, .app = ai, .seq = a->seq++, .device = dev};
    if (a->fd < 0 || a->state == AS_CONNECTING || a->state == AS_DOWN) {
        r->outcome = RO_LOST;      /* open loop: its connection is not up, never sent */
        G.st.outcome[RO_LOST]++;
        G.st.unsent_down++;
        return;
    }
    if (a->npend >= c->window || a->nresp >= c->window) {
        r->outcome = RO_OVERFLOW;  /* open loop: window RPCs already outstanding, never sent */
        G.st.outcome[RO_OVERFLOW]++;
        return;
    }
    char id[32];
    snprintf(id, sizeof id, "%u-%u", c->first_app + ai, r->seq);
    uint64_t t_send;
    ssize_t n, want;
    if (c->transport == TR_WEBSOCKET) {
        /* one masked text frame, the template's {device} and {id} filled (app_ws.c) */
        char msg[RA_FRAME_MAX], dv[16];
        snprintf(dv, sizeof dv, "%u", dev);
        size_t mlen = fill_frame(msg, sizeof msg, c->frame, dv, id);
        want = (ssize_t)(mlen ? aw_frame(a, G.tx, sizeof G.tx, msg, mlen) : 0);
        t_send = (uint64_t)mono_ns();
        n = want ? send(a->fd, G.tx, (size_t)want, MSG_DONTWAIT | MSG_NOSIGNAL) : -1;
    } else {
        want = http_request(a, dev, id, &t_send, &n);
    }
    if (n != want) {   /* a small request goes whole unless the server
                                               stopped reading this connection */
        /* not sent (failed or partial write): lost with no send_ns, counted unsent_write,
         * never in sent; its connection is ended (a partial request cannot be resumed) */
        r->outcome = RO_LOST;
        G.st.outcome[RO_LOST]++;
        G.st.unsent_write++;
        if (n > 0)
            G.st.bytes_out += (uint64_t)n;
        app_down(a, t_send);
        return;
    }
    r->send_ns = t_send;
    G.st.sent++;
    a->pend[a->npend++] = ri;
    if (c->transport == TR_HTTP || c->acks)   /* its answer (response, ack) is awaited */
        a->resp[(a->resp_head + a->nresp++) % c->window] = ri;
    G.st.bytes_out += (uint64_t)n;
    if (!open_loop()) {
        a->state = AS_WAIT;
        set_timer(ai, r->send_ns + timeout_ns());
    } else if (a->npend == 1) {
        rearm(ai);
    }
}

/* the application's pending RPC in row ri: its index in pend[], or -1 when it has ended */
static int pend_index(const struct ra_app *a, uint32_t ri) {
    for (uint32_t i = 0; i < a->npend; i++)
        if (a->pend[i] == ri)
            return (int)i;
    return -1;
}

/* the server's answer to a request (HTTP response, or an ack in the HTTP path's terms):
 * post_2xx counts the 2xx, post_202 the 202s (nchan: published, but no subscriber) */
static void count_status(int st) {
    if (st / 100 == 2)
        G.st.post_2xx++;
    if (st == 202)
        G.st.post_202++;
}

/* answers come in request order (pipelined): the oldest RPC awaiting one gets status st, and
 * a non-2xx ends it rejected; -1 when no RPC awaits an answer */
static int answer_oldest(struct ra_app *a, int st, uint64_t now) {
    if (!a->nresp)
        return -1;
    uint32_t ri = a->resp[a->resp_head];
    a->resp_head = (uint16_t)((a->resp_head + 1) % G.cfg->window);
    a->nresp--;
    G.rows[ri].status = (uint16_t)(st < 0 ? 0 : st);
    int pi = st / 100 != 2 ? pend_index(a, ri) : -1;
    if (pi >= 0)
        end_rpc(a, (uint32_t)pi, RO_REJECTED, now);
    return 0;
}

/* POST responses: head (status, Content-Length), then the body skipped */
static void app_read(struct ra_app *a) {
    uint64_t now = (uint64_t)mono_ns();
    ssize_t n = recv(a->fd, G.rx, sizeof G.rx, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        app_down(a, now);
        return;
    }
    G.st.bytes_in += (uint64_t)n;
    for (ssize_t i = 0; i < n; i++) {
        if (a->body_left) {
            size_t k = (size_t)(n - i) < a->body_left ? (size_t)(n - i) : a->body_left;
            a->body_left -= (uint32_t)k;
            i += (ssize_t)k - 1;
            continue;
        }
        if (a->hlen >= sizeof a->head) {
            app_down(a, now);
            return;
        }
        a->head[a->hlen++] = G.rx[i];
        if (a->hlen < 4 || !http_head_end(a->head + a->hlen - 4, 4))
            continue;
        int st = http_status(a->head, a->hlen);
        char cl[24] = "0";
        http_header(a->head, a->hlen, "Content-Length", cl, sizeof cl);
        a->body_left = (uint32_t)strtoul(cl, NULL, 10);
        a->hlen = 0;
        count_status(st);
        answer_oldest(a, st, now);
    }
}

/* websocket transport: the server's answer on the application's own WebSocket, one per RPC
 * frame in order (as an HTTP response per request): the oldest RPC not answered yet gets it.
 * Its rpc-log status and the counts say it in the HTTP path's terms: 200 accepted, 202
 * accepted but nobody subscribed (post_202; the RPC then times out unless a reply comes), 400
 * refused (the RPC ends rejected); post_2xx counts the first two. An ack with no RPC waiting
 * for one is counted unmatched. */
void ra_ack(struct ra_app *a, int cls) {
    if (!a->nresp) {
        G.st.unmatched++;
        return;
    }
    int st = cls == ACK_REJECTED ? 400 : cls == ACK_UNHEARD ? 202 : 200;
    count_status(st);
    answer_oldest(a, st, (uint64_t)mono_ns());
}

/* ---- replies on the WebSocket subscriptions ---- */

static void on_reply(const char *msg, size_t len) {
    /* stamped by the read that completed the message (its last bytes came with that read's
     * last segment): the kernel's stamp of it, else that read's time (tcpstamp.h) */
    tcpstamp_t st = G.rs.read_ns ? G.rs : (tcpstamp_t){(uint64_t)mono_ns(), 0};
    uint64_t now = tcpstamp_at(&st);
    const char *p = G.marker_len <= len ? memmem(msg, len, G.cfg->reply_marker, G.marker_len)
                                        : NULL;
    if (!p || p + G.marker_len >= msg + len || p[G.marker_len] < '0' || p[G.marker_len] > '9') {
        G.st.events_in++;          /* no RPC id: a device's event, heartbeat or attach relayed */
        return;
    }
    char *end;
    unsigned long app = strtoul(p + G.marker_len, &end, 10), seq;
    if (*end != '-' || app >= G.cfg->apps_total) {
        G.st.unmatched++;
        return;
    }
    if (app < G.cfg->first_app || app - G.cfg->first_app >= G.cfg->apps) {
        G.st.others++;             /* another process's application (another cell's) */
        return;
    }
    app -= G.cfg->first_app;
    seq = strtoul(end + 1, &end, 10);
    struct ra_app *a = &G.apps[app];
    for (uint32_t i = 0; i < a->npend; i++)
        if (G.rows[a->pend[i]].seq == seq) {
            struct ra_row *r = &G.rows[a->pend[i]];
            r->reply_read_ns = st.read_ns;
            r->kstamp = st.kernel_ns != 0;
            if (st.kernel_ns)
                G.st.reply_kernel++;
            else
                G.st.reply_user++;
            end_rpc(a, i, RO_OK, now);
            return;
        }
    G.st.late_replies++;           /* after its timeout, or a duplicate */
}

static ssize_t ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *u) {
    (void)flags;
    struct ra_sub *s = u;
    size_t k = ra_leftover(s->head, &s->hoff, s->hlen, buf, len);
    if (k)                         /* first the frames that arrived with the Upgrade's answer */
        return (ssize_t)k;
    /* wslay reads only when the frame it parses needs more bytes, so the read before a
     * message's callback brought its last bytes: its stamps are the message's */
    ssize_t n = tcpstamp_recv(s->fd, buf, len, &G.cmap, &G.rs);
    if (n > 0) {
        G.st.bytes_in += (uint64_t)n;
        return n;
    }
    wslay_event_set_error(ctx, n < 0 && (errno == EAGAIN || errno == EINTR)
                                   ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
}

static ssize_t ws_send(wslay_event_context_ptr ctx, const uint8_t *d, size_t len, int flags,
                       void *u) {
    (void)flags;
    struct ra_sub *s = u;
    ssize_t n = send(s->fd, d, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
        G.st.bytes_out += (uint64_t)n;
        return n;
    }
    wslay_event_set_error(ctx, errno == EAGAIN || errno == EINTR ? WSLAY_ERR_WOULDBLOCK
                                                                  : WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
}

static int ws_mask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *u) {
    (void)ctx;
    (void)u;
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(rnd() >> 24);
    return 0;
}

static void ws_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *a,
                   void *u) {
    (void)ctx;
    (void)u;
    if (a->opcode == WSLAY_TEXT_FRAME || a->opcode == WSLAY_BINARY_FRAME)
        on_reply((const char *)a->msg, a->msg_length);
}

static const struct wslay_event_callbacks ws_cb = {
    .recv_callback = ws_recv, .send_callback = ws_send, .genmask_callback = ws_mask,
    .on_msg_recv_callback = ws_msg};

/* a server that subscribes by message (webdis: ["SUBSCRIBE","reply.3"]) gets it first */
static int subscribe(struct ra_sub *s) {
    char msg[512];
    int n = snprintf(msg, sizeof msg, G.cfg->reply_subscribe, s->k);
    if (n <= 0 || (size_t)n >= sizeof msg)
        return -1;
    struct wslay_event_msg m = {.opcode = WSLAY_TEXT_FRAME, .msg = (const uint8_t *)msg,
                                .msg_length = (size_t)n};
    if (wslay_event_queue_msg(s->ws, &m))
        return -1;
    return wslay_event_send(s->ws) ? -1 : 0;
}

static int sub_event(struct ra_sub *s, uint32_t ev) {
    if (s->state == AS_CONNECTING) {
        int err = 0;
        socklen_t l = sizeof err;
        getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &l);
        char path[256];
        snprintf(path, sizeof path, G.cfg->reply_path, s->k);   /* k: its global shard */
        ws_make_key(s->key, &G.rng);
        size_t n = ws_request(G.tx, sizeof G.tx, G.cfg->host, path, s->key,
                              G.cfg->reply_headers);
        if (err || send(s->fd, G.tx, n, MSG_NOSIGNAL) != (ssize_t)n)
            return -1;
        s->state = AS_WAIT;
        return ra_watch(s->fd, &s->events, EPOLLIN, s);
    }
    if (!s->ws) {                  /* the Upgrade's answer */
        /* stamped: frames that came with the 101 are that read's (G.rs) */
        ssize_t n = tcpstamp_recv(s->fd, s->head + s->hlen, sizeof s->head - s->hlen, &G.cmap,
                                  &G.rs);
        if (n <= 0)
            return n < 0 && errno == EAGAIN ? 0 : -1;
        s->hlen = (uint16_t)(s->hlen + n);
        size_t end = http_head_end(s->head, s->hlen);
        const char *why;
        if (!end)
            return s->hlen == sizeof s->head ? -1 : 0;
        if (ws_check_response(s->head, end, s->key, &why)) {
            fprintf(stderr, "wot-rpcapp: reply subscription %u: %s\n", s->k, why);
            return -1;
        }
        wslay_event_context_ptr ws;
        if (wslay_event_context_client_init(&ws, &ws_cb, s))
            return -1;
        wslay_event_config_set_max_recv_msg_length(ws, 1 << 20);
        s->ws = ws;
        s->state = AS_THINK;       /* open */
        /* a message published right after the subscription can share the 101's segment: its
         * bytes are already read, so wslay must get them before the socket's next bytes */
        s->hoff = (uint16_t)end;
        if (G.cfg->reply_subscribe && subscribe(s))
            return -1;
        if (s->hoff == s->hlen)
            return ra_watch(s->fd, &s->events, EPOLLIN | (wslay_event_want_write(ws) ? EPOLLOUT : 0),
                         s);
        ev = EPOLLIN;
    }
    int rc = 0;
    if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))
        rc = wslay_event_recv(s->ws);
    if (rc == 0 && (ev & EPOLLOUT))
        rc = wslay_event_send(s->ws);
    if (rc || (!wslay_event_want_read(s->ws) && !wslay_event_want_write(s->ws)))
        return -1;
    return ra_watch(s->fd, &s->events, EPOLLIN | (wslay_event_want_write(s->ws) ? EPOLLOUT : 0), s);
}

/* ---- the run ---- */

static int write_outputs(uint64_t t_end);

static int all_subs_open(void) {
    for (uint32_t k = 0; k < G.cfg->shards; k++)
        if (!G.subs[k].ws)
            return 0;
    return 1;
}

int ra_run(const struct ra_config *c) {
    G.cfg = c;
    G.marker_len = strlen(c->reply_marker);
    G.rng = 0x2545F4914F6CDD1DULL ^ (uint64_t)mono_ns();
    clock_map_init(&G.cmap);
    /* the kernel stamps arriving segments only while some socket asks (and resumes a while
     * after one asks again): one socket holds it on for the run, waited for at most 200 ms */
    G.stamp_pin = rxstamp_pin(200 * NS_PER_MS, &G.pin_on);
    G.apps = calloc(c->apps, sizeof *G.apps);
    G.subs = calloc(c->shards, sizeof *G.subs);
    G.rows = calloc(c->max_rows, sizeof *G.rows);
    G.heap = calloc(c->apps, sizeof *G.heap);
    G.slots = calloc((size_t)c->apps * 2 * c->window, sizeof *G.slots);
    aw_init(c, &G.st);
    G.ep = epoll_create1(EPOLL_CLOEXEC);
    G.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    uint32_t tev = 0;
    if (!G.apps || !G.subs || !G.rows || !G.heap || !G.slots || G.ep < 0 || G.tfd < 0 ||
        ra_watch(G.tfd, &tev, EPOLLIN, &G.tfd)) {
        fprintf(stderr, "wot-rpcapp: out of memory or descriptors\n");
        return 1;
    }
    if (c->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(c->cpu, &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    for (uint32_t k = 0; k < c->shards; k++) {
        struct ra_sub *s = &G.subs[k];
        s->k = c->first_shard + k;
        s->fd = tcp_connect();
        s->state = AS_CONNECTING;
        if (s->fd >= 0 && rxstamp_enable(s->fd))   /* replies: their reads' kernel stamps */
            G.st.no_kernel_stamps++;
        if (s->fd < 0 || ra_watch(s->fd, &s->events, EPOLLOUT, s)) {
            fprintf(stderr, "wot-rpcapp: cannot connect reply subscription %u: %s\n", k,
                    strerror(errno));
            return 1;
        }
    }
    for (uint32_t i = 0; i < c->apps; i++) {
        struct ra_app *a = &G.apps[i];
        a->heap_pos = NIL;
        a->pend = G.slots + (size_t)i * 2 * c->window;
        a->resp = a->pend + c->window;
        a->fd = tcp_connect();
        a->state = AS_CONNECTING;
        if (a->fd < 0 || ra_watch(a->fd, &a->events, EPOLLOUT, a)) {
            fprintf(stderr, "wot-rpcapp: cannot connect application %u: %s (raise the "
                    "descriptor limit or use --source)\n", i, strerror(errno));
            return 1;
        }
        /* closed loop: the first RPC of each application at a uniform point of one think
         * interval after the start, so the load does not begin with all applications at once */
        if (!open_loop())
            set_timer(i, G.apps[i].due_ns = c->start_ns + rnd() % (think_ns() + 1));
    }
    uint64_t t_stop = c->start_ns + c->duration_ns;
    uint64_t t_end = t_stop + timeout_ns();
    G.t_stop = t_stop;
    if (open_loop())   /* constant: a random phase, so cells started together do not align */
        G.next_arrival = c->start_ns + (c->arrival == ARR_CONSTANT
                                            ? (uint64_t)(unit() * 1e9 / c->rate) : gap_ns());
    struct epoll_event ev[EP_EVENTS];
    int ready_note = 0;
    for (;;) {
        arm();
        uint64_t now = (uint64_t)mono_ns();
        if (now >= t_end || ra_stop)
            break;
        int tmo = (int)((t_end - now) / 1000000ULL) + 1;
        int n = epoll_wait(G.ep, ev, EP_EVENTS, tmo);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            void *p = ev[i].data.ptr;
            if (p == &G.tfd) {
                G.armed = UINT64_MAX;
            } else if ((char *)p >= (char *)G.subs && (char *)p < (char *)(G.subs + c->shards)) {
                struct ra_sub *s = p;
                G.rs.read_ns = 0;          /* no read of this event yet */
                if (s->fd >= 0 && sub_event(s, ev[i].events)) {
                    G.st.sub_disconnects++;
                    fprintf(stderr, "wot-rpcapp: reply subscription %u ended\n", s->k);
                    close(s->fd);
                    s->fd = -1;
                }
            } else {
                struct ra_app *a = p;
                if (a->fd < 0)
                    continue;
                if (c->transport == TR_WEBSOCKET) {
                    if (aw_event(a, ev[i].events))
                        app_down(a, (uint64_t)mono_ns());
                } else if (a->state == AS_CONNECTING) {
                    int err = 0;
                    socklen_t l = sizeof err;
                    getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &err, &l);
                    if (err || ra_watch(a->fd, &a->events, EPOLLIN, a))
                        app_down(a, (uint64_t)mono_ns());
                    else
                        a->state = AS_THINK;
                } else {
                    app_read(a);
                }
            }
        }
        clock_map_refresh(&G.cmap, mono_ns(), CLOCK_MAP_REFRESH_NS);   /* once a second */
        if (!ready_note && all_subs_open()) {
            ready_note = 1;
            fprintf(stderr, "wot-rpcapp: %u reply subscriptions open\n", c->shards);
        }
        now = (uint64_t)mono_ns();
        /* open loop: every RPC due by now, each stamped with its scheduled time, to a
         * uniformly chosen application (each then sees a Poisson stream of rate/apps) */
        while (open_loop() && G.next_arrival <= now && G.next_arrival < t_stop && !ra_stop) {
            uint64_t at = G.next_arrival;
            G.next_arrival += gap_ns();
            send_rpc(&G.apps[rnd() % c->apps], at);
            now = (uint64_t)mono_ns();
        }
        while (G.hn && G.apps[G.heap[0]].wake_ns <= now) {
            uint32_t ai = heap_pop();
            struct ra_app *a = &G.apps[ai];
            uint64_t at = a->wake_ns;
            if (a->fd < 0)
                continue;
            if (a->npend) {            /* a timeout: the oldest pending RPCs that are due */
                while (a->npend && G.rows[a->pend[0]].send_ns + timeout_ns() <= now)
                    end_rpc(a, 0, RO_TIMEOUT, now);
                if (a->npend && a->heap_pos == NIL)
                    rearm(ai);
            } else if (!open_loop() && a->state == AS_THINK && a->nresp && at < t_stop) {
                /* the reply came before the server's response to its request: a closed-loop
                 * application keeps one request in flight, so it waits for that response
                 * (this wait counts in its send lag: the schedule stays due_ns) */
                set_timer(ai, now + 1000000ULL);
            } else if (!open_loop() && a->state == AS_THINK && at < t_stop) {
                send_rpc(a, a->due_ns);
            } else if (!open_loop() && a->state == AS_CONNECTING && at < t_stop) {
                set_timer(ai, a->due_ns = now + 100000000ULL);     /* not connected yet */
            }
            now = (uint64_t)mono_ns();
        }
    }
    for (uint32_t i = 0; i < c->apps; i++)
        while (G.apps[i].npend)
            end_rpc(&G.apps[i], 0, RO_TIMEOUT, (uint64_t)mono_ns());
    int rc = write_outputs(t_end);
    if (G.stamp_pin >= 0)
        close(G.stamp_pin);
    return rc;
}

/* ---- files ---- */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static const char *const outcome_name[RO_N] = {"pending", "ok", "timeout", "rejected", "lost",
                                               "overflow"};

static void pct(FILE *fp, const char *key, uint64_t *v, size_t n) {
    fprintf(fp, ", \"%s\": ", key);
    if (!n) {
        fputs("null", fp);
        return;
    }
    qsort(v, n, sizeof *v, cmp_u64);
    static const double q[] = {50, 90, 99, 99.9};
    fputc('{', fp);
    for (int i = 0; i < 4; i++) {
        size_t r = (size_t)ceil(q[i] / 100.0 * (double)n);
        fprintf(fp, "\"p%g\": %llu, ", q[i], (unsigned long long)v[r ? r - 1 : 0]);
    }
    fprintf(fp, "\"max\": %llu}", (unsigned long long)v[n - 1]);
}

static int write_outputs(uint64_t t_end) {
    const struct ra_config *c = G.cfg;
    char path[4096];
    snprintf(path, sizeof path, "%s/rpc-log.csv", c->log_dir);
    FILE *fp = fopen(path, "w");
    if (!fp) {
        fprintf(stderr, "wot-rpcapp: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    fputs("app,id,device,sched_ns,send_ns,reply_ns,status,outcome,reply_read_ns,reply_stamp\n",
          fp);
    uint64_t *lat = calloc(G.nrows + 1, sizeof *lat), *lag = calloc(G.nrows + 1, sizeof *lag);
    uint64_t *rlag = calloc(G.nrows + 1, sizeof *rlag);
    size_t nl = 0, ng = 0, nlag = 0, nsent = 0, nok = 0, nrlag = 0;
    uint64_t warm_end = c->start_ns + c->warmup_ns;
    for (size_t i = 0; i < G.nrows; i++) {
        const struct ra_row *r = &G.rows[i];
        uint32_t app = c->first_app + r->app;   /* the global id (cells: first_app) */
        fprintf(fp, "%u,%u-%u,%u,%llu,", app, app, r->seq, r->device,
                (unsigned long long)r->sched_ns);
        if (r->send_ns)            /* empty: never sent (overflow, or its connection down) */
            fprintf(fp, "%llu", (unsigned long long)r->send_ns);
        fputc(',', fp);
        if (r->reply_ns)
            fprintf(fp, "%llu", (unsigned long long)r->reply_ns);
        fprintf(fp, ",%u,%s,", r->status, outcome_name[r->outcome]);
        if (r->outcome == RO_OK)   /* empty unless answered: which stamp reply_ns is */
            fprintf(fp, "%llu,%s", (unsigned long long)r->reply_read_ns,
                    r->kstamp ? "kernel" : "user");
        else
            fputc(',', fp);
        fputc('\n', fp);
        if (r->sched_ns < warm_end || !lat || !lag || !rlag)
            continue;
        ng++;                      /* scheduled after the warm-up (offered) */
        if (r->send_ns) {
            nsent++;
            lag[nlag++] = r->send_ns > r->sched_ns ? r->send_ns - r->sched_ns : 0;
        }
        if (r->outcome == RO_OK) {
            nok++;
            lat[nl++] = r->reply_ns - r->send_ns;
            if (r->kstamp)         /* the application's own read delay (the testbed's) */
                rlag[nrlag++] = r->reply_read_ns - r->reply_ns;
        }
    }
    int bad = ferror(fp) | fclose(fp);
    snprintf(path, sizeof path, "%s/rpc-summary.json", c->log_dir);
    fp = fopen(path, "w");
    if (!fp)
        return 1;
    double secs = (double)(c->duration_ns - c->warmup_ns) / 1e9;
    /* per second of the measured window (warm-up end to stop), by the RPCs scheduled in it:
     * offered = scheduled, sent = written whole, answered = ok (the throughput) */
    double per = secs > 0 ? 1.0 / secs : 0.0;
    fprintf(fp, "{\"apps\": %u, \"shards\": %u, \"devices\": %u, \"duration_s\": %.3f, "
            "\"rpcs\": %zu, \"measured\": %zu, \"measured_sent\": %zu, \"measured_ok\": %zu, "
            "\"offered_per_s\": %.3f, \"sent_per_s\": %.3f, \"answered_per_s\": %.3f, "
            "\"measured_s\": %.3f", c->apps, c->shards, c->dev_count,
            (double)c->duration_ns / 1e9, G.nrows, ng, nsent, nok, ng * per, nsent * per,
            nok * per, secs);
    for (int o = 1; o < RO_N; o++)
        fprintf(fp, ", \"%s\": %llu", outcome_name[o], (unsigned long long)G.st.outcome[o]);
    fprintf(fp, ", \"first_app\": %u, \"others\": %llu", c->first_app,
            (unsigned long long)G.st.others);
    fprintf(fp, ", \"loop\": \"%s\", \"rate\": %.3f, \"arrival\": \"%s\", \"window\": %u, "
            "\"unsent_down\": %llu, \"unsent_write\": %llu, \"sent\": %llu, "
            "\"first_shard\": %u", open_loop() ? "open" : "closed",
            c->rate, c->arrival == ARR_CONSTANT ? "constant" : "poisson", c->window,
            (unsigned long long)G.st.unsent_down, (unsigned long long)G.st.unsent_write,
            (unsigned long long)G.st.sent, c->first_shard);
    fprintf(fp, ", \"unmatched\": %llu, \"late_replies\": %llu, \"events_in\": %llu, "
            "\"post_2xx\": %llu, \"post_202\": %llu, \"app_disconnects\": %llu, "
            "\"sub_disconnects\": %llu, \"bytes_out\": %llu, \"bytes_in\": %llu, "
            "\"rows_full\": %d, \"end_ns\": %llu",
            (unsigned long long)G.st.unmatched, (unsigned long long)G.st.late_replies,
            (unsigned long long)G.st.events_in, (unsigned long long)G.st.post_2xx,
            (unsigned long long)G.st.post_202, (unsigned long long)G.st.app_disconnects,
            (unsigned long long)G.st.sub_disconnects, (unsigned long long)G.st.bytes_out,
            (unsigned long long)G.st.bytes_in, G.nrows >= c->max_rows, (unsigned long long)t_end);
    fprintf(fp, ", \"replies_kernel_stamped\": %llu, \"replies_user_stamped\": %llu, "
            "\"subs_without_kernel_stamps\": %llu, \"stamp_pin_on\": %d",
            (unsigned long long)G.st.reply_kernel, (unsigned long long)G.st.reply_user,
            (unsigned long long)G.st.no_kernel_stamps, G.pin_on);
    pct(fp, "latency_ns", lat, nl);
    pct(fp, "send_lag_ns", lag, nlag);
    pct(fp, "reply_read_lag_ns", rlag, nrlag);
    fputs("}\n", fp);
    bad |= ferror(fp) | fclose(fp);
    free(lat);
    free(lag);
    free(rlag);
    return bad ? 1 : 0;
}
