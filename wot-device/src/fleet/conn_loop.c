/* conn_loop.c - the event loops of wot-fleet's connected devices (conn.h).
 *
 * One thread per loop, its contiguous block of devices, level-triggered epoll with a
 * struct cn_conn * per connection, a timerfd armed (absolute CLOCK_MONOTONIC) for the earliest
 * timer of a min-heap. A device's life: first connect at start + position / attach_rate ->
 * TCP connect -> Upgrade (WebSocket) or subscription GET (chunked) -> attached: heartbeat and
 * event timers -> every message with an id gets a reply after service_us -> a disconnect
 * (counted by cause) ends the session's timers and pending replies (each logged as lost) and,
 * with reconnect_ms > 0, schedules the next connect after reconnect_ms plus up to as much
 * again of uniform jitter (so a server restart is not answered by one synchronized storm). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include "conn.h"
#include "rxstamp_pin.h"

#define EP_EVENTS 256
#define FDS_PER_LOOP 3            /* epoll, timerfd, eventfd */
#define STAMP_PIN_WAIT_NS (200 * NS_PER_MS)  /* at start, for the kernel to stamp (bounded) */
#define JOBS_PER_DEVICE 4         /* pending replies a device may have at once */
#define TIMERS_PER_DEVICE 4       /* connect, heartbeat, event, and one stale of an old session */

static uint64_t xorshift(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* ---- timers: min-heap of (deadline, device, kind, generation or job); no cancel: an entry
 * of an older session (its generation differs) is dropped when it comes up ---- */

static void heap_up(struct cn_loop *l, uint32_t pos) {
    struct cn_heap_ent e = l->heap[pos];
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (l->heap[parent].at <= e.at)
            break;
        l->heap[pos] = l->heap[parent];
        pos = parent;
    }
    l->heap[pos] = e;
}

static void heap_down(struct cn_loop *l, uint32_t pos) {
    struct cn_heap_ent e = l->heap[pos];
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= l->hn)
            break;
        if (c + 1 < l->hn && l->heap[c + 1].at < l->heap[c].at)
            c++;
        if (l->heap[c].at >= e.at)
            break;
        l->heap[pos] = l->heap[c];
        pos = c;
    }
    l->heap[pos] = e;
}

static int timer_add(struct cn_loop *l, uint64_t at, uint32_t dev, uint8_t kind, uint32_t x) {
    if (l->hn >= l->hcap) {
        l->st.heap_full++;       /* the testbed's limit: counted, the timer is lost */
        return -1;
    }
    l->heap[l->hn] = (struct cn_heap_ent){.at = at, .dev = dev, .gen_or_job = x, .kind = kind};
    heap_up(l, l->hn++);
    return 0;
}

/* conn_events.c's timers */
int cn_timer_add(struct cn_loop *l, uint64_t at, uint32_t dev, uint8_t kind, uint32_t x) {
    return timer_add(l, at, dev, kind, x);
}

static struct cn_heap_ent timer_pop(struct cn_loop *l) {
    struct cn_heap_ent top = l->heap[0];
    l->heap[0] = l->heap[--l->hn];
    if (l->hn)
        heap_down(l, 0);
    return top;
}

static void timer_arm(struct cn_loop *l) {
    uint64_t next = l->hn ? l->heap[0].at : 0;
    if (next == l->armed)
        return;
    struct itimerspec its = {.it_value = ns_to_timespec((int64_t)next)};
    timerfd_settime(l->tfd, TFD_TIMER_ABSTIME, &its, NULL);
    l->armed = next;
}

/* ---- connections ---- */

int cn_watch(struct cn_loop *l, struct cn_conn *c, uint32_t events) {
    if (c->fd < 0 || events == c->events)
        return 0;
    struct epoll_event e = {.events = events, .data.ptr = c};
    int op = c->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(l->ep, op, c->fd, &e))
        return -1;
    c->events = events;
    return 0;
}

