/* push_run.c - the push state machine on the I/O thread (push.h): setup one by one, the test
 * open loop (timerfd to the due instant minus PUSH_SPIN_NS, then a spin), teardown one by one
 * after SIGTERM. Responses are matched by token (high half the device's salt, low half salt
 * XOR row index) or, for empty ACK/RST, by message ID. */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "clock.h"
#include "impair.h"
#include "rxstamp.h"
#include "push.h"
#include "push_int.h"

#define PUSH_SPIN_NS 30000ULL                 /* sleep to due - 30 µs, spin the rest */
#define TEARDOWN_BUDGET_NS (10 * NS_PER_S)    /* within the runner's 15 s stop grace */
#define RX_BATCH 64
/* RFC 7252 §4.8: a setup/teardown CON (a device booting against a busy platform) is
 * retransmitted after ACK_TIMEOUT x [1, 1.5), doubling, at most MAX_RETRANSMIT times, within
 * --push-timeout-ms; a test CON only with `retransmit` (as the GE's --retransmit), the same
 * way, between the scheduled sends: never within PUSH_SPIN_NS of the next one */
#define ACK_TIMEOUT_NS (2 * NS_PER_S)
#define MAX_RETRANSMIT 4
#define CTL_POLL_NS (50 * NS_PER_MS)         /* without inotify: until the start is read */
#define START_FILE "push-start"
#define GO_FILE "push-go"        /* the harness: the targets answer, begin the setup */
#define SETUP_FILE "push-setup.csv"

enum state { ST_IDLE, ST_SETUP, ST_WAIT, ST_TEST, ST_TEARDOWN, ST_DONE };

static int sock = -1, tfd = -1, ifd = -1;
static char dir[4096];
static enum state st = ST_IDLE;
static size_t next, oldest;            /* next row to send; lowest row maybe unfinished */
static uint32_t salt_hi, salt_lo;
static uint16_t mid;
static uint32_t *mid_row;              /* message ID -> row + 1 */
static uint64_t setup_begin_ns, base_ns, pending_start, teardown_end;
static int stopping, setup_any_ok, rx_kernel = 1;
static int ctl_polls;                  /* ifd is a polling timerfd, not inotify */
static clock_map_t cmap;
static uint64_t late_acks;             /* CON answers after their row ended: still ACKed */

extern int push_write_setup(const char *dir, uint64_t base);   /* push_out.c */

int push_sock_fd(void) { return sock; }
int push_timer_fd(void) { return tfd; }
int push_ctl_fd(void) { return ifd; }
int push_done(void) { return st == ST_DONE; }
uint64_t push_base_ns(void) { return base_ns ? base_ns : setup_begin_ns; }
int push_rx_kernel(void) { return rx_kernel; }
uint64_t push_late_acks(void) { return late_acks; }
int push_started(void) { return base_ns != 0; }

