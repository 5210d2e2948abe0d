/* clock_check.c - unit checks of common/clock.h (REALTIME->MONOTONIC mapping) and
 * common/rxstamp.h (kernel receive stamps). Built and run by tests/c/test_clock.py; prints one
 * "name value" line per check and exits 1 at the first failed one. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "rxstamp.h"

static int failed;

static void check(const char *name, int ok, long long value) {
    printf("%s %lld %s\n", name, value, ok ? "ok" : "FAILED");
    if (!ok)
        failed = 1;
}

/* mapped REALTIME reads fall inside the MONOTONIC bracket around them, within the map's error */
static void mapping_brackets(void) {
    clock_map_t m;
    clock_map_init(&m);
    check("bracket_ns", m.bracket_ns >= 0 && m.bracket_ns < 1000000, m.bracket_ns);
    long long worst = 0;
    for (int i = 0; i < 10000; i++) {
        int64_t m1 = mono_ns(), r = clock_read_ns(CLOCK_REALTIME), m2 = mono_ns();
        int64_t x = clock_map_to_mono(&m, r), err = m.bracket_ns / 2 + 1;
        long long out = x < m1 - err ? m1 - err - x : x > m2 + err ? x - m2 - err : 0;
        if (out > worst)
            worst = out;
    }
    check("outside_bracket_ns", worst == 0, worst);
}

/* update(): a tighter agreeing measurement is kept; a disagreeing one (a clock step) wins */
static void update_rules(void) {
    clock_map_t m = {.offset_ns = 1000, .bracket_ns = 40, .measured_at = 5};
    clock_map_update(&m, (clock_map_t){.offset_ns = 1010, .bracket_ns = 60, .measured_at = 9});
    check("keeps_tighter", m.offset_ns == 1000 && m.bracket_ns == 40 && m.measured_at == 9,
          m.offset_ns);
    clock_map_update(&m, (clock_map_t){.offset_ns = 1005, .bracket_ns = 20, .measured_at = 11});
    check("takes_tighter", m.offset_ns == 1005 && m.bracket_ns == 20, m.offset_ns);
    clock_map_update(&m, (clock_map_t){.offset_ns = 1005 + NS_PER_S, .bracket_ns = 80,
                                       .measured_at = 12});
    check("follows_step", m.offset_ns == 1005 + NS_PER_S && m.bracket_ns == 80, m.offset_ns);
    clock_map_refresh(&m, 12 + NS_PER_S / 2, NS_PER_S);
    check("no_refresh_early", m.measured_at == 12, m.measured_at);
    clock_map_refresh(&m, mono_ns(), NS_PER_S);
    check("refresh_due", m.measured_at > 12 && m.bracket_ns < 1000000, m.bracket_ns);
}

/* a datagram's kernel stamp, mapped, lies between the send and the read on loopback */
static void loopback_stamp(void) {
    int a = socket(AF_INET, SOCK_DGRAM, 0), b = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (a < 0 || b < 0 || bind(b, (struct sockaddr *)&sa, sizeof sa) ||
        getsockname(b, (struct sockaddr *)&sa, &sl) || rxstamp_enable(b)) {
        check("socket_setup", 0, 0);
        return;
    }
    clock_map_t m;
    clock_map_init(&m);
    long long worst = 0;
    int stamped = 0;
    for (int i = 0; i < 200; i++) {
        char buf[16];
        rxstamp_ctl_t ctl;
        struct iovec iov = {buf, sizeof buf};
        struct msghdr msg = rxstamp_msg(&iov, &ctl);
        int64_t t0 = mono_ns();
        if (sendto(a, "ping", 4, 0, (struct sockaddr *)&sa, sizeof sa) != 4 ||
            recvmsg(b, &msg, 0) != 4)
            break;
        int64_t t1 = mono_ns(), rt = rxstamp_realtime_ns(&msg);
        if (!rt)
            continue;
        stamped++;
        int64_t k = clock_map_to_mono(&m, rt), err = m.bracket_ns / 2 + 1;
        long long out = k < t0 - err ? t0 - err - k : k > t1 + err ? k - t1 - err : 0;
        if (out > worst)
            worst = out;
    }
    check("stamped", stamped == 200, stamped);
    check("kernel_outside_send_read_ns", worst == 0, worst);
    /* no control buffer: no stamp, no crash */
    struct msghdr empty = {0};
    check("absent_is_zero", rxstamp_realtime_ns(&empty) == 0, 0);
    close(a);
    close(b);
}

int main(void) {
    mapping_brackets();
    update_rules();
    loopback_stamp();
    return failed;
}