/* Errors of the testbed's own making (its descriptors, ports, memory) vs the peer's. */
int cn_cause_of_errno(int err) {
    switch (err) {
    case EMFILE: case ENFILE: case ENOBUFS: case ENOMEM: case EADDRNOTAVAIL: case EADDRINUSE:
        return CC_TESTBED;
    default:
        return CC_RESET;
    }
}

static void conn_close(struct cn_conn *c) {
    if (c->fd >= 0)
        close(c->fd);      /* also leaves the epoll set */
    c->fd = -1;
    c->state = CS_DOWN;
    c->events = 0;
    free(c->hbuf);
    free(c->obuf);
    c->hbuf = c->obuf = NULL;
    c->hlen = 0;
    c->olen = c->ooff = c->ocap = c->inflight = c->body_left = 0;
}

/* the session's protocol state and both connections */
static void close_session(struct cn_device *d) {
    if (d->proto == CN_WEBSOCKET)
        cn_ws_close(d);
    else
        cn_http_close(d);
    conn_close(&d->sub);
    conn_close(&d->pub);
}

ssize_t cn_recv(struct cn_loop *l, struct cn_device *d, struct cn_conn *c, void *buf, size_t len) {
    ssize_t n = tcpstamp_recv(c->fd, buf, len, &l->cmap, &l->rs);
    if (n > 0) {
        d->c.bytes_in += (uint64_t)n;
        return n;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    cn_disconnect(l, d, n == 0 ? CC_SERVER_CLOSED : cn_cause_of_errno(errno));
    return -1;
}

size_t cn_read_head(struct cn_loop *l, struct cn_device *d, size_t cap) {
    struct cn_conn *c = &d->sub;
    ssize_t n = cn_recv(l, d, c, c->hbuf + c->hlen, cap - c->hlen);
    if (n <= 0)
        return 0;
    c->hlen = (uint16_t)(c->hlen + n);
    size_t end = http_head_end(c->hbuf, c->hlen);
    if (!end && c->hlen == cap)
        cn_disconnect(l, d, CC_PROTOCOL);     /* a head this long is not the answer expected */
    return end;
}

static void schedule_connect(struct cn_loop *l, struct cn_device *d, uint64_t at) {
    timer_add(l, at, d->loop_pos, CT_CONNECT, d->gen);
}

void cn_disconnect(struct cn_loop *l, struct cn_device *d, int cause) {
    if (d->sub.state == CS_DOWN && d->pub.state == CS_DOWN)
        return;
    if (d->attached_ns || d->sub.state == CS_HEAD)
        d->c.disconnects[cause]++;
    else
        d->c.connect_failures[cause]++;
    close_session(d);
    d->gen++;
    d->attached_ns = 0;
    if (d->reconnect_ms && !l->stop) {
        uint64_t base = (uint64_t)d->reconnect_ms * 1000000ULL;
        schedule_connect(l, d, (uint64_t)mono_ns() + base + xorshift(&l->rng) % (base + 1));
    }
}

static int conn_open(struct cn_loop *l, struct cn_device *d, struct cn_conn *c, uint8_t kind) {
    c->kind = kind;
    c->dev = d;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return -cn_cause_of_errno(errno) - 1;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* messages arrive on the WebSocket or the subscription: their reads get kernel stamps */
    if (kind != CK_PUB && rxstamp_enable(c->fd))
        l->st.no_kernel_stamps++;
    if (d->source.sin_addr.s_addr) {
        /* the source port is chosen at connect() for the 4-tuple, not at bind(): one source
         * address then carries up to the ephemeral range per server address and port */
        setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        if (bind(c->fd, (const struct sockaddr *)&d->source, sizeof d->source))
            return -cn_cause_of_errno(errno) - 1;
    }
    if (connect(c->fd, (const struct sockaddr *)&d->server, sizeof d->server) &&
        errno != EINPROGRESS)
        return -(errno == ECONNREFUSED ? CC_SERVER_CLOSED : cn_cause_of_errno(errno)) - 1;
    c->state = CS_CONNECTING;
    if (cn_watch(l, c, EPOLLOUT))
        return -CC_TESTBED - 1;
    return 0;
}

static void on_connect_timer(struct cn_loop *l, struct cn_device *d) {
    if (d->sub.state != CS_DOWN || l->stop)
        return;
    int r = conn_open(l, d, &d->sub, d->proto == CN_WEBSOCKET ? CK_WS : CK_SUB);
    if (r == 0 && d->proto == CN_CHUNKED)
        r = conn_open(l, d, &d->pub, CK_PUB);
    if (r) {
        if (d->sub.state == CS_DOWN && d->sub.fd >= 0)
            d->sub.state = CS_CONNECTING;       /* so cn_disconnect closes it */
        if (d->pub.state == CS_DOWN && d->pub.fd >= 0)
            d->pub.state = CS_CONNECTING;
        if (d->sub.state == CS_DOWN && d->pub.state == CS_DOWN) {
            d->c.connect_failures[-r - 1]++;
            if (d->reconnect_ms)
                schedule_connect(l, d, (uint64_t)mono_ns() + (uint64_t)d->reconnect_ms * 1000000ULL);
        } else {
            cn_disconnect(l, d, -r - 1);
        }
    }
}

/* TCP connect finished (writable): send the attach request or, for the POST connection, open. */
static void on_connected(struct cn_loop *l, struct cn_conn *c) {
    struct cn_device *d = c->dev;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
        cn_disconnect(l, d, err == ECONNREFUSED ? CC_SERVER_CLOSED : cn_cause_of_errno(err));
        return;
    }
    if (c->kind == CK_PUB) {
        c->state = CS_OPEN;
        c->hbuf = malloc(512);
        if (!c->hbuf || cn_watch(l, c, c->olen ? EPOLLIN | EPOLLOUT : EPOLLIN))
            cn_disconnect(l, d, CC_TESTBED);
        else if (c->olen)
            cn_http_on_event(l, c, EPOLLOUT);
        return;
    }
    uint32_t gen = d->gen;
    int r = c->kind == CK_WS ? cn_ws_send_request(l, d)
          : d->proto == CN_STREAM ? cn_stream_send_request(l, d) : cn_http_send_request(l, d);
    if (gen != d->gen)
        return;                   /* the request's send ended the session (counted there) */
    if (r == 0 && cn_watch(l, c, EPOLLIN | (c->olen ? EPOLLOUT : 0)))
        r = -1;
    if (r)
        cn_disconnect(l, d, CC_TESTBED);
}