int push_open(const char *listen, const char *log_dir) {
    snprintf(dir, sizeof dir, "%s", log_dir);
    /* the device's host (--listen without its port), any port: the system under test sees
     * one client per device */
    char host[64] = "0.0.0.0";
    if (listen[0] == '[') {
        const char *e = strchr(listen, ']');
        if (e && (size_t)(e - listen - 1) < sizeof host) {
            memcpy(host, listen + 1, (size_t)(e - listen - 1));
            host[e - listen - 1] = '\0';
        }
    } else {
        const char *c = strchr(listen, ':');
        size_t n = c ? (size_t)(c - listen) : strlen(listen);
        if (n < sizeof host) {
            memcpy(host, listen, n);
            host[n] = '\0';
        }
    }
    int v6 = strchr(host, ':') != NULL;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t sl;
    if (v6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        inet_pton(AF_INET6, host, &a->sin6_addr);
        sl = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        inet_pton(AF_INET, host, &a->sin_addr);
        sl = sizeof *a;
    }
    sock = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int big = 4 << 20;
    if (sock < 0 || bind(sock, (struct sockaddr *)&ss, sl)) {
        fprintf(stderr, "wot-device: --push: cannot bind a client socket on %s: %s\n", host,
                strerror(errno));
        return -1;
    }
    if (setsockopt(sock, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big))
        setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    if (rxstamp_enable(sock))
        rx_kernel = 0;
    clock_map_init(&cmap);
    tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    mid_row = calloc(65536, sizeof *mid_row);
    ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (ifd >= 0 && inotify_add_watch(ifd, dir, IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
        close(ifd);
        ifd = -1;
    }
    if (ifd < 0) {
        /* fs.inotify.max_user_instances (128 by default) is shared by every device of one
         * uid: beyond it, look for the control files every CTL_POLL_NS until the start */
        ctl_polls = 1;
        ifd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        struct itimerspec its = {.it_value = ns_to_timespec(CTL_POLL_NS),
                                 .it_interval = ns_to_timespec(CTL_POLL_NS)};
        if (ifd >= 0)
            timerfd_settime(ifd, 0, &its, NULL);
    }
    if (tfd < 0 || ifd < 0 || !mid_row) {
        fprintf(stderr, "wot-device: --push: cannot set up its timer or watch %s: %s\n", dir,
                strerror(errno));
        return -1;
    }
    uint64_t r[2] = {0, 0};
    if (getrandom(r, sizeof r, 0) != sizeof r)
        r[0] = (uint64_t)mono_ns() * 0x9E3779B97F4A7C15ULL, r[1] = r[0] >> 17;
    salt_hi = (uint32_t)r[0];
    salt_lo = (uint32_t)(r[0] >> 32);
    mid = (uint16_t)r[1];
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);   /* the timerfd wakes within µs of its time */
    return 0;
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static void send_row(size_t i) {
    struct push_row *r = &P.rows[i];
    if (!r->dg_len) {            /* @location without a location: nothing to send */
        r->outcome = OUT_ERROR;
        return;
    }
    uint8_t *d = P.dg + r->dg_off;
    r->mid = mid++;
    d[2] = (uint8_t)(r->mid >> 8);
    d[3] = (uint8_t)r->mid;
    put_be32(d + 4, salt_hi);
    put_be32(d + 8, salt_lo ^ (uint32_t)i);
    mid_row[r->mid] = (uint32_t)i + 1;
    const struct push_target *t = &P.targets[r->target];
    r->sent_ns = (uint64_t)mono_ns();
    if (impair_sendto(sock, d, r->dg_len, (const struct sockaddr *)&t->sa, t->len) < 0) {
        r->sent_ns = 0;          /* a local send failure: error without sent_ns */
        r->outcome = OUT_ERROR;
    } else if (r->con && (r->phase != PH_TEST || r->retransmit)) {
        uint64_t jitter = (uint64_t)((salt_lo ^ r->mid) * 2654435761u % 1000u);  /* per device */
        r->retx_ns = r->sent_ns + ACK_TIMEOUT_NS + ACK_TIMEOUT_NS / 2 * jitter / 1000;
        if (r->phase == PH_TEST)
            push_rtx_push((uint32_t)i);
    }
}

/* Sends row r's datagram again (same message ID and token) and schedules the next one. */
static void resend(struct push_row *r, uint64_t now) {
    const struct push_target *t = &P.targets[r->target];
    if (impair_sendto(sock, P.dg + r->dg_off, r->dg_len, (const struct sockaddr *)&t->sa, t->len) >= 0)
        r->retx++;
    r->retx_ns = now + (ACK_TIMEOUT_NS << r->retx);
}

static int rtx_pending(const struct push_row *r) {
    return !r->outcome && r->retx_ns && !r->acked && r->retx < MAX_RETRANSMIT;
}

/* Test CONs with `retransmit` whose time has come, while the next scheduled send is more than
 * PUSH_SPIN_NS away: the open-loop schedule goes first, a retransmission waits for it. */
static void retransmit_test(uint64_t now) {
    size_t end = P.n_setup + P.n_test;
    uint32_t i;
    while (push_rtx_top(&i)) {
        struct push_row *r = &P.rows[i];
        if (!rtx_pending(r)) {             /* answered, ACKed, timed out or done: drop it */
            push_rtx_pop();
            continue;
        }
        if (r->retx_ns > now || (next < end && base_ns + P.rows[next].at_ns < now + PUSH_SPIN_NS))
            return;
        push_rtx_pop();
        resend(r, now);
        if (r->retx < MAX_RETRANSMIT)
            push_rtx_push(i);
        now = (uint64_t)mono_ns();
    }
}

/* The open setup/teardown CON, unanswered and unacknowledged: send it again when due. */
static void retransmit(uint64_t now) {
    if ((st != ST_SETUP && st != ST_TEARDOWN) || next == 0)
        return;
    struct push_row *r = &P.rows[next - 1];
    if (rtx_pending(r) && now >= r->retx_ns)
        resend(r, now);
}

static void arm(void) {
    uint64_t when = 0;
    if (st == ST_TEST && next < P.n_setup + P.n_test) {
        uint64_t due = base_ns + P.rows[next].at_ns;
        when = due > PUSH_SPIN_NS ? due - PUSH_SPIN_NS : 1;
    }
    uint32_t top;
    while (push_rtx_top(&top) && !rtx_pending(&P.rows[top]))
        push_rtx_pop();               /* answered or ended: no wake-up for it */
    if (st == ST_TEST && push_rtx_top(&top) && (!when || P.rows[top].retx_ns < when))
        when = P.rows[top].retx_ns;
    if ((st == ST_SETUP || st == ST_TEARDOWN) && next > 0) {
        const struct push_row *r = &P.rows[next - 1];
        if (rtx_pending(r) && (!when || r->retx_ns < when))
            when = r->retx_ns;
    }
    for (size_t i = oldest; i < next; i++) {   /* the first unfinished row's deadline */
        if (P.rows[i].outcome)
            continue;
        uint64_t dl = P.rows[i].sent_ns + P.timeout_ns;
        if (st == ST_TEARDOWN && teardown_end < dl)
            dl = teardown_end;
        if (!when || dl < when)
            when = dl;
        break;
    }
    struct itimerspec its = {.it_value = ns_to_timespec((int64_t)when)};
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);   /* when == 0 disarms */
}

