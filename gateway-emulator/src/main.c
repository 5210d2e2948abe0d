/* main.c - CLI of the gateway emulator (contract §2): parse options, load and prepare the whole
 * trace, run the send loop, write the results (also when interrupted). */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <coap3/coap.h>

#include "clock.h" /* common/clock.h */
#include "dtls.h"
#include "ge.h"
#include "transport.h"

static void usage(FILE *f) {
    fputs("usage: gateway-emulator --trace FILE --out DIR [--start-at MONO_NS]\n"
          "         [--wait busy|hybrid] [--spin-us N] [--type con|non] [--timeout-ms N]\n"
          "         [--retransmit] [--ports-per-device N] [--cpu N] [--label NAME]\n"
          "         [--warmup-ms N] [--proxy HOST:PORT [--proxy-mode uri|scheme]]\n"
          "         [--max-notifications N] [--block-size 16..1024]\n"
          "         [--dtls-psk-identity ID --dtls-psk-key-file FILE\n"
          "          [--dtls-sessions reuse|per-request]]\n"
          "         [--clients N --duration-ms N [--think 0|const:US|exp:US|uniform:LO:HI]\n"
          "          [--select round-robin|one|random] [--mark-warmup-ms N]\n"
          "          [--mark-cooldown-ms N] [--max-requests N]\n"
          "          [--requests-per-client M] [--ramp-ms N]]\n"
          "         [--http-connections N] [--http-connection-per-request]\n"
          "         [--http-header 'Name: value' ...]   (http://)\n"
          "         [--http-body-template FILE]   (http:// body; coap:// PUT/POST payload)\n"
          "         [--seed N]   ({{rand}} in templates)\n"
          "         [--journal FILE]   (the request table in FILE, on a tmpfs: kept if killed)\n",
          f);
}

static int bad_opt(const char *opt, const char *val, const char *expected) {
    fprintf(stderr, "gateway-emulator: bad value '%s' for %s, expected %s\n", val, opt, expected);
    usage(stderr);
    return 2;
}

