/* obs_probe.c - Observe (RFC 7641) load against libcoap's example server (coap-server-notls),
 * for bench/observe_bench.py. libcoap's server notifies /example_data's observers on every PUT
 * to it (its /time notifies only once a second), so this probe is both the trigger and the
 * observers:
 *   - OBSERVERS sockets, each registering once (CON GET, Observe 0, token = observer number):
 *     one server session per observer, as for many real clients;
 *   - one trigger socket sending NON PUTs at RATE per second for SECONDS on an absolute
 *     schedule, payload = the PUT's index as 10 ASCII digits; the server stores it and puts it
 *     into every notification, which names the PUT a notification reports exactly;
 *   - each notification: kernel receive stamp (SO_TIMESTAMPNS, mapped to CLOCK_MONOTONIC),
 *     CON ones ACKed at once.
 * Writes OUT (CSV put,observer,send_ns,recv_ns,type; CLOCK_MONOTONIC ns) and prints one line
 * "registered puts put_responses notifications late_drain_ms". Loopback only; bounded: at most
 * 30 s of triggers, 1024 observers, 2 M records, 1 s drain.
 * usage: obs_probe HOST PORT PATH OBSERVERS RATE SECONDS OUT */
#ifndef _GNU_SOURCE /* testkit/bench.py compile_tool passes -D_GNU_SOURCE */
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "rxstamp.h"

#define MAX_OBS 1024
#define MAX_REC 2000000

typedef struct {
    uint32_t put, obs;
    int64_t recv_ns;
    uint8_t type;
} rec_t;

static size_t put_path(uint8_t *b, size_t n, const char *path) {
    size_t pl = strlen(path); /* one segment, < 269 bytes */
    if (pl < 13) {
        b[n++] = (uint8_t)((11 << 4) | pl);
    } else {
        b[n++] = (uint8_t)((11 << 4) | 13);
        b[n++] = (uint8_t)(pl - 13);
    }
    memcpy(b + n, path, pl);
    return n + pl;
}

