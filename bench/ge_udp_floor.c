/* ge_udp_floor.c - raw floor for the GE benchmark: a bare sendto() loop of one prepared CoAP
 * NON GET datagram (same size as the GE's) to ADDR:PORT. Prints "sends_per_s N".
 * usage: ge_udp_floor ADDR PORT COUNT */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: ge_udp_floor ADDR PORT COUNT\n");
        return 2;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    inet_pton(AF_INET, argv[1], &a.sin_addr);
    long n = atol(argv[3]);
    /* NON GET, 8-byte token, Uri-Path "r" */
    uint8_t pkt[] = {0x58, 0x01, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0xb1, 'r'};
    long ok = 0;
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        pkt[2] = (uint8_t)(i >> 8);
        pkt[3] = (uint8_t)i;
        ok += sendto(fd, pkt, sizeof pkt, 0, (struct sockaddr *)&a, sizeof a) > 0;
    }
    double dt = now_s() - t0;
    printf("sends_per_s %.0f sent %ld\n", (double)ok / dt, ok);
    return 0;
}
