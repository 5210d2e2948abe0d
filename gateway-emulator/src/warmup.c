/* warmup.c - readiness from where the load comes from.
 *
 * Before the start instant the GE pings (CoAP empty CON, RFC 7252 §4.3) every endpoint of its
 * trace from its own address, every WARMUP_ROUND_NS, until each answered with RST or the warm-up
 * deadline passed. The first requests then find both sides' neighbour (ARP) entries, the bridge's
 * forwarding entries and conntrack warm, instead of resolving hundreds of addresses at once at
 * the start. A separate socket keeps the pings' message IDs out of the requests' MID space.
 * Runs once, before the send loop: it may allocate and write files. The result goes to
 * <out>/warmup.json (read by the harness before T0) and to summary.json "warmup". */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "clock.h" /* common/clock.h */
#include "ge.h"

#define WARMUP_ROUND_NS (100LL * NS_PER_MS)
/* pings sent before the answers are read: keeps the RSTs of a burst within the socket's receive
 * buffer (tens of thousands of endpoints answer a round faster than one poll() reads them) */
#define WARMUP_BURST 256
#define WARMUP_RCVBUF (4 << 20) /* asked for; the kernel caps it at net.core.rmem_max */

static int open_any(int family) {
    int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_family = (sa_family_t)family;
    socklen_t sl = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* read every queued datagram; an empty RST (or ACK) from an endpoint marks it answered */
static void collect(ge_t *g, const ep_index_t *ix, int fd, uint8_t *answered, size_t *n_answered) {
    for (;;) {
        uint8_t buf[64];
        struct sockaddr_storage src;
        socklen_t sl = sizeof src;
        ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&src, &sl);
        if (n < 0)
            return;
        if (n < 4 || (buf[0] >> 6) != 1 || buf[1] != 0)
            continue;
        int e = ep_index_find(g, ix, &src);
        if (e >= 0 && !answered[e]) {
            answered[e] = 1;
            (*n_answered)++;
        }
    }
}

static void format_addr(const struct sockaddr_storage *a, char *out, size_t cap) {
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *s = (const void *)a;
        inet_ntop(AF_INET, &s->sin_addr, host, sizeof host);
        port = ntohs(s->sin_port);
        snprintf(out, cap, "%s:%d", host, port);
    } else {
        const struct sockaddr_in6 *s = (const void *)a;
        inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof host);
        port = ntohs(s->sin6_port);
        snprintf(out, cap, "[%s]:%d", host, port);
    }
}

static int warmup_write(ge_t *g, const uint8_t *answered) {
    char path[OUT_PATH_MAX];
    FILE *f = outfile_open(g, "warmup.json", path);
    if (!f)
        return 1;
    fprintf(f, "{\"endpoints\": %zu, \"answered\": %zu, \"took_ms\": %.3f, \"rounds\": %d, "
               "\"unanswered\": [",
            g->neps, g->warmup.answered, (double)g->warmup.took_ns / 1e6, g->warmup.rounds);
    int first = 1;
    for (size_t e = 0; e < g->neps; e++) {
        if (answered[e])
            continue;
        char a[80];
        format_addr(&g->eps[e].addr, a, sizeof a);
        fprintf(f, "%s\"%s\"", first ? "" : ", ", a);
        first = 0;
    }
    fputs("]}\n", f);
    return outfile_close(f, path);
}

int warmup_record(ge_t *g, const uint8_t *answered, int rounds, int64_t took_ns) {
    size_t done = 0;
    for (size_t e = 0; e < g->neps; e++)
        done += answered[e] != 0;
    g->warmup.enabled = 1;
    g->warmup.rounds = rounds;
    g->warmup.answered = done;
    g->warmup.took_ns = took_ns;
    return warmup_write(g, answered);
}

int warmup_run(ge_t *g) {
    int64_t t0 = mono_ns(), deadline = t0 + g->warmup_ns;
    if (g->start_mono && deadline > g->start_mono - 20 * NS_PER_MS)
        deadline = g->start_mono - 20 * NS_PER_MS; /* never into the test */
    uint8_t *answered = calloc(g->neps ? g->neps : 1, 1);
    ep_index_t ix = {0};
    int fd4 = open_any(AF_INET), fd6 = open_any(AF_INET6);
    if (!answered || ep_index_build(g, &ix) < 0 || (fd4 < 0 && fd6 < 0)) {
        fprintf(stderr, "gateway-emulator: warm-up: cannot open a socket: %s\n", strerror(errno));
        free(answered);
        free(ix.slot);
        return 1;
    }
    int rcvbuf = WARMUP_RCVBUF;
    for (int k = 0; k < 2; k++)
        if ((k ? fd6 : fd4) >= 0)
            (void)setsockopt(k ? fd6 : fd4, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    progress_set(g, PG_ENDPOINTS, g->neps);
    size_t done = 0;
    int rounds = 0;
    uint16_t mid = 0;
    while (done < g->neps && !ge_stop_signal && mono_ns() < deadline) {
        rounds++;
        size_t burst = 0;
        for (size_t e = 0; e < g->neps && !ge_stop_signal; e++) {
            if (answered[e])
                continue;
            int fd = g->eps[e].addr.ss_family == AF_INET ? fd4 : fd6;
            uint8_t ping[4] = {0x40, 0x00, (uint8_t)(mid >> 8), (uint8_t)mid};
            mid++;
            if (fd >= 0)
                (void)sendto(fd, ping, sizeof ping, 0, (const struct sockaddr *)&g->eps[e].addr,
                             g->eps[e].addrlen);
            if (++burst == WARMUP_BURST) { /* read the answers so far (non-blocking) */
                burst = 0;
                if (fd4 >= 0)
                    collect(g, &ix, fd4, answered, &done);
                if (fd6 >= 0)
                    collect(g, &ix, fd6, answered, &done);
            }
        }
        int64_t round_end = mono_ns() + WARMUP_ROUND_NS;
        if (round_end > deadline)
            round_end = deadline;
        while (done < g->neps && !ge_stop_signal) {
            int64_t left = round_end - mono_ns();
            if (left <= 0)
                break;
            struct pollfd p[2] = {{.fd = fd4, .events = POLLIN}, {.fd = fd6, .events = POLLIN}};
            if (poll(p, 2, (int)(left / NS_PER_MS) + 1) <= 0)
                continue;
            if (fd4 >= 0)
                collect(g, &ix, fd4, answered, &done);
            if (fd6 >= 0)
                collect(g, &ix, fd6, answered, &done);
            progress_set(g, PG_ANSWERED, done);
        }
    }
    int64_t took = mono_ns() - t0;
    if (fd4 >= 0)
        close(fd4);
    if (fd6 >= 0)
        close(fd6);
    int rc = warmup_record(g, answered, rounds, took);
    if (done < g->neps)
        fprintf(stderr, "gateway-emulator: warm-up: %zu of %zu endpoint(s) did not answer a CoAP "
                        "ping within %.0f ms (see warmup.json)\n",
                g->neps - done, g->neps, (double)g->warmup.took_ns / 1e6);
    free(answered);
    free(ix.slot);
    return rc;
}