static int parse_int(const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int mkdirs(const char *dir) {
    char tmp[4096];
    if (strlen(dir) >= sizeof tmp)
        return -1;
    strcpy(tmp, dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

static int parse_args(ge_t *g, int argc, char **argv) {
    static const struct option opts[] = {
        {"trace", required_argument, 0, 't'},   {"out", required_argument, 0, 'o'},
        {"start-at", required_argument, 0, 'S'}, {"wait", required_argument, 0, 'w'},
        {"spin-us", required_argument, 0, 's'}, {"type", required_argument, 0, 'y'},
        {"timeout-ms", required_argument, 0, 'T'}, {"retransmit", no_argument, 0, 'r'},
        {"ports-per-device", required_argument, 0, 'p'}, {"cpu", required_argument, 0, 'c'},
        {"label", required_argument, 0, 'l'},   {"help", no_argument, 0, 'h'},
        {"warmup-ms", required_argument, 0, 'W'},
        {"proxy", required_argument, 0, 'P'},   {"proxy-mode", required_argument, 0, 'M'},
        {"max-notifications", required_argument, 0, 'N'},
        {"block-size", required_argument, 0, 'B'},
        {"dtls-psk-identity", required_argument, 0, 'I'},
        {"dtls-psk-key-file", required_argument, 0, 'K'},
        {"dtls-sessions", required_argument, 0, 'D'},
        {"clients", required_argument, 0, 'C'},
        {"duration-ms", required_argument, 0, 'd'},
        {"think", required_argument, 0, 'k'},
        {"select", required_argument, 0, 'e'},
        {"mark-warmup-ms", required_argument, 0, 'u'},
        {"mark-cooldown-ms", required_argument, 0, 'v'},
        {"max-requests", required_argument, 0, 'x'},
        {"journal", required_argument, 0, 'J'},
        {"http-connections", required_argument, 0, 'H'},
        {"http-connection-per-request", no_argument, 0, 'R'},
        {"http-header", required_argument, 0, 'A'},
        {"http-body-template", required_argument, 0, 'Y'},
        {"seed", required_argument, 0, 'Z'},
        {"requests-per-client", required_argument, 0, 'Q'},
        {"ramp-ms", required_argument, 0, 'G'},
        {0, 0, 0, 0}};
    g->wait = WAIT_HYBRID;
    g->spin_ns = 200 * NS_PER_US;
    g->timeout_ns = 10000 * NS_PER_MS;
    g->cpu = -1;
    g->label = "";
    g->max_notifications = 1000000;
    g->closed.max_requests = 4u << 20; /* 288 MiB reserved, touched only as records fill */
    long long v;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 't': g->trace_path = optarg; break;
        case 'o': g->out_dir = optarg; break;
        case 'l': g->label = optarg; break;
        case 'J': g->journal_path = optarg; break;
        case 'r': g->retransmit = 1; break;
        case 'S':
            if (parse_int(optarg, 1, INT64_MAX, &v) < 0)
                return bad_opt("--start-at", optarg, "CLOCK_MONOTONIC nanoseconds > 0");
            g->start_at = v;
            break;
        case 'w':
            if (strcmp(optarg, "busy") == 0)
                g->wait = WAIT_BUSY;
            else if (strcmp(optarg, "hybrid") == 0)
                g->wait = WAIT_HYBRID;
            else
                return bad_opt("--wait", optarg, "busy or hybrid");
            break;
        case 's':
            if (parse_int(optarg, 0, 10000000, &v) < 0)
                return bad_opt("--spin-us", optarg, "an integer 0..10000000");
            g->spin_ns = v * NS_PER_US;
            break;
        case 'y':
            if (strcmp(optarg, "con") == 0)
                g->non = 0;
            else if (strcmp(optarg, "non") == 0)
                g->non = 1;
            else
                return bad_opt("--type", optarg, "con or non");
            break;
        case 'T':
            if (parse_int(optarg, 1, 86400000, &v) < 0)
                return bad_opt("--timeout-ms", optarg, "an integer 1..86400000");
            g->timeout_ns = v * NS_PER_MS;
            break;
        case 'p':
            if (parse_int(optarg, 1, 256, &v) < 0)
                return bad_opt("--ports-per-device", optarg, "an integer 1..256");
            g->ports_per_device = (int)v;
            break;
        case 'c':
            if (parse_int(optarg, 0, CPU_SETSIZE - 1, &v) < 0)
                return bad_opt("--cpu", optarg, "a CPU number");
            g->cpu = (int)v;
            break;
        case 'W':
            if (parse_int(optarg, 0, 600000, &v) < 0)
                return bad_opt("--warmup-ms", optarg, "an integer 0..600000");
            g->warmup_ns = v * NS_PER_MS;
            break;
        case 'P':
            if (proxy_parse(g, optarg) < 0)
                return bad_opt("--proxy", optarg, "HOST:PORT of a CoAP forward proxy");
            break;
        case 'M':
            if (strcmp(optarg, "uri") == 0)
                g->proxy.mode = PROXY_URI;
            else if (strcmp(optarg, "scheme") == 0)
                g->proxy.mode = PROXY_SCHEME;
            else
                return bad_opt("--proxy-mode", optarg, "uri (Proxy-Uri) or scheme (Proxy-Scheme + Uri-Host)");
            break;
        case 'N':
            if (parse_int(optarg, 0, 1000000000, &v) < 0)
                return bad_opt("--max-notifications", optarg, "an integer 0..1000000000");
            g->max_notifications = (size_t)v;
            break;
        case 'B':
            if (parse_int(optarg, 16, 1024, &v) < 0 || (v & (v - 1)))
                return bad_opt("--block-size", optarg, "a power of two 16..1024");
            g->block_size = (int)v;
            break;
        case 'I': g->dtls_opt.identity = optarg; break;
        case 'K': g->dtls_opt.key_file = optarg; break;
        case 'D':
            if (strcmp(optarg, "reuse") == 0)
                g->dtls_opt.mode = DTLS_REUSE;
            else if (strcmp(optarg, "per-request") == 0)
                g->dtls_opt.mode = DTLS_PER_REQUEST;
            else
                return bad_opt("--dtls-sessions", optarg, "reuse or per-request");
            g->dtls_opt.mode_set = 1;
            break;
        case 'C':
            if (parse_int(optarg, 1, 1000000, &v) < 0)
                return bad_opt("--clients", optarg, "an integer >= 1");
            g->closed.clients = (int)v;
            break;
        case 'd':
            if (parse_int(optarg, 1, 86400000, &v) < 0)
                return bad_opt("--duration-ms", optarg, "an integer 1..86400000");
            g->closed.duration_ns = v * NS_PER_MS;
            break;
        case 'k':
            if (clients_parse_think(g, optarg) < 0)
                return bad_opt("--think", optarg,
                               "0, const:US, exp:US (mean) or uniform:LO_US:HI_US");
            break;
        case 'e':
            if (clients_parse_select(g, optarg) < 0)
                return bad_opt("--select", optarg, "round-robin, one or random");
            break;
        case 'u':
        case 'v':
            if (parse_int(optarg, 0, 86400000, &v) < 0)
                return bad_opt(c == 'u' ? "--mark-warmup-ms" : "--mark-cooldown-ms", optarg,
                               "an integer 0..86400000");
            *(c == 'u' ? &g->closed.warmup_ns : &g->closed.cooldown_ns) = v * NS_PER_MS;
            break;
        case 'x':
            if (parse_int(optarg, 1, 1LL << 32, &v) < 0)
                return bad_opt("--max-requests", optarg, "an integer 1..4294967296");
            g->closed.max_requests = (size_t)v;
            break;
        case 'H':
            if (parse_int(optarg, 1, 60000, &v) < 0)
                return bad_opt("--http-connections", optarg, "an integer 1..60000 (per target)");
            g->http_opt.conns = (int)v;
            break;
        case 'R': g->http_opt.per_request = 1; break;
        case 'A':
            if (g->http_opt.nheaders == (int)(sizeof g->http_opt.headers / sizeof *g->http_opt.headers))
                return bad_opt("--http-header", optarg, "at most 32 --http-header options");
            g->http_opt.headers[g->http_opt.nheaders++] = optarg;
            break;
        case 'Y': g->http_opt.body_file = optarg; break;
        case 'Z': {
            char *end;
            errno = 0;
            unsigned long long sv = strtoull(optarg, &end, 10);
            if (end == optarg || *end || errno || *optarg == '-')
                return bad_opt("--seed", optarg, "an integer 0..18446744073709551615");
            g->http_opt.seed = sv;
            break;
        }
        case 'Q':
            if (parse_int(optarg, 1, 1000000000, &v) < 0)
                return bad_opt("--requests-per-client", optarg, "an integer 1..1000000000");
            g->closed.per_client = (uint32_t)v;
            break;
        case 'G':
            if (parse_int(optarg, 0, 86400000, &v) < 0)
                return bad_opt("--ramp-ms", optarg, "an integer 0..86400000");
            g->closed.ramp_ns = v * NS_PER_MS;
            break;
        case 'h': usage(stdout); exit(0);
        default:
            fprintf(stderr, "gateway-emulator: unknown or incomplete option '%s'\n",
                    argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gateway-emulator: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (!g->trace_path || !g->out_dir) {
        fprintf(stderr, "gateway-emulator: --trace and --out are required\n");
        usage(stderr);
        return 2;
    }
    int rc = clients_check_options(g);
    return rc ? rc : dtls_options(g); /* credentials: checked and read before the trace */
}

int main(int argc, char **argv) {
    static ge_t G;
    ge_t *g = &G;
    int rc = parse_args(g, argc, argv);
    if (rc)
        return rc;

    stop_on_signals();

    coap_startup();
    coap_set_log_level(LOG_EMERG);

    rc = trace_load(g);
    if (rc)
        return rc;
    if (block_prepare(g))
        return 1;
    if (mkdirs(g->out_dir) < 0) {
        fprintf(stderr, "gateway-emulator: cannot create %s: %s\n", g->out_dir, strerror(errno));
        return 1;
    }
    if (output_progress_open(g))
        return 1;
    progress_set(g, PG_TOTAL, g->n);
    rc = net_prepare(g); /* 2: bad input (a trace's client column beyond the limits) */
    if (rc)
        return rc;
    if (observe_prepare(g))
        return 1;
    rc = transport_select(g); /* coap:// -> UDP, coaps:// -> DTLS, http:// -> TCP, once */
    if (rc)
        return rc;
    trace_body_release(g); /* the trace's bodies are in the prepared requests now */
    if (g->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(g->cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) < 0) {
            fprintf(stderr, "gateway-emulator: cannot pin to CPU %d: %s\n", g->cpu,
                    strerror(errno));
            return 1;
        }
    }

    if (g->journal_path && g->closed.clients) /* its records are not the trace's (clients.c) */
        fprintf(stderr, "gateway-emulator: note: --journal is not kept with --clients: a killed "
                        "closed-loop GE leaves no requests.csv\n");
    else if (g->journal_path && journal_open(g, g->journal_path))
        return 1;
    int64_t now = mono_ns();
    g->start_mono = g->start_at ? g->start_at : now + 100 * NS_PER_MS;
    journal_started(g);
    if (g->start_mono < now)
        fprintf(stderr,
                "gateway-emulator: warning: --start-at is %.3f ms in the past; requests will be "
                "late by that much (send lag shows it)\n",
                (double)(now - g->start_mono) / 1e6);

    if (g->tp->prestart(g)) /* warm-up pings, or the DTLS handshakes */
        return 1;
    if (!ge_stop_signal)
        rc = loop_run(g);
    else { /* interrupted while loading: everything unsent */
        for (size_t i = 0; i < g->n; i++) {
            g->reqs[i].outcome = O_UNSENT;
            g->reqs[i].flags |= RF_DONE;
        }
        g->end_mono = mono_ns();
    }
    g->interrupted_by = ge_stop_signal;
    if (g->end_mono == 0)
        g->end_mono = mono_ns();
    int wrc = output_write(g);
    output_progress_close(g);
    net_close(g);
    if (rc)
        return rc;
    if (wrc)
        return 1;
    if (g->interrupted_by) {
        uint64_t c[O_COUNT];
        stats_outcomes(g, c);
        fprintf(stderr,
                "gateway-emulator: interrupted by %s: stopped after sending %zu of %zu requests "
                "(%llu unsent); results so far written to %s\n",
                g->interrupted_by == SIGINT ? "SIGINT" : "SIGTERM",
                g->n - (size_t)c[O_UNSENT], g->n, (unsigned long long)c[O_UNSENT], g->out_dir);
        return g->interrupted_by == SIGINT ? 130 : 143;
    }
    return 0;
}
