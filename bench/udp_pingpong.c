/* udp_pingpong.c - the raw UDP floor of a path, for bench/floor_bench.py.
 *
 *   udp_pingpong echo ADDR PORT            answer every datagram (blocking recvfrom + sendto,
 *                                          as a woken server thread would); runs until killed
 *   udp_pingpong ping ADDR PORT N GAP_US   N round trips, one at a time, GAP_US apart; prints
 *                                          one line per round trip: "kernel_ns user_ns"
 * kernel_ns = the reply's kernel receive stamp (SO_TIMESTAMPNS, mapped to CLOCK_MONOTONIC)
 * minus the send time read right before sendto(): what R measures in WoTbench. user_ns = the
 * same up to the moment recvmsg() returned. Static, so it also runs in a FROM scratch image. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "rxstamp.h"

static int usage(void) {
    fputs("usage: udp_pingpong echo ADDR PORT | ping ADDR PORT N GAP_US\n", stderr);
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 4)
        return usage();
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
    if (inet_pton(AF_INET, argv[2], &sa.sin_addr) != 1)
        return usage();
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0)
        return 1;
    char buf[2048];
    if (argv[1][0] == 'e') {
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa)) {
            perror("bind");
            return 1;
        }
        for (;;) {
            struct sockaddr_in from;
            socklen_t fl = sizeof from;
            ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
            if (n > 0)
                sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, fl);
        }
    }
    if (argc != 6)
        return usage();
    long n = atol(argv[4]), gap = atol(argv[5]);
    rxstamp_enable(fd);
    clock_map_t m;
    clock_map_init(&m);
    struct timeval tv = {.tv_sec = 1};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (long i = 0; i < n; i++) {
        rxstamp_ctl_t ctl;
        struct iovec iov = {buf, sizeof buf};
        struct msghdr msg = rxstamp_msg(&iov, &ctl);
        int64_t t0 = mono_ns();
        if (sendto(fd, "ping-pong-16byte", 16, 0, (struct sockaddr *)&sa, sizeof sa) != 16)
            return 1;
        if (recvmsg(fd, &msg, 0) > 0) {
            int64_t t1 = mono_ns(), rt = rxstamp_realtime_ns(&msg);
            printf("%lld %lld\n", rt ? (long long)(clock_map_to_mono(&m, rt) - t0) : -1LL,
                   (long long)(t1 - t0));
        }
        struct timespec d = ns_to_timespec(gap * NS_PER_US);
        nanosleep(&d, NULL);
        clock_map_refresh(&m, mono_ns(), CLOCK_MAP_REFRESH_NS);
    }
    return 0;
}
