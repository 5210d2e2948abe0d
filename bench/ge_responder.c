/* ge_responder.c - fast CoAP-over-UDP responder for the GE benchmark: answers every request
 * with 2.05 (piggybacked ACK for CON, NON for NON), batched with recvmmsg/sendmmsg.
 * usage: ge_responder ADDR PORT MAX_SECONDS   (exits on SIGTERM/SIGINT or after MAX_SECONDS) */
#include <arpa/inet.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define B 64
static volatile sig_atomic_t stop;
static void on_sig(int s) { (void)s; stop = 1; }

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: ge_responder ADDR PORT MAX_SECONDS\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sig;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    int sz = 8 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    inet_pton(AF_INET, argv[1], &a.sin_addr);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("bind");
        return 1;
    }
    struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    static uint8_t buf[B][1500];
    struct mmsghdr m[B];
    struct iovec iov[B];
    struct sockaddr_in src[B];
    time_t end = time(NULL) + atoi(argv[3]);
    unsigned long long n = 0;
    while (!stop && time(NULL) < end) {
        for (int i = 0; i < B; i++) {
            iov[i].iov_base = buf[i];
            iov[i].iov_len = sizeof buf[i];
            memset(&m[i].msg_hdr, 0, sizeof m[i].msg_hdr);
            m[i].msg_hdr.msg_iov = &iov[i];
            m[i].msg_hdr.msg_iovlen = 1;
            m[i].msg_hdr.msg_name = &src[i];
            m[i].msg_hdr.msg_namelen = sizeof src[i];
        }
        int r = recvmmsg(fd, m, B, MSG_WAITFORONE, NULL);
        if (r <= 0)
            continue;
        int k = 0;
        for (int i = 0; i < r; i++) {
            uint8_t *p = buf[i];
            unsigned len = m[i].msg_len;
            if (len < 4 || (p[0] >> 6) != 1 || p[1] == 0)
                continue;
            unsigned tkl = p[0] & 15, type = (p[0] >> 4) & 3;
            if (tkl > 8 || 4 + tkl > len)
                continue;
            p[0] = (uint8_t)(0x40 | (type == 0 ? 2 : 1) << 4 | tkl); /* CON->ACK, NON->NON */
            p[1] = 0x45;                                           /* 2.05 */
            iov[k].iov_base = p;
            iov[k].iov_len = 4 + tkl;
            m[k].msg_hdr.msg_iov = &iov[k];
            m[k].msg_hdr.msg_name = &src[i];
            m[k].msg_hdr.msg_namelen = sizeof src[i];
            k++;
            n++;
        }
        if (k)
            sendmmsg(fd, m, (unsigned)k, 0);
    }
    fprintf(stderr, "ge_responder: answered %llu\n", n);
    return 0;
}