/* ---- what devices send ---- */

/* `{"<key>":<value>,"device":N,"p":"xx..."}` padded to d->reply_bytes (or unpadded when the
 * fixed part is already longer) into l->tx; returns the length. */
size_t cn_build_body(struct cn_loop *l, struct cn_device *d, const char *key,
                     const char *value, int quoted) {
    int n = snprintf(l->tx, 256, quoted ? "{\"%s\":\"%s\",\"device\":%u,\"p\":\"" :
                     "{\"%s\":%s,\"device\":%u,\"p\":\"", key, value, d->index);
    size_t len = (size_t)n, want = d->reply_bytes;
    if (len + 2 < want) {
        memset(l->tx + len, 'x', want - len - 2);
        len = want - 2;
    }
    memcpy(l->tx + len, "\"}", 2);
    return len + 2;
}

/* l->tx[0..len) upstream; id: the RPC it answers (NULL: an event or the attach message) */
int cn_device_send(struct cn_loop *l, struct cn_device *d, size_t len, const char *id) {
    l->tx_state = TX_WHOLE;             /* the senders say when the bytes did not all go out */
    return d->proto == CN_WEBSOCKET ? cn_ws_send(l, d, l->tx, len, 0)
         : d->proto == CN_STREAM    ? cn_stream_send(l, d, l->tx, len)
                                    : cn_http_post(l, d, l->tx, len, id);
}

