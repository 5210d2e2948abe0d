/* device_load.c - closed-loop NON GET load against one CoAP server (loopback only), used by
 * device_bench.py to measure max responses/s. Keeps WINDOW requests in flight for SECONDS.
 * usage: device_load HOST PORT PATH WINDOW SECONDS   -> prints "responses rate_per_s" */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static size_t build(uint8_t *b, uint16_t mid, uint32_t tok, const char *path) {
    size_t n = 0;
    b[n++] = 0x40 | (1 << 4) | 4; /* ver 1, NON, TKL 4 */
    b[n++] = 1;                   /* GET */
    b[n++] = (uint8_t)(mid >> 8);
    b[n++] = (uint8_t)mid;
    memcpy(b + n, &tok, 4);
    n += 4;
    size_t pl = strlen(path); /* single segment, < 13 bytes */
    b[n++] = (uint8_t)((11 << 4) | pl);
    memcpy(b + n, path, pl);
    return n + pl;
}

int main(int argc, char **argv) {
    if (argc != 6 || strlen(argv[3]) >= 13) {
        fprintf(stderr, "usage: device_load HOST PORT PATH(<13 chars) WINDOW SECONDS\n");
        return 2;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1 || (ntohl(a.sin_addr.s_addr) >> 24) != 127) {
        fprintf(stderr, "loopback IPv4 only\n");
        return 2;
    }
    int window = atoi(argv[4]);
    double secs = atof(argv[5]);
    if (window < 1 || window > 4096 || secs <= 0 || secs > 30)
        return 2;
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a))
        return 1;
    uint8_t buf[64], rb[2048];
    uint32_t tok = 0;
    uint16_t mid = 0;
    long got = 0;
    for (int i = 0; i < window; i++) {
        size_t n = build(buf, mid++, tok++, argv[3]);
        send(s, buf, n, 0);
    }
    double t0 = now(), end = t0 + secs, measured_from = t0 + 0.2;
    long base = 0;
    int base_set = 0;
    while (now() < end) {
        struct pollfd p = {.fd = s, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0) { /* lost some: refill the window */
            for (int i = 0; i < window / 4 + 1; i++) {
                size_t n = build(buf, mid++, tok++, argv[3]);
                send(s, buf, n, 0);
            }
            continue;
        }
        while (recv(s, rb, sizeof rb, MSG_DONTWAIT) > 0) {
            got++;
            size_t n = build(buf, mid++, tok++, argv[3]);
            send(s, buf, n, 0);
        }
        if (!base_set && now() >= measured_from) {
            base = got;
            base_set = 1;
            measured_from = now();
        }
    }
    double dt = now() - measured_from;
    printf("%ld %.0f\n", got, base_set ? (double)(got - base) / dt : 0.0);
    close(s);
    return 0;
}
