/* sink_io.c - the notification sink's sockets and loop (sink.h). One thread, one epoll set:
 * webhook listeners and their connections, stream and long-poll connections, observation sockets. Every read
 * is a recvmsg() with the kernel's receive stamp (SO_TIMESTAMPNS; on TCP the stamp of the last
 * segment the read returned), mapped to CLOCK_MONOTONIC; ids found in those bytes get it. */
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rxstamp.h"
#include "sink.h"

#define MAX_CONNS 1024
#define TAG_CONN 0x10000u /* epoll tags: a subscriber index, or TAG_CONN | webhook connection */

extern volatile sig_atomic_t sink_stop;
extern int sink_failed;

/* a webhook request's body: Content-Length bytes, or chunked (RFC 9112 §7.1: size line, data,
 * CRLF, ..., a 0 size, trailer lines, an empty line); only data bytes reach the scanner */
enum { B_HEAD = 0, B_LENGTH, C_SIZE, C_DATA, C_DATA_END, C_TRAILER };

typedef struct { /* one webhook connection */
    int fd;
    uint32_t sub;
    int state;
    uint64_t remaining; /* B_LENGTH, C_DATA: bytes left; C_SIZE: the size read so far */
    int in_ext;         /* C_SIZE: past a ';' (chunk extension) */
    size_t line;        /* C_TRAILER: bytes of the current line (CR excluded) */
    uint32_t win;       /* the last 4 bytes: the head's end */
    size_t hlen;
    char head[SINK_HEAD_MAX];
    sink_scan_t scan;
    int poll;           /* a long-poll's connection: responses come in, its GET goes out */
} wconn_t;

static wconn_t conns[MAX_CONNS];
static wconn_t polls[SINK_MAX_SUBS]; /* a long-poll subscriber's connection, by its index */
static int lp_next(sink_t *S, wconn_t *c);

typedef struct {
    sink_t *S;
    uint32_t sub;
    int64_t t;
    int kernel;
} found_ctx_t;

static void found(void *ctx, uint64_t id) {
    found_ctx_t *f = ctx;
    sink_note(f->S, f->sub, id, f->t, f->kernel);
}

void sink_note(sink_t *S, uint32_t sub, uint64_t id, int64_t t, int kernel) {
    S->sub[sub].ids++;
    if (S->n == S->cap) {
        S->over_capacity++;
        return;
    }
    S->note[S->n++] = (sink_note_t){sub, (uint8_t)kernel, id, t};
}

/* a read with its kernel stamp; returns recvmsg()'s result, *t and *kernel set */
static ssize_t read_stamped(sink_t *S, int fd, uint8_t *buf, size_t cap, int64_t *t, int *kernel,
                            struct sockaddr_storage *from, socklen_t *fromlen) {
    struct iovec iov = {buf, cap};
    rxstamp_ctl_t ctl;
    struct msghdr m = rxstamp_msg(&iov, &ctl);
    if (from) {
        m.msg_name = from;
        m.msg_namelen = *fromlen;
    }
    ssize_t k = recvmsg(fd, &m, MSG_DONTWAIT);
    int64_t now = mono_ns();
    if (from)
        *fromlen = m.msg_namelen;
    int64_t rt = k > 0 ? rxstamp_realtime_ns(&m) : 0;
    *kernel = rt != 0;
    *t = rt ? clock_map_to_mono(&S->map, rt) : now;
    return k;
}