uint64_t cn_exp_interval_ns(struct cn_loop *l, uint32_t mean_ms) {
    /* inverse CDF of the exponential: an open-loop (Poisson) schedule of events */
    double u = ((double)(xorshift(&l->rng) >> 11) + 0.5) / 9007199254740992.0;
    double ns = -__builtin_log(u) * (double)mean_ms * 1e6;
    return ns > 1e15 ? (uint64_t)1e15 : (uint64_t)ns;
}

int cn_on_attached(struct cn_loop *l, struct cn_device *d) {
    uint64_t now = (uint64_t)mono_ns();
    d->attached_ns = now;
    d->c.attaches++;
    if (!d->ever_attached) {
        d->ever_attached = 1;
        l->attached_once++;
        __atomic_add_fetch(&l->set->attached_total, 1, __ATOMIC_RELAXED);
    }
    if (d->heartbeat_ms)
        timer_add(l, now + (uint64_t)d->heartbeat_ms * 1000000ULL, d->loop_pos, CT_HEARTBEAT,
                  d->gen);
    if (d->event_ms && !d->events_on)
        cn_events_start(l, d, now);   /* from the first attach on, down or up (conn_events.c) */
    if (!d->attach_body || d->proto == CN_STREAM)
        return 0;                 /* CN_STREAM: it went as the request body's first chunk */
    /* e.g. a subscription of a server that takes it as a message (webdis: ["SUBSCRIBE",..]) */
    uint32_t gen = d->gen;
    memcpy(l->tx, d->attach_body, d->attach_body_len);
    if (cn_device_send(l, d, d->attach_body_len, NULL) == 0)
        return 0;
    if (gen == d->gen)
        cn_disconnect(l, d, CC_TESTBED);   /* not queued and the session still up: ours */
    return -1;
}

static void log_reply(struct cn_loop *l, const struct cn_job *J, struct cn_device *d,
                      uint64_t end, uint64_t sent, uint8_t outcome) {
    if (l->log_n >= l->log_cap) {
        l->st.log_dropped++;
        return;
    }
    struct cn_log_row *r = &l->log[l->log_n++];
    *r = (struct cn_log_row){.arrival_ns = J->arrival_ns, .due_ns = J->due_ns, .end_ns = end,
                             .sent_ns = sent, .read_ns = J->read_ns, .device = d->index,
                             .outcome = outcome, .idlen = J->idlen, .kstamp = J->kstamp};
    memcpy(r->id, J->id, J->idlen);
    if (outcome == CO_SENT && end >= J->due_ns && J->due_ns > J->arrival_ns)
        l->late[l->late_n++] = end - J->due_ns;
}

static void send_reply(struct cn_loop *l, uint32_t j) {
    struct cn_job *J = &l->jobs[j];
    struct cn_device *d = &l->dev[J->dev];
    uint64_t end = (uint64_t)mono_ns();
    if (J->gen != d->gen || !d->attached_ns) {
        d->c.replies_lost++;
        log_reply(l, J, d, end, 0, CO_LOST_DISCONNECT);
    } else {
        char id[CN_ID_MAX + 1];
        memcpy(id, J->id, J->idlen);
        id[J->idlen] = '\0';
        /* with the id in the POST's header or target the body does not repeat it */
        size_t len = l->set->reply_id == CR_BODY ? cn_build_body(l, d, "id", id, 1)
                                                 : cn_build_body(l, d, "reply", "1", 0);
        uint64_t sent = (uint64_t)mono_ns();
        if (cn_device_send(l, d, len, id) == 0) {
            d->c.replies++;
            log_reply(l, J, d, end, sent, CO_SENT);
        } else {
            d->c.replies_lost++;
            log_reply(l, J, d, end, 0, CO_SEND_ERROR);
        }
    }
    J->next = l->jfree;
    l->jfree = j;
}

