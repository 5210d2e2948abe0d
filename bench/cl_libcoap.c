/* cl_libcoap.c - a closed loop written with libcoap's own client API, the reference the GE's
 * closed loop (--clients) is measured against (bench/closed_loop_bench.py): N client sessions
 * (coap_new_client_session: one socket, one source port each), each with one CON GET in
 * flight, think time 0: a session sends its next request as soon as its response arrived.
 * Bounded: stops issuing after DURATION_MS, waits at most 2 s for what is in flight.
 *
 * usage: cl_libcoap HOST PORT PATH CLIENTS DURATION_MS [CPU]
 * prints one line: clients=N sent=S ok=R seconds=T rps=R/T cpu_s=U (user+sys of the process
 * while the clients ran, session set-up excluded) */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "libcoap_get.h"

static const char *path;
static unsigned long long sent, ok;
static int stopping;

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static coap_response_t on_response(coap_session_t *s, const coap_pdu_t *sent_pdu,
                                   const coap_pdu_t *received, const coap_mid_t mid) {
    (void)sent_pdu, (void)mid;
    if (COAP_RESPONSE_CLASS(coap_pdu_get_code(received)) == 2)
        ok++;
    if (!stopping) { /* closed loop: this client's next request, at once */
        libcoap_send_get(s, 1, path);
        sent++;
    }
    return COAP_RESPONSE_OK;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: cl_libcoap HOST PORT PATH CLIENTS DURATION_MS [CPU]\n");
        return 2;
    }
    path = argv[3];
    int n = atoi(argv[4]);
    double dur = atof(argv[5]) / 1e3;
    if (argc > 6) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(atoi(argv[6]), &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    coap_startup();
    coap_set_log_level(LOG_EMERG);
    coap_context_t *ctx = coap_new_context(NULL);
    coap_register_response_handler(ctx, on_response);
    coap_address_t dst;
    libcoap_ipv4(&dst, argv[1], argv[2]);
    coap_session_t **ss = calloc((size_t)n, sizeof *ss);
    for (int i = 0; i < n; i++) {
        ss[i] = coap_new_client_session(ctx, NULL, &dst, COAP_PROTO_UDP);
        if (!ss[i]) {
            fprintf(stderr, "cl_libcoap: session %d: cannot create\n", i);
            return 1;
        }
    }
    double t0 = now_s(), c0 = cpu_s();
    for (int i = 0; i < n; i++) {
        libcoap_send_get(ss[i], 1, path);
        sent++;
    }
    while (now_s() - t0 < dur)
        coap_io_process(ctx, 100);
    double t1 = now_s(), c1 = cpu_s();
    stopping = 1;
    unsigned long long ok_at_end = ok;
    while (ok < sent && now_s() - t1 < 2.0)
        coap_io_process(ctx, 50);
    printf("clients=%d sent=%llu ok=%llu seconds=%.3f rps=%.1f cpu_s=%.3f\n", n, sent, ok_at_end,
           t1 - t0, (double)ok_at_end / (t1 - t0), c1 - c0);
    coap_free_context(ctx);
    coap_cleanup();
    return 0;
}