static int watch(sink_t *S, int fd, uint32_t tag) {
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = tag};
    return epoll_ctl(S->epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* ---- webhooks ---- */
static void w_close(wconn_t *c) {
    close(c->fd);
    c->fd = -1;
}

/* the head is complete: its body's framing */
static void w_head(wconn_t *c) {
    c->head[c->hlen < SINK_HEAD_MAX ? c->hlen : SINK_HEAD_MAX - 1] = 0;
    int chunked = 0;
    c->remaining = 0;
    for (char *l = strstr(c->head, "\r\n"); l && l[2]; l = strstr(l + 2, "\r\n")) {
        if (!strncasecmp(l + 2, "content-length:", 15))
            c->remaining = strtoull(l + 17, NULL, 10);
        else if (!strncasecmp(l + 2, "transfer-encoding:", 18) && strstr(l + 20, "chunked"))
            chunked = 1;
    }
    c->state = chunked ? C_SIZE : B_LENGTH;
    if (chunked) {
        c->remaining = 0;
        c->in_ext = 0;
    }
}

/* the request is complete: its last ids, a 204, and the next request */
static int w_answer(sink_t *S, wconn_t *c, int64_t t, int kernel) {
    static const char OK[] = "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n";
    found_ctx_t f = {S, c->sub, t, kernel};
    sink_scan_end(&c->scan, found, &f);
    S->sub[c->sub].messages++;
    if (c->poll)
        return lp_next(S, c);
    c->state = B_HEAD;
    c->hlen = 0;
    c->win = 0;
    return send(c->fd, OK, sizeof OK - 1, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)(sizeof OK - 1)
               ? 0 : -1;
}

static int hexval(uint8_t b) {
    return b >= '0' && b <= '9' ? b - '0' : b >= 'a' && b <= 'f' ? b - 'a' + 10
           : b >= 'A' && b <= 'F' ? b - 'A' + 10 : -1;
}

/* bytes i.. of d through the framing; returns how many it used; *done when the request (a
 * long-poll: the response) ended */
static size_t w_step(sink_t *S, wconn_t *c, const uint8_t *d, size_t n, int64_t t, int kernel,
                     int *done) {
    found_ctx_t f = {S, c->sub, t, kernel};
    uint8_t b = d[0];
    switch (c->state) {
    case B_HEAD:
        if (c->hlen < SINK_HEAD_MAX - 1)
            c->head[c->hlen++] = (char)b;
        c->win = c->win << 8 | b;
        if (c->win == 0x0d0a0d0a) {
            w_head(c);
            *done = c->state == B_LENGTH && c->remaining == 0;
        }
        return 1;
    case B_LENGTH:
    case C_DATA: {
        size_t k = n < c->remaining ? n : (size_t)c->remaining;
        sink_scan_feed(&c->scan, d, k, found, &f);
        c->remaining -= k;
        if (!c->remaining) {
            *done = c->state == B_LENGTH;
            c->state = c->state == C_DATA ? C_DATA_END : c->state;
        }
        return k;
    }
    case C_DATA_END:
        if (b == '\n')
            c->state = C_SIZE, c->remaining = 0, c->in_ext = 0;
        return 1;
    case C_SIZE:
        if (b == '\n') {
            c->state = c->remaining ? C_DATA : C_TRAILER;
            c->line = 0;
        } else if (b == ';') {
            c->in_ext = 1;
        } else if (!c->in_ext && hexval(b) >= 0 && c->remaining < (1ULL << 40)) {
            c->remaining = c->remaining * 16 + (uint64_t)hexval(b);
        }
        return 1;
    default: /* C_TRAILER: lines until an empty one */
        if (b == '\n') {
            *done = c->line == 0;
            c->line = 0;
        } else if (b != '\r') {
            c->line++;
        }
        return 1;
    }
}

static void w_feed(sink_t *S, wconn_t *c, const uint8_t *d, size_t n, int64_t t, int kernel) {
    int fd = c->fd; /* closed, or (a long-poll) replaced: the rest of d was the old one's */
    for (size_t i = 0; i < n && c->fd >= 0 && c->fd == fd;) {
        int done = 0;
        i += w_step(S, c, d + i, n - i, t, kernel, &done);
        if (done && w_answer(S, c, t, kernel) < 0)
            w_close(c);
    }
}

static void w_accept(sink_t *S, uint32_t sub) {
    for (;;) {
        int fd = accept4(S->sub[sub].fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        rxstamp_enable(fd);
        int slot = -1;
        for (int k = 0; k < MAX_CONNS && slot < 0; k++)
            if (conns[k].fd < 0)
                slot = k;
        if (slot < 0 || watch(S, fd, TAG_CONN | (uint32_t)slot) < 0) {
            S->sub[sub].errors++;
            close(fd);
            continue;
        }
        wconn_t *c = &conns[slot];
        memset(c, 0, sizeof *c);
        c->fd = fd;
        c->sub = sub;
        sink_scan_init(&c->scan, S->marker);
        S->sub[sub].connections++;
    }
}

static void w_read(sink_t *S, wconn_t *c) {
    static uint8_t buf[65536];
    for (;;) {
        int64_t t;
        int kernel;
        ssize_t k = read_stamped(S, c->fd, buf, sizeof buf, &t, &kernel, NULL, NULL);
        if (k > 0) {
            S->sub[c->sub].bytes += (uint64_t)k;
            w_feed(S, c, buf, (size_t)k, t, kernel);
            if (c->fd < 0)
                return;
            continue;
        }
        if (k == 0 || (errno != EAGAIN && errno != EINTR))
            w_close(c);
        return;
    }
}

/* ---- streams and observations ---- */
/* a CoAP message's payload (after the options and the 0xFF marker, RFC 7252 §3), or NULL */
static const uint8_t *coap_payload(const uint8_t *m, size_t n) {
    const uint8_t *p = m + 4 + (m[0] & 15), *end = m + n;
    while (p < end && *p != 0xff) {
        unsigned delta = *p >> 4, len = *p & 15;
        p++;
        p += delta == 13 ? 1 : delta == 14 ? 2 : 0;
        if (len == 13 && p < end)
            len = 13u + *p++;
        else if (len == 14 && p + 1 < end)
            len = 269u + ((unsigned)p[0] << 8 | p[1]), p += 2;
        if (delta == 15 || len == 15)
            return NULL; /* malformed */
        p += len;
    }
    return p < end ? p + 1 : NULL;
}
static void s_read(sink_t *S, uint32_t si) {
    static uint8_t buf[65536];
    sink_sub_t *s = &S->sub[si];
    for (;;) {
        int64_t t;
        int kernel;
        struct sockaddr_storage from;
        socklen_t fl = sizeof from;
        ssize_t k = read_stamped(S, s->fd, buf, sizeof buf, &t, &kernel,
                                 s->kind == SUB_OBSERVE ? &from : NULL, &fl);
        if (k <= 0) {
            if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
                s->errors++; /* the server ended the stream */
                epoll_ctl(S->epfd, EPOLL_CTL_DEL, s->fd, NULL);
            }
            return;
        }
        found_ctx_t f = {S, si, t, kernel};
        s->bytes += (uint64_t)k;
        if (s->kind == SUB_OBSERVE) { /* a notification: ACK it if CON, scan its payload */
            if (k < 4)
                continue;
            if (!s->ready) {
                s->ready = 1;
                s->status = buf[1];
            }
            if ((buf[0] >> 4 & 3) == 0) { /* CON: an empty ACK with its message ID */
                uint8_t ack[4] = {0x60, 0, buf[2], buf[3]};
                sendto(s->fd, ack, 4, MSG_DONTWAIT, (struct sockaddr *)&from, fl);
            }
            const uint8_t *pm = coap_payload(buf, (size_t)k);
            s->messages++;
            if (pm) {
                sink_scan_feed(&s->scan, pm, (size_t)(buf + k - pm), found, &f);
                sink_scan_end(&s->scan, found, &f);
            }
            continue;
        }
        for (size_t i = 0; !s->ready && i < (size_t)k; i++) { /* the head: status, then ready */
            s->win = s->win << 8 | buf[i];
            if (s->head_seen < sizeof s->first - 1)
                s->first[s->head_seen] = (char)buf[i];
            s->head_seen++;
            if (s->win != 0x0d0a0d0a)
                continue;
            s->status = !strncmp(s->first, "HTTP/1.", 7) ? atoi(s->first + 9) : 0;
            if (s->status < 200 || s->status > 299) { /* before the updates: said, and stop */
                fprintf(stderr, "notify-sink: --stream %s=%s answered '%.12s', expected a 2xx "
                                "streaming response\n", s->name, s->spec, s->first);
                sink_failed = 1;
                sink_stop = 1;
                return;
            }
            s->ready = 1;
        }
        if (s->ready)
            s->messages++;
        sink_scan_feed(&s->scan, buf, (size_t)k, found, &f);
    }
}

/* ---- long-polls: one complete response (Content-Length or chunked, the webhooks' framing
 * above), its ids stamped like a stream's, and the same GET again at once ---- */
static int lp_connect(sink_t *S, uint32_t si) {
    sink_sub_t *s = &S->sub[si];
    wconn_t *c = &polls[si];
    int fd = socket(s->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&s->addr, s->addrlen) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    rxstamp_enable(fd);
    if (send(fd, s->req, s->reqlen, MSG_NOSIGNAL) != (ssize_t)s->reqlen || watch(S, fd, si) < 0) {
        close(fd);
        return -1;
    }
    memset(c, 0, sizeof *c);
    c->fd = s->fd = fd;
    c->sub = si;
    c->poll = 1;
    sink_scan_init(&c->scan, S->marker);
    s->connections++;
    s->polls++;
    return 0;
}

/* the server closed the connection (or the re-poll could not be sent): a new one */
static void lp_reconnect(sink_t *S, uint32_t si) {
    if (polls[si].fd >= 0)
        close(polls[si].fd); /* leaves the epoll set with it */
    polls[si].fd = S->sub[si].fd = -1;
    if (!sink_stop && lp_connect(S, si) < 0)
        S->sub[si].errors++; /* no longer polled: its updates from here on count as lost */
}

/* a complete response (the head is NUL-terminated in c->head): a 2xx or 3xx (a server's "no
 * update this time") is answered with the next GET on the same connection; 4xx/5xx stop */
static int lp_next(sink_t *S, wconn_t *c) {
    sink_sub_t *s = &S->sub[c->sub];
    int status = !strncmp(c->head, "HTTP/1.", 7) ? atoi(c->head + 9) : 0;
    if (!s->status || status >= 400)
        s->status = status;
    if (status < 200 || status > 399) {
        fprintf(stderr, "notify-sink: --longpoll %s=%s answered '%.12s', expected a 2xx "
                        "response\n", s->name, s->spec, c->head);
        sink_failed = 1;
        sink_stop = 1;
        return -1;
    }
    c->state = B_HEAD;
    c->hlen = 0;
    c->win = 0;
    if (send(c->fd, s->req, s->reqlen, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)s->reqlen) {
        lp_reconnect(S, c->sub);
        return 0;
    }
    s->polls++;
    return 0;
}

static void lp_read(sink_t *S, uint32_t si) {
    static uint8_t buf[65536];
    wconn_t *c = &polls[si];
    while (c->fd >= 0) {
        int64_t t;
        int kernel;
        int fd = c->fd;
        ssize_t k = read_stamped(S, fd, buf, sizeof buf, &t, &kernel, NULL, NULL);
        if (k > 0) {
            S->sub[si].bytes += (uint64_t)k;
            w_feed(S, c, buf, (size_t)k, t, kernel);
            if (c->fd != fd) /* replaced (a failed re-poll) or stopped */
                return;
            continue;
        }
        if (k == 0 || (errno != EAGAIN && errno != EINTR))
            lp_reconnect(S, si);
        return;
    }
}

/* ---- setup ---- */
static int resolve(sink_sub_t *s, const char *host, const char *port, int dgram) {
    struct addrinfo hints = {.ai_socktype = dgram ? SOCK_DGRAM : SOCK_STREAM}, *ai;
    if (getaddrinfo(host, port, &hints, &ai) != 0)
        return -1;
    memcpy(&s->addr, ai->ai_addr, ai->ai_addrlen);
    s->addrlen = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

/* "scheme://host:port/path" -> host, port, path (without its leading '/') */
static int split_url(const char *url, const char *scheme, char *host, size_t hcap, char *port,
                     char *path, size_t pcap) {
    size_t sl = strlen(scheme);
    if (strncmp(url, scheme, sl) || strncmp(url + sl, "://", 3))
        return -1;
    const char *a = url + sl + 3, *e = a + strcspn(a, "/"), *colon = memchr(a, ':', (size_t)(e - a));
    if (!colon || colon == a || (size_t)(colon - a) >= hcap || e - colon - 1 < 1 || e - colon - 1 > 5)
        return -1;
    memcpy(host, a, (size_t)(colon - a));
    host[colon - a] = 0;
    memcpy(port, colon + 1, (size_t)(e - colon - 1));
    port[e - colon - 1] = 0;
    snprintf(path, pcap, "%s", *e ? e + 1 : "");
    return 0;
}

static int open_listener(sink_t *S, sink_sub_t *s, uint32_t si) {
    char host[128], port[8];
    const char *colon = strrchr(s->spec, ':');
    if (!colon || colon == s->spec || (size_t)(colon - s->spec) >= sizeof host ||
        strlen(colon + 1) < 1 || strlen(colon + 1) > 5) {
        fprintf(stderr, "notify-sink: --webhook %s=%s: expected NAME=ADDRESS:PORT\n", s->name, s->spec);
        return 2;
    }
    memcpy(host, s->spec, (size_t)(colon - s->spec));
    host[colon - s->spec] = 0;
    snprintf(port, sizeof port, "%s", colon + 1);
    if (resolve(s, host, port, 0) < 0) {
        fprintf(stderr, "notify-sink: --webhook %s=%s: cannot resolve %s\n", s->name, s->spec, host);
        return 2;
    }
    int one = 1, fd = socket(s->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&s->addr, s->addrlen) < 0 || listen(fd, 1024) < 0 ||
        watch(S, fd, si) < 0) {
        fprintf(stderr, "notify-sink: --webhook %s=%s: cannot listen there (%s)\n", s->name,
                s->spec, strerror(errno));
        return 1;
    }
    /* on the listening socket too: a connection inherits it at accept, so bytes that arrived
     * before accept4() returned (a client that sends right after connecting) carry a stamp */
    rxstamp_enable(fd);
    s->fd = fd;
    s->ready = 1;
    return 0;
}

static int open_stream(sink_t *S, sink_sub_t *s, uint32_t si) {
    char port[8];
    int ws = s->kind == SUB_WEBSOCKET, lp = s->kind == SUB_LONGPOLL;
    const char *opt = ws ? "--websocket" : lp ? "--longpoll" : "--stream", *scheme = ws ? "ws" : "http";
    if (split_url(s->spec, scheme, s->host, sizeof s->host, port, s->path, sizeof s->path) < 0 ||
        resolve(s, s->host, port, 0) < 0) {
        fprintf(stderr, "notify-sink: %s %s=%s: expected NAME=%s://HOST:PORT/PATH (a "
                        "resolvable host)\n", opt, s->name, s->spec, scheme);
        return 2;
    }
    if (lp) { /* no Accept: --accept is the streams' (an SSE path may be a long-poll path too) */
        int n = snprintf(s->req, sizeof s->req, "GET /%s HTTP/1.1\r\nHost: %s:%s\r\n\r\n",
                         s->path, s->host, port);
        s->reqlen = n > 0 && (size_t)n < sizeof s->req ? (size_t)n : 0;
        if (!s->reqlen || lp_connect(S, si) < 0) {
            fprintf(stderr, "notify-sink: --longpoll %s=%s: cannot connect or send its GET (%s): "
                            "is the server up?\n", s->name, s->spec, strerror(errno));
            return 1;
        }
        s->ready = 1; /* the GET is out: the server holds it until an update */
        return 0;
    }
    int fd = socket(s->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&s->addr, s->addrlen) < 0) {
        fprintf(stderr, "notify-sink: %s %s=%s: cannot connect (%s): is the server "
                        "up?\n", opt, s->name, s->spec, strerror(errno));
        if (fd >= 0)
            close(fd);
        return 1;
    }
    rxstamp_enable(fd);
    if (ws) {
        s->fd = fd;
        s->connections = 1;
        return sink_ws_open(S, si, port) ? 1 : watch(S, fd, si) < 0 ? 1 : 0;
    }
    char req[768];
    int n = snprintf(req, sizeof req, "GET /%s HTTP/1.1\r\nHost: %s:%s\r\n%s%s%s\r\n", s->path,
                     s->host, port, S->accept ? "Accept: " : "", S->accept ? S->accept : "",
                     S->accept ? "\r\n" : "");
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n || watch(S, fd, si) < 0) {
        fprintf(stderr, "notify-sink: --stream %s: cannot send the request (%s)\n", s->name,
                strerror(errno));
        close(fd);
        return 1;
    }
    s->fd = fd;
    s->connections = 1;
    return 0;
}