/* A message that arrived on a device's connection: an RPC when it carries an id after the
 * marker (the id characters that follow it, copied into the reply), anything else is counted
 * and not answered. The id ends at the first other character, so it is found the same way in
 * a message the server relays as it came ("id":"3-7") and in one it wraps and escapes
 * (webdis: {"SUBSCRIBE":["message","rpc.5","{\"id\":\"3-7\"}"]} with marker id\":\"). */
void cn_on_message(struct cn_loop *l, struct cn_device *d, const char *msg, size_t len,
                   size_t total) {
    /* stamped by the read that completed it (tcpstamp.h): its last bytes came with that read's
     * last segment, so the kernel's stamp of that segment is when the message was whole here
     * (earlier reads carried only its beginning); the read's own time where the kernel gave
     * none. Not the time the parse reached it (a merged chunk's last message included). */
    tcpstamp_t st = l->rs.read_ns ? l->rs : (tcpstamp_t){(uint64_t)mono_ns(), 0};
    uint64_t now = tcpstamp_at(&st);
    if (st.kernel_ns)
        l->st.rx_kernel++;
    else
        l->st.rx_user++;
    d->c.msgs_in++;
    const char *mk = l->set->id_marker;
    size_t ml = strlen(mk);
    const char *p = ml <= len ? memmem(msg, len, mk, ml) : NULL;
    const char *end = p ? p + ml : NULL;
    while (end && end < msg + len && end - (p + ml) <= CN_ID_MAX && cn_id_char(*end))
        end++;
    /* an id that runs to the end of what was handed over while the message goes on (a
     * chunk's head only) may be cut off: never answer with part of an id */
    if (!end || end - (p + ml) > CN_ID_MAX || end == p + ml || (end == msg + len && len < total)) {
        d->c.no_id++;
        return;
    }
    d->c.rpcs_in++;
    uint32_t j = l->jfree;
    if (j != FL_CN_NIL)
        l->jfree = l->jobs[j].next;
    else if (l->jbump < l->jcap)
        j = l->jbump++;
    else {
        l->st.pool_full++;       /* the engine's limit: the RPC goes unanswered, counted */
        d->c.replies_lost++;
        return;
    }
    struct cn_job *J = &l->jobs[j];
    J->dev = d->loop_pos;
    J->gen = d->gen;
    J->idlen = (uint8_t)(end - (p + ml));
    memcpy(J->id, p + ml, J->idlen);
    J->arrival_ns = now;
    J->read_ns = st.read_ns;
    J->kstamp = st.kernel_ns != 0;
    /* the service runs from the arrival: a read later than that is the engine's delay, and
     * when it exceeds the service it shows as timer lateness (end - due, the testbed's) */
    J->due_ns = now + (uint64_t)d->service_us * 1000ULL;
    if (d->service_us == 0 || timer_add(l, J->due_ns, d->loop_pos, CT_REPLY, j))
        send_reply(l, j);
}

static void on_timers(struct cn_loop *l) {
    uint64_t now = (uint64_t)mono_ns();
    while (l->hn && l->heap[0].at <= now) {
        struct cn_heap_ent e = timer_pop(l);
        struct cn_device *d = &l->dev[e.dev];
        if (e.kind == CT_REPLY) {
            send_reply(l, e.gen_or_job);
        } else if (e.kind == CT_EVENT) {
            cn_event_due(l, d, e.at);   /* not of a session: the schedule runs while down */
        } else if (e.gen_or_job != d->gen) {
            /* a timer of an earlier session */
        } else if (e.kind == CT_CONNECT) {
            on_connect_timer(l, d);
        } else if (d->attached_ns && e.kind == CT_HEARTBEAT) {
            int r = d->proto == CN_WEBSOCKET ? cn_ws_send(l, d, "", 0, 1)
                  : cn_device_send(l, d, cn_build_body(l, d, "hb", "1", 0), NULL);
            if (r == 0)
                d->c.heartbeats++;
            if (d->gen == e.gen_or_job)
                timer_add(l, now + (uint64_t)d->heartbeat_ms * 1000000ULL, e.dev,
                          CT_HEARTBEAT, d->gen);
        }
        now = (uint64_t)mono_ns();
    }
}