/* Rows in send order end in send order, except for answers: skip what has ended. */
static void expire(uint64_t now) {
    while (oldest < next) {
        struct push_row *r = &P.rows[oldest];
        if (!r->outcome) {
            if (now < r->sent_ns + P.timeout_ns)
                break;
            r->outcome = OUT_TIMEOUT;
        }
        oldest++;
    }
}

static void mark_unsent(size_t from, size_t to, uint64_t now) {
    for (size_t i = from; i < to; i++)
        if (!P.rows[i].outcome && !P.rows[i].sent_ns) {
            P.rows[i].outcome = OUT_UNSENT;
            if (!P.rows[i].due_ns)
                P.rows[i].due_ns = now;
        }
}

/* GE rule for requests still open when the device stops: older than the timeout -> timeout,
 * else error with sent_ns kept and no code. */
static void close_open(size_t from, size_t to, uint64_t now) {
    for (size_t i = from; i < to; i++) {
        struct push_row *r = &P.rows[i];
        if (!r->outcome && r->sent_ns)
            r->outcome = now >= r->sent_ns + P.timeout_ns ? OUT_TIMEOUT : OUT_ERROR;
    }
}

static void begin_test(void);
static void begin_teardown(uint64_t now);

/* Setup and teardown: the next row once the previous one has ended. A failed setup step
 * ends the setup (what follows depends on it); teardown goes on regardless (best effort). */
static void advance_seq(void) {
    uint64_t now = (uint64_t)mono_ns();
    size_t first = st == ST_SETUP ? 0 : P.n_setup + P.n_test;
    size_t end = st == ST_SETUP ? P.n_setup : P.n;
    for (;;) {
        if (next > first) {
            const struct push_row *prev = &P.rows[next - 1];
            if (!prev->outcome)
                return;                              /* waiting for its answer */
            if (st == ST_SETUP && prev->outcome != OUT_OK) {
                mark_unsent(next, end, now);
                next = end;
            }
        }
        if (next == end)
            break;
        if (P.rows[next].outcome || (st == ST_TEARDOWN && now >= teardown_end)) {
            mark_unsent(next, end, now);             /* stopped, or the budget is spent */
            next = end;
            break;
        }
        P.rows[next].due_ns = now;
        send_row(next++);
    }
    if (st == ST_SETUP) {
        oldest = next;
        for (size_t i = 0; i < P.n_setup; i++)
            setup_any_ok |= P.rows[i].outcome == OUT_OK;
        if (P.n_setup && !P.have_location)
            for (size_t i = P.n_setup; i < P.n; i++)
                if (!strncmp(P.rows[i].path, PUSH_LOCATION, strlen(PUSH_LOCATION))) {
                    fprintf(stderr, "wot-device: --push: no setup answer carried a Location; "
                            "the @location requests will end in error\n");
                    break;
                }
        for (size_t i = P.n_setup; i < P.n; i++)   /* refresh/teardown paths: the location */
            if (!P.rows[i].dg_len && P.have_location && push_encode(&P.rows[i]))
                fprintf(stderr, "wot-device: --push: row %zu does not fit one datagram with "
                        "the location '%s'\n", i, P.location);
        push_write_setup(dir, setup_begin_ns);
        st = ST_WAIT;
        if (stopping)
            begin_teardown(now);
        else if (pending_start)
            begin_test();
    } else if (st == ST_TEARDOWN) {
        oldest = next;
        st = ST_DONE;
    }
}