/* CoAP GET with Observe: 0 and the path's Uri-Path options (RFC 7252 §3.1, RFC 7641) */
static size_t observe_request(const char *path, uint8_t *b, size_t cap) {
    size_t n = 0;
    b[n++] = 0x48; /* ver 1, CON, token length 8 */
    b[n++] = 0x01; /* GET */
    b[n++] = 0x12;
    b[n++] = 0x34;
    memcpy(b + n, "wbsink00", 8);
    n += 8;
    b[n++] = 0x60; /* option 6 (Observe), length 0: value 0 = register */
    unsigned last = 6;
    for (const char *seg = path; *seg && n + 4 < cap;) {
        size_t len = strcspn(seg, "/");
        if (len > 255 || n + 3 + len >= cap)
            return 0;
        unsigned delta = 11 - last;
        last = 11;
        uint8_t *h = b + n++;
        *h = (uint8_t)(delta << 4);
        if (len < 13) {
            *h |= (uint8_t)len;
        } else {
            *h |= 13;
            b[n++] = (uint8_t)(len - 13);
        }
        memcpy(b + n, seg, len);
        n += len;
        seg += len + (seg[len] == '/');
    }
    return n;
}

static int open_observe(sink_t *S, sink_sub_t *s, uint32_t si) {
    char port[8];
    if (split_url(s->spec, "coap", s->host, sizeof s->host, port, s->path, sizeof s->path) < 0 ||
        resolve(s, s->host, port, 1) < 0) {
        fprintf(stderr, "notify-sink: --observe %s=%s: expected NAME=coap://HOST:PORT/PATH\n",
                s->name, s->spec);
        return 2;
    }
    int fd = socket(s->addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    uint8_t req[512];
    size_t n = observe_request(s->path, req, sizeof req);
    if (fd < 0 || !n || rxstamp_enable(fd) < 0 || watch(S, fd, si) < 0 ||
        sendto(fd, req, n, 0, (struct sockaddr *)&s->addr, s->addrlen) != (ssize_t)n) {
        fprintf(stderr, "notify-sink: --observe %s=%s: cannot send the registration (%s)\n",
                s->name, s->spec, strerror(errno));
        return 1;
    }
    s->fd = fd;
    s->connections = 1;
    return 0;
}

int sink_open(sink_t *S) {
    if ((S->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
        return 1;
    for (int k = 0; k < MAX_CONNS; k++)
        conns[k].fd = -1;
    for (int k = 0; k < SINK_MAX_SUBS; k++)
        polls[k].fd = -1;
    clock_map_init(&S->map);
    for (int i = 0; i < S->nsubs; i++) {
        sink_sub_t *s = &S->sub[i];
        sink_scan_init(&s->scan, S->marker);
        int rc = s->kind == SUB_WEBHOOK ? open_listener(S, s, (uint32_t)i)
                 : s->kind == SUB_OBSERVE ? open_observe(S, s, (uint32_t)i)
                                          : open_stream(S, s, (uint32_t)i);
        if (rc)
            return rc;
    }
    return 0;
}

static int all_ready(const sink_t *S) {
    for (int i = 0; i < S->nsubs; i++)
        if (!S->sub[i].ready)
            return 0;
    return 1;
}

int sink_run(sink_t *S) {
    struct epoll_event ev[64];
    int announced = 0;
    S->start_mono = mono_ns();
    for (int i = 0; i < S->nsubs; i++)
        if (S->sub[i].kind == SUB_WEBSOCKET)
            sink_ws_pending(S, (uint32_t)i);
    int64_t end = S->duration_ns ? S->start_mono + S->duration_ns : INT64_MAX;
    while (!sink_stop) {
        int64_t now = mono_ns();
        if (now >= end)
            break;
        clock_map_refresh(&S->map, now, CLOCK_MAP_REFRESH_NS);
        if (!announced && all_ready(S)) { /* every subscription holds: the updates may begin */
            announced = 1;
            if (S->ready_file) {
                FILE *f = fopen(S->ready_file, "w");
                if (f) {
                    fprintf(f, "%lld\n", (long long)now);
                    fclose(f);
                }
            }
        }
        int64_t left = (end - now) / NS_PER_MS;
        int n = epoll_wait(S->epfd, ev, 64, left > 100 ? 100 : (int)left + 1);
        for (int i = 0; i < n; i++) {
            uint32_t tag = ev[i].data.u32;
            if (tag & TAG_CONN)
                w_read(S, &conns[tag & 0xffff]);
            else if (S->sub[tag].kind == SUB_WEBHOOK)
                w_accept(S, tag);
            else if (S->sub[tag].kind == SUB_WEBSOCKET)
                sink_ws_read(S, tag);
            else if (S->sub[tag].kind == SUB_LONGPOLL)
                lp_read(S, tag);
            else
                s_read(S, tag);
        }
    }
    S->end_mono = mono_ns();
    for (int k = 0; k < MAX_CONNS; k++)
        if (conns[k].fd >= 0)
            w_close(&conns[k]);
    for (int k = 0; k < SINK_MAX_SUBS; k++)
        if (polls[k].fd >= 0)
            w_close(&polls[k]);
    return 0;
}