/* the payload of a CoAP message (after 0xFF), or NULL */
static const uint8_t *payload(const uint8_t *d, size_t len, size_t *plen) {
    size_t i = 4 + (d[0] & 15);
    while (i < len && d[i] != 0xFF) {
        unsigned dl = d[i] >> 4, ol = d[i] & 15;
        i++;
        if (dl == 13)
            i += 1;
        else if (dl == 14)
            i += 2;
        if (ol == 13)
            ol = (unsigned)d[i++] + 13;
        else if (ol == 14) {
            ol = ((unsigned)d[i] << 8 | d[i + 1]) + 269;
            i += 2;
        }
        i += ol;
    }
    if (i >= len)
        return NULL;
    *plen = len - i - 1;
    return d + i + 1;
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: obs_probe HOST PORT PATH OBSERVERS RATE SECONDS OUT\n");
        return 2;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1 || (ntohl(a.sin_addr.s_addr) >> 24) != 127) {
        fprintf(stderr, "obs_probe: loopback IPv4 only\n");
        return 2;
    }
    const char *path = argv[3];
    int nobs = atoi(argv[4]);
    double rate = atof(argv[5]), secs = atof(argv[6]);
    if (strlen(path) >= 200 || nobs < 1 || nobs > MAX_OBS || rate <= 0 || rate > 1e6 || secs <= 0 ||
        secs > 30 || rate * secs * nobs > MAX_REC) {
        fprintf(stderr, "obs_probe: bad arguments (1..%d observers, <= 30 s, <= %d records)\n",
                MAX_OBS, MAX_REC);
        return 2;
    }
    rec_t *rec = calloc(MAX_REC, sizeof *rec);
    int64_t *sent = calloc((size_t)(rate * secs) + 1, sizeof *sent);
    int ep = epoll_create1(0);
    int fds[MAX_OBS + 1];
    for (int i = 0; i <= nobs; i++) { /* fds[nobs] = the trigger */
        fds[i] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        int sz = 4 << 20;
        setsockopt(fds[i], SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
        if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&a, sizeof a) || rxstamp_enable(fds[i])) {
            perror("obs_probe: socket");
            return 1;
        }
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e);
    }
    if (!rec || !sent || ep < 0)
        return 1;
    clock_map_t cm;
    clock_map_init(&cm);
    uint8_t b[512], rb[2048];
    uint16_t mid = (uint16_t)(mono_ns() & 0xFFFF);
    { /* a short value first: libcoap's 1500-byte initial value would make every registration
       * response block-wise, and the server holds notifications for 2 s behind an unfinished
       * block-wise response */
        size_t n = 0;
        b[n++] = 0x50;
        b[n++] = 3;
        b[n++] = (uint8_t)(mid >> 8);
        b[n++] = (uint8_t)mid;
        mid++;
        n = put_path(b, n, path);
        b[n++] = 0xFF;
        b[n++] = '-';
        send(fds[nobs], b, n, 0);
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    /* registrations in rounds of 64 (a burst of hundreds overflows the server's receive
     * buffer), repeated for observers not yet answered; at most 20 rounds */
    static uint8_t is_reg[MAX_OBS];
    int registered = 0;
    for (int round = 0; round < 20 && registered < nobs; round++) {
        for (int i = 0, sent_now = 0; i < nobs && sent_now < 64; i++) {
            if (is_reg[i])
                continue;
            sent_now++;
            size_t n = 0;
            b[n++] = 0x40 | 4; /* CON GET Observe 0, token = 4-byte observer number */
            b[n++] = 1;
            b[n++] = (uint8_t)(mid >> 8);
            b[n++] = (uint8_t)mid;
            mid++;
            uint32_t t = htonl((uint32_t)i);
            memcpy(b + n, &t, 4);
            n += 4;
            b[n++] = 0x60; /* Observe (6), empty = 0 */
            uint8_t *p = b + n;
            n = put_path(b, n, path);
            p[0] = (uint8_t)((p[0] & 15) | (5 << 4)); /* Uri-Path (11) follows Observe: delta 5 */
            send(fds[i], b, n, 0);
        }
        int64_t until = mono_ns() + 30 * NS_PER_MS;
        struct epoll_event rev[64];
        while (mono_ns() < until) {
            int k = epoll_wait(ep, rev, 64, 5);
            for (int e = 0; e < k; e++) {
                int i = (int)rev[e].data.u32;
                ssize_t len;
                while ((len = recv(fds[i], rb, sizeof rb, 0)) >= 4)
                    if (i < nobs && ((rb[0] >> 4) & 3) == 2 && !is_reg[i]) {
                        is_reg[i] = 1;
                        registered++;
                    }
            }
        }
    }
    long puts = 0, put_resp = 0, notes = 0;
    int64_t t0 = mono_ns() + 300 * NS_PER_MS; /* registrations settle first */
    long total = (long)(rate * secs);
    int64_t end = t0 + (int64_t)(secs * 1e9) + NS_PER_S; /* 1 s drain */
    struct epoll_event ev[64];
    while (mono_ns() < end) {
        int64_t now = mono_ns();
        while (puts < total && now >= t0 + (int64_t)((double)puts * 1e9 / rate)) {
            size_t n = 0;
            b[n++] = 0x50; /* NON, TKL 0 */
            b[n++] = 3;    /* PUT */
            b[n++] = (uint8_t)(mid >> 8);
            b[n++] = (uint8_t)mid;
            mid++;
            n = put_path(b, n, path);
            b[n++] = 0xFF;
            n += (size_t)snprintf((char *)b + n, 11, "%010ld", puts);
            sent[puts] = mono_ns();
            send(fds[nobs], b, n, 0);
            puts++;
            now = mono_ns();
        }
        int k = epoll_wait(ep, ev, 64, 0);
        for (int e = 0; e < k; e++) {
            int i = (int)ev[e].data.u32;
            for (;;) {
                struct iovec iov = {rb, sizeof rb};
                rxstamp_ctl_t ctl;
                struct msghdr m = rxstamp_msg(&iov, &ctl);
                ssize_t len = recvmsg(fds[i], &m, 0);
                if (len < 0)
                    break;
                int64_t kt = rxstamp_realtime_ns(&m);
                int64_t t = kt ? clock_map_to_mono(&cm, kt) : mono_ns();
                if (len < 4 || (rb[0] >> 6) != 1)
                    continue;
                int type = (rb[0] >> 4) & 3;
                if (type == 0) { /* CON notification: ACK it */
                    uint8_t ack[4] = {0x60, 0, rb[2], rb[3]};
                    send(fds[i], ack, 4, 0);
                }
                if (i == nobs) {
                    put_resp += rb[1] != 0;
                    continue;
                }
                if (type == 2) /* a late registration response */
                    continue;
                size_t pl;
                const uint8_t *p = payload(rb, (size_t)len, &pl);
                if (!p || pl != 10 || rb[1] != 0x45)
                    continue;
                char num[11];
                memcpy(num, p, 10);
                num[10] = 0;
                long put = strtol(num, NULL, 10);
                if (put < 0 || put >= puts)
                    continue;
                if (notes < MAX_REC)
                    rec[notes] = (rec_t){(uint32_t)put, (uint32_t)i, t, (uint8_t)type};
                notes++;
            }
        }
        if (puts == total && k == 0)
            clock_map_refresh(&cm, now, CLOCK_MAP_REFRESH_NS);
    }
    FILE *f = fopen(argv[7], "w");
    if (!f) {
        perror(argv[7]);
        return 1;
    }
    fputs("put,observer,send_ns,recv_ns,type\n", f);
    for (long r = 0; r < notes && r < MAX_REC; r++)
        fprintf(f, "%u,%u,%lld,%lld,%s\n", rec[r].put, rec[r].obs, (long long)sent[rec[r].put],
                (long long)rec[r].recv_ns, rec[r].type == 0 ? "con" : "non");
    fclose(f);
    printf("%d %ld %ld %ld\n", registered, puts, put_resp, notes);
    return 0;
}