static void mark_attached(struct cn_set *s) {
    char path[4096];
    snprintf(path, sizeof path, "%s/attached", s->log_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
}

static void *loop_run(void *arg) {
    struct cn_loop *l = arg;
    char name[16];
    snprintf(name, sizeof name, "conn-loop%d", l->id);
    pthread_setname_np(pthread_self(), name);
    if (l->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(l->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    struct epoll_event ev[EP_EVENTS];
    int announced = 0;
    while (!l->stop) {
        int n = epoll_wait(l->ep, ev, EP_EVENTS, -1);
        int64_t t0 = mono_ns();
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "wot-fleet: conn loop %d: epoll_wait: %s\n", l->id, strerror(errno));
            break;
        }
        l->st.wakeups++;
        for (int i = 0; i < n; i++) {
            void *p = ev[i].data.ptr;
            if (p == &l->tfd) {
                l->armed = UINT64_MAX;
            } else if (p == &l->wfd) {
                /* stop request: l->stop is set */
            } else {
                struct cn_conn *c = p;
                if (c->fd < 0)
                    continue;     /* closed earlier in this batch */
                l->rs.read_ns = 0;   /* no read of this event yet: no stamp of another's */
                if (c->state == CS_CONNECTING)
                    on_connected(l, c);
                else if (c->kind == CK_WS)
                    cn_ws_on_event(l, c->dev, ev[i].events);
                else
                    cn_http_on_event(l, c, ev[i].events);
            }
        }
        on_timers(l);
        timer_arm(l);
        if (!announced && l->set->attached_total == l->set->ndev) {
            announced = 1;
            if (!__atomic_exchange_n(&l->set->attached_marked, 1, __ATOMIC_RELAXED))
                mark_attached(l->set);
        }
        int64_t t1 = mono_ns();
        l->st.busy_ns += (uint64_t)(t1 - t0);
        clock_map_refresh(&l->cmap, t1, CLOCK_MAP_REFRESH_NS);   /* once a second, idle side */
    }
    l->st.cpu_ns = (uint64_t)clock_read_ns(CLOCK_THREAD_CPUTIME_ID);
    return NULL;
}

static int loop_init(struct cn_set *s, struct cn_loop *l, int id, uint32_t first, uint32_t n) {
    l->id = id;
    l->set = s;
    l->dev = s->dev + first;
    l->ndev = n;
    l->cpu = s->ncpus ? s->cpus[id % s->ncpus] : -1;
    l->rng = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)mono_ns() + 77u * (uint64_t)id);
    l->jfree = FL_CN_NIL;
    clock_map_init(&l->cmap);
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    l->wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    l->jcap = n * JOBS_PER_DEVICE;
    l->hcap = n * TIMERS_PER_DEVICE + l->jcap;
    l->log_cap = s->log_capacity;
    /* calloc of large arrays maps zero pages: only what is used costs memory */
    l->jobs = calloc(l->jcap, sizeof *l->jobs);
    l->heap = calloc(l->hcap, sizeof *l->heap);
    l->log = calloc(l->log_cap ? l->log_cap : 1, sizeof *l->log);
    l->late = calloc(l->log_cap ? l->log_cap : 1, sizeof *l->late);
    int ev_bad = cn_events_init(l);
    struct epoll_event e1 = {.events = EPOLLIN, .data.ptr = &l->tfd};
    struct epoll_event e2 = {.events = EPOLLIN, .data.ptr = &l->wfd};
    if (l->ep < 0 || l->tfd < 0 || l->wfd < 0 || !l->jobs || !l->heap || !l->log || !l->late ||
        ev_bad ||
        epoll_ctl(l->ep, EPOLL_CTL_ADD, l->tfd, &e1) ||
        epoll_ctl(l->ep, EPOLL_CTL_ADD, l->wfd, &e2)) {
        fprintf(stderr, "wot-fleet: conn loop %d: cannot create its epoll/timerfd/eventfd or "
                "reserve memory: %s\n", id, strerror(errno));
        return -1;
    }
    return 0;
}