void push_begin(void) {
    if (st != ST_IDLE)
        return;
    setup_begin_ns = (uint64_t)mono_ns();
    st = ST_SETUP;
    next = oldest = 0;
    advance_seq();
    arm();
}

static void begin_test(void) {
    base_ns = pending_start;
    st = ST_TEST;
    next = oldest = P.n_setup;
    clock_map_refresh(&cmap, mono_ns(), 0);
    arm();
}

static void begin_teardown(uint64_t now) {
    st = ST_TEARDOWN;
    next = oldest = P.n_setup + P.n_test;
    if (next == P.n || (P.n_setup && !setup_any_ok)) {  /* nothing registered: nothing to undo */
        mark_unsent(next, P.n, now);
        st = ST_DONE;
        return;
    }
    teardown_end = now + TEARDOWN_BUDGET_NS;
    advance_seq();
    arm();
}

void push_on_ctl(void) {
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    while ((n = read(ifd, buf, sizeof buf)) > 0) {
    }
    if (stopping)
        return;
    char path[4200], text[64];
    if (st == ST_IDLE) {
        snprintf(path, sizeof path, "%s/" GO_FILE, dir);
        if (access(path, F_OK))
            return;
        push_begin();
    }
    if (pending_start)
        return;
    snprintf(path, sizeof path, "%s/" START_FILE, dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t k = read(fd, text, sizeof text - 1);
    close(fd);
    if (k <= 0)
        return;
    text[k] = '\0';
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || (*end && *end != '\n')) {
        fprintf(stderr, "wot-device: %s: expected one CLOCK_MONOTONIC ns value\n", path);
        return;
    }
    pending_start = v;
    if (ctl_polls) {                   /* nothing more to look for */
        struct itimerspec off = {{0, 0}, {0, 0}};
        timerfd_settime(ifd, 0, &off, NULL);
    }
    if (st == ST_WAIT)
        begin_test();
}

static void answer_ack(const struct push_msg *m, const struct sockaddr_storage *from,
                       socklen_t fl) {
    uint8_t ack[4] = {0x60, 0, (uint8_t)(m->mid >> 8), (uint8_t)m->mid};
    impair_sendto(sock, ack, sizeof ack, (const struct sockaddr *)from, fl);
}

static void on_datagram(const uint8_t *d, size_t len, uint64_t now, uint64_t kern,
                        const struct sockaddr_storage *from, socklen_t fl) {
    struct push_msg m;
    if (push_parse(d, len, &m))
        return;
    struct push_row *r = NULL;
    size_t i = 0;
    if (m.code == 0) {                                  /* empty ACK or RST: by message ID */
        uint32_t k = mid_row[m.mid];
        if (!k || P.rows[k - 1].mid != m.mid || P.rows[k - 1].outcome || !P.rows[k - 1].sent_ns)
            return;
        i = k - 1;
        r = &P.rows[i];
        if (m.type == 3) {
            r->outcome = OUT_RESET;
            r->recv_ns = now, r->recv_k_ns = kern;
        } else if (m.type == 2) {
            r->acked = 1;                               /* a separate response follows */
        }
    } else if (m.code >= 0x40) {                        /* a response: by token */
        if (m.type == 0)
            answer_ack(&m, from, fl);
        uint32_t hi = 0, lo = 0;
        if (m.tkl == PUSH_TKL) {
            hi = (uint32_t)m.token[0] << 24 | (uint32_t)m.token[1] << 16 |
                 (uint32_t)m.token[2] << 8 | m.token[3];
            lo = (uint32_t)m.token[4] << 24 | (uint32_t)m.token[5] << 16 |
                 (uint32_t)m.token[6] << 8 | m.token[7];
        }
        i = lo ^ salt_lo;
        if (m.tkl != PUSH_TKL || hi != salt_hi || i >= P.n || P.rows[i].outcome ||
            !P.rows[i].sent_ns) {
            late_acks += m.type == 0;
            return;
        }
        r = &P.rows[i];
        r->code = m.code;
        r->outcome = (m.code >> 5) == 2 ? OUT_OK : OUT_ERROR;
        r->recv_ns = now, r->recv_k_ns = kern;
        if (r->phase == PH_SETUP && r->outcome == OUT_OK && !P.have_location)
            push_take_location(&m);
    }
    if (r && r->outcome && (st == ST_SETUP || st == ST_TEARDOWN))
        advance_seq();
}