uint64_t cn_needed_fds(const struct cn_set *s) {
    uint64_t n = 0;
    for (uint32_t i = 0; i < s->ndev; i++)
        n += s->dev[i].proto == CN_CHUNKED ? 2 : 1;
    return n + FDS_PER_LOOP * (uint64_t)s->nloops + 1;   /* + the stamp pin */
}

int cn_start(struct cn_set *s) {
    /* the kernel stamps arriving segments only while some socket asks, and resumes only a
     * while after one asks again: one socket holds it on for the whole run (rxstamp_pin.h),
     * so a reconnect after every device was down still gets stamps */
    s->stamp_pin = rxstamp_pin(STAMP_PIN_WAIT_NS, &s->pin_on);
    s->pinned = 1;
    s->loops = calloc((size_t)s->nloops, sizeof *s->loops);
    if (!s->loops)
        return -1;
    for (int i = 0; i < s->nloops; i++)
        s->loops[i].ep = s->loops[i].tfd = s->loops[i].wfd = -1;
    uint64_t t0 = (uint64_t)mono_ns(), gap = 1000000000ULL / (s->attach_rate ? s->attach_rate : 1);
    for (int i = 0; i < s->nloops; i++) {
        uint64_t n = s->ndev, L = (uint64_t)s->nloops;
        uint32_t first = (uint32_t)((n * (uint64_t)i + L - 1) / L);
        uint32_t end = (uint32_t)((n * (uint64_t)(i + 1) + L - 1) / L);
        if (loop_init(s, &s->loops[i], i, first, end - first))
            return -1;
        for (uint32_t k = 0; k < end - first; k++) {
            struct cn_device *d = &s->loops[i].dev[k];
            d->loop_pos = k;
            d->sub.fd = d->pub.fd = -1;
            schedule_connect(&s->loops[i], d, t0 + (first + k) * gap);
        }
        timer_arm(&s->loops[i]);
    }
    for (int i = 0; i < s->nloops; i++) {
        int e = pthread_create(&s->loops[i].thread, NULL, loop_run, &s->loops[i]);
        if (e) {
            fprintf(stderr, "wot-fleet: cannot start conn loop %d: %s\n", i, strerror(e));
            s->nloops = i;
            return -1;
        }
    }
    return 0;
}

void cn_stop(struct cn_set *s) {
    for (int i = 0; s->loops && i < s->nloops; i++) {
        uint64_t one = 1;
        s->loops[i].stop = 1;
        if (write(s->loops[i].wfd, &one, sizeof one) < 0) {
            /* the loop also sees stop at its next wake-up */
        }
    }
    for (int i = 0; s->loops && i < s->nloops; i++)
        if (s->loops[i].thread)
            pthread_join(s->loops[i].thread, NULL);
}

void cn_release(struct cn_set *s) {
    for (int i = 0; s->loops && i < s->nloops; i++) {
        struct cn_loop *l = &s->loops[i];
        for (uint32_t k = 0; k < l->ndev; k++)
            close_session(&l->dev[k]);
        if (l->ep >= 0)
            close(l->ep);
        if (l->tfd >= 0)
            close(l->tfd);
        if (l->wfd >= 0)
            close(l->wfd);
        free(l->jobs);
        free(l->heap);
        free(l->log);
        free(l->late);
        cn_events_free(l);
    }
    free(s->loops);
    s->loops = NULL;
    if (s->pinned && s->stamp_pin >= 0)
        close(s->stamp_pin);
    s->pinned = 0;
}