void push_on_sock(void) {
    uint8_t buf[PUSH_MAX_DGRAM + 256];
    for (int b = 0; b < RX_BATCH; b++) {
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
        rxstamp_ctl_t ctl;
        struct msghdr msg = rxstamp_msg(&iov, &ctl);
        struct sockaddr_storage from;
        msg.msg_name = &from;
        msg.msg_namelen = sizeof from;
        ssize_t n = recvmsg(sock, &msg, 0);
        if (n < 0)
            break;
        uint64_t now = (uint64_t)mono_ns();
        int64_t rt = rxstamp_realtime_ns(&msg);
        uint64_t kern = rt > 0 ? (uint64_t)clock_map_to_mono(&cmap, rt) : 0;
        if (!impair_admit_in(sock, buf, (size_t)n, (const struct sockaddr *)&from,
                             msg.msg_namelen, kern ? kern : now))
            continue;                   /* the device's link lost it, or holds it */
        on_datagram(buf, (size_t)n, now, kern, &from, msg.msg_namelen);
    }
    expire((uint64_t)mono_ns());
    if (st == ST_SETUP || st == ST_TEARDOWN)
        advance_seq();
    arm();
}

void push_on_replay(const uint8_t *d, size_t len, uint64_t arrival, const void *from,
                    socklen_t fromlen) {
    struct sockaddr_storage src;
    memset(&src, 0, sizeof src);
    memcpy(&src, from, fromlen < sizeof src ? fromlen : sizeof src);
    on_datagram(d, len, (uint64_t)mono_ns(), arrival, &src, fromlen);   /* emulated arrival */
    expire((uint64_t)mono_ns());
    if (st == ST_SETUP || st == ST_TEARDOWN)
        advance_seq();
    arm();
}

void push_on_timer(void) {
    uint64_t x;
    if (read(tfd, &x, sizeof x) < 0) {
    }
    uint64_t now = (uint64_t)mono_ns();
    expire(now);
    if (st == ST_TEST) {
        size_t end = P.n_setup + P.n_test;
        if (next < end) {
            uint64_t due = base_ns + P.rows[next].at_ns;
            while (now < due && due - now <= PUSH_SPIN_NS)
                now = (uint64_t)mono_ns();   /* the last µs before the send */
        }
        while (next < end && base_ns + P.rows[next].at_ns <= now) {
            P.rows[next].due_ns = base_ns + P.rows[next].at_ns;
            send_row(next++);
            now = (uint64_t)mono_ns();
        }
        retransmit_test(now);
    } else if (st == ST_SETUP || st == ST_TEARDOWN) {
        retransmit(now);
        if (st == ST_TEARDOWN && now >= teardown_end)
            close_open(oldest, next, now + P.timeout_ns);   /* budget spent: timeouts */
        advance_seq();
    }
    clock_map_refresh(&cmap, (int64_t)now, CLOCK_MAP_REFRESH_NS);
    arm();
}

int push_stop(void) {
    uint64_t now = (uint64_t)mono_ns();
    if (stopping) {                      /* a second signal: stop now */
        close_open(0, P.n, now);
        mark_unsent(0, P.n, now);
        st = ST_DONE;
        return 0;
    }
    stopping = 1;
    switch (st) {
    case ST_IDLE:
        mark_unsent(0, P.n, now);
        st = ST_DONE;
        break;
    case ST_SETUP:                        /* teardown follows once the open step ends */
        mark_unsent(next, P.n_setup, now);
        mark_unsent(P.n_setup, P.n_setup + P.n_test, now);
        break;
    case ST_WAIT:
    case ST_TEST:
        close_open(P.n_setup, P.n_setup + P.n_test, now);
        mark_unsent(P.n_setup, P.n_setup + P.n_test, now);
        begin_teardown(now);
        break;
    default:
        break;
    }
    return st != ST_DONE;
}

void push_finalize(void) {
    uint64_t now = (uint64_t)mono_ns();
    close_open(0, P.n, now);
    mark_unsent(0, P.n, now);
}
