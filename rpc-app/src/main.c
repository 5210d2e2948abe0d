/* main.c - wot-rpcapp command line (CONTRACTS §3d). */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rpcapp.h"

static void on_signal(int sig) {
    (void)sig;
    ra_stop = 1;
}

static void usage(void) {
    fputs("usage: wot-rpcapp --server IPv4:PORT --devices FIRST:COUNT[,FIRST:COUNT...] "
          "--log-dir DIR\n"
          "       [--apps N] [--shards K] [--rpc-path FMT] [--reply-path FMT] [--body TEMPLATE]\n"
          "       [--id-marker TEXT] [--id-header NAME] [--think-ms MIN:MAX] [--timeout-ms N]\n"
          "       [--duration-s S] [--method POST|PUT|GET] [--reply-header 'NAME: VALUE']...\n"
          "       [--reply-subscribe MESSAGE] [--first-app N] [--apps-total N]\n"
          "       [--warmup-s S] [--start-at MONO_NS] [--source IPv4] [--max-rows N] [--cpu N]\n"
          "       [--rate RPC_PER_S [--arrival poisson|constant] [--window N]] [--first-shard N]\n"
          "       [--transport http|websocket [--ws-path PATH] [--ws-header 'NAME: VALUE']...\n"
          "        [--frame TEMPLATE] [--no-acks | [--ack-unheard TEXT] [--ack-rejected TEXT]]]\n",
          stderr);
}

static int num(const char *opt, const char *s, unsigned long long min, unsigned long long max,
               unsigned long long *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *s == '-' || *end || errno || v < min || v > max) {
        fprintf(stderr, "wot-rpcapp: bad %s '%s', expected an integer %llu..%llu\n", opt, s, min,
                max);
        return -1;
    }
    *out = v;
    return 0;
}

static int pair(const char *opt, const char *s, unsigned long long max, uint32_t *a, uint32_t *b) {
    const char *c = strchr(s, ':');
    char first[32];
    unsigned long long x, y;
    if (!c || (size_t)(c - s) >= sizeof first) {
        fprintf(stderr, "wot-rpcapp: bad %s '%s', expected A:B\n", opt, s);
        return -1;
    }
    memcpy(first, s, (size_t)(c - s));
    first[c - s] = '\0';
    if (num(opt, first, 0, max, &x) || num(opt, c + 1, 0, max, &y))
        return -1;
    *a = (uint32_t)x;
    *b = (uint32_t)y;
    return 0;
}

/* s is one of two words: *out 0 (the first) or 1; -1 (named) if neither */
static int choice(const char *opt, const char *s, const char *w0, const char *w1, int *out) {
    if (strcmp(s, w0) && strcmp(s, w1)) {
        fprintf(stderr, "wot-rpcapp: bad %s '%s', expected %s or %s\n", opt, s, w0, w1);
        return -1;
    }
    *out = strcmp(s, w0) != 0;
    return 0;
}

/* a path format must hold exactly one %u and no other conversion */
static int one_u(const char *opt, const char *f) {
    const char *p = strstr(f, "%u");
    if (f[0] != '/' || !p || strchr(p + 2, '%') || strchr(f, '%') != p) {
        fprintf(stderr, "wot-rpcapp: bad %s '%s', expected a path with one %%u, e.g. /rpc/%%u\n",
                opt, f);
        return -1;
    }
    return 0;
}

/* no '%' but at most one "%u" */
static int at_most_one_u(const char *f) {
    const char *p = strchr(f, '%');
    return p && (p[1] != 'u' || strchr(p + 2, '%'));
}

/* "Name: value" (a token, a colon, one line) appended to lines with its CRLF; -1 if bad */
static int add_header(const char *opt, char *lines, size_t cap, const char *h) {
    size_t nl = strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                          "!#$%&'*+-.^_`|~"), used = strlen(lines);
    if (nl == 0 || h[nl] != ':' || strpbrk(h, "\r\n") || used + strlen(h) + 3 > cap) {
        fprintf(stderr, "wot-rpcapp: bad %s '%s', expected 'Name: value' on one "
                "line (all of them at most %zu bytes)\n", opt, h, cap - 3);
        return -1;
    }
    snprintf(lines + used, cap - used, "%s\r\n", h);
    return 0;
}

/* FIRST:COUNT[,FIRST:COUNT...]: the device ids the applications call */
static int device_ranges(const char *s, struct ra_config *c) {
    char buf[2048], *save = NULL;
    uint64_t total = 0;
    if (strlen(s) >= sizeof buf)
        goto bad;
    snprintf(buf, sizeof buf, "%s", s);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        uint32_t f, n;
        if (c->nranges == RA_MAX_RANGES || pair("--devices", t, 4294967294ULL, &f, &n))
            goto bad;
        if (!n || (uint64_t)f + n > 4294967295ULL)
            goto bad;
        c->range_first[c->nranges] = f;
        c->range_count[c->nranges++] = n;
        total += n;
    }
    if (!c->nranges || total > 4294967295ULL)
        goto bad;
    c->dev_count = (uint32_t)total;
    return 0;
bad:
    fprintf(stderr, "wot-rpcapp: bad --devices '%s', expected FIRST:COUNT[,FIRST:COUNT...] "
            "(at most %d ranges, each COUNT >= 1)\n", s, RA_MAX_RANGES);
    return -1;
}

/* the options of one transport refused with the other; a websocket application's Upgrade
 * target and a frame that carries the id and the device */
static int transport_rules(const struct ra_config *c, const char *http_opt, const char *ws_opt) {
    if (c->transport == TR_HTTP && ws_opt) {
        fprintf(stderr, "wot-rpcapp: %s is for --transport websocket (the applications send "
                "HTTP requests)\n", ws_opt);
        return -1;
    }
    if (c->transport == TR_HTTP)
        return 0;
    if (http_opt) {
        fprintf(stderr, "wot-rpcapp: %s is for --transport http; a websocket application sends "
                "each RPC as one frame (--frame)\n", http_opt);
        return -1;
    }
    if (!c->ws_path) {
        fputs("wot-rpcapp: --transport websocket needs --ws-path (each application's WebSocket "
              "target)\n", stderr);
        return -1;
    }
    /* the longest frame once filled: an id "<app>-<seq>" is at most 10+1+20 bytes, a device
     * 10 digits; fill_frame needs it below RA_FRAME_MAX */
    size_t filled = strlen(c->frame);
    for (const char *p = c->frame; (p = strstr(p, "{id}")) != NULL; p += 4)
        filled += 31 - 4;
    for (const char *p = c->frame; (p = strstr(p, "{device}")) != NULL; p += 8)
        filled += 10 - 8;
    if (!strstr(c->frame, "{id}") || !strstr(c->frame, "{device}") || filled >= RA_FRAME_MAX) {
        fprintf(stderr, "wot-rpcapp: bad --frame '%s', expected {device} and {id} in it (the "
                "RPC's device and id), at most %d bytes once every {id} (31) and {device} (10) "
                "is filled\n", c->frame, RA_FRAME_MAX - 1);
        return -1;
    }
    if (!c->acks && (c->ack_unheard || c->ack_rejected)) {
        fputs("wot-rpcapp: --ack-unheard and --ack-rejected classify acks; with --no-acks there "
              "are none\n", stderr);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    struct ra_config c = {.rpc_path = "/rpc/%u", .reply_path = "/replies/%u",
                          .body = "{\"id\":\"{id}\",\"method\":\"ping\"}", .reply_marker = "\"id\":\"",
                          .apps = 100, .shards = 1, .think_min_ms = 1000, .think_max_ms = 3000,
                          .timeout_ms = 5000, .duration_ns = 10000000000ULL, .max_rows = 4000000,
                          .cpu = -1, .window = 1, .acks = 1,
                          .frame = "{\"id\":\"{id}\",\"device\":{device},\"method\":\"ping\"}"};
    const char *server = NULL, *devices = NULL, *source = NULL;
    unsigned long long v;
    static const struct option opts[] = {
        {"server", 1, 0, 's'},     {"devices", 1, 0, 'd'},    {"log-dir", 1, 0, 'l'},
        {"apps", 1, 0, 'a'},       {"shards", 1, 0, 'k'},     {"rpc-path", 1, 0, 'p'},
        {"reply-path", 1, 0, 'r'}, {"body", 1, 0, 'b'},       {"id-marker", 1, 0, 'm'},
        {"think-ms", 1, 0, 't'},   {"timeout-ms", 1, 0, 'T'}, {"duration-s", 1, 0, 'D'},
        {"warmup-s", 1, 0, 'w'},   {"start-at", 1, 0, 'S'},   {"source", 1, 0, 'o'},
        {"max-rows", 1, 0, 'R'},   {"cpu", 1, 0, 'c'},        {"help", 0, 0, 'h'},
        {"id-header", 1, 0, 'H'},  {"method", 1, 0, 'M'},     {"reply-header", 1, 0, 'e'},
        {"reply-subscribe", 1, 0, 'u'}, {"first-app", 1, 0, 'F'}, {"apps-total", 1, 0, 'A'},
        {"rate", 1, 0, 'Q'},       {"arrival", 1, 0, 'V'},    {"window", 1, 0, 'W'},
        {"first-shard", 1, 0, 'K'},
        {"transport", 1, 0, 'X'},  {"ws-path", 1, 0, 'P'},    {"ws-header", 1, 0, 'E'},
        {"frame", 1, 0, 'f'},      {"no-acks", 0, 0, 'n'},    {"ack-unheard", 1, 0, 'U'},
        {"ack-rejected", 1, 0, 'J'},
        {0, 0, 0, 0}};
    const char *http_opt = NULL, *ws_opt = NULL;   /* the last option of one transport given */
    int o, bad = 0;
    c.method = "POST";
    while (!bad && (o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 's': server = optarg; break;
        case 'd': devices = optarg; break;
        case 'l': c.log_dir = optarg; break;
        case 'a': bad = num("--apps", optarg, 1, 1000000, &v); c.apps = (uint32_t)v; break;
        case 'k': bad = num("--shards", optarg, 1, 4096, &v); c.shards = (uint32_t)v; break;
        case 'p': c.rpc_path = optarg; http_opt = "--rpc-path"; bad = one_u("--rpc-path", optarg); break;
        case 'r':
            c.reply_path = optarg;
            bad = optarg[0] != '/' || at_most_one_u(optarg);
            if (bad)   /* without %u every subscription asks for the same target (webdis /.json) */
                fprintf(stderr, "wot-rpcapp: bad --reply-path '%s', expected a path with at most "
                        "one %%u (the shard), e.g. /replies/%%u\n", optarg);
            break;
        case 'b': c.body = optarg; http_opt = "--body"; break;
        case 'm': c.reply_marker = optarg; bad = !*optarg; break;
        case 'H':
            c.id_header = optarg;
            http_opt = "--id-header";
            bad = !*optarg || strlen(optarg) > 63 ||
                  strspn(optarg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                 "!#$%&'*+-.^_`|~") != strlen(optarg);
            if (bad)
                fprintf(stderr, "wot-rpcapp: bad --id-header '%s', expected an HTTP header name "
                        "(a token of 1..63 characters)\n", optarg);
            break;
        case 't': bad = pair("--think-ms", optarg, 3600000, &c.think_min_ms, &c.think_max_ms); break;
        case 'T': bad = num("--timeout-ms", optarg, 1, 600000, &v); c.timeout_ms = (uint32_t)v; break;
        case 'D': bad = num("--duration-s", optarg, 1, 86400, &v); c.duration_ns = v * 1000000000ULL; break;
        case 'w': bad = num("--warmup-s", optarg, 0, 86400, &v); c.warmup_ns = v * 1000000000ULL; break;
        case 'S': bad = num("--start-at", optarg, 0, UINT64_MAX, &v); c.start_ns = v; break;
        case 'o': source = optarg; break;
        case 'R': bad = num("--max-rows", optarg, 1, 100000000, &v); c.max_rows = v; break;
        case 'c': bad = num("--cpu", optarg, 0, 1023, &v); c.cpu = (int)v; break;
        case 'F': bad = num("--first-app", optarg, 0, 100000000, &v); c.first_app = (uint32_t)v; break;
        case 'A': bad = num("--apps-total", optarg, 1, 200000000, &v); c.apps_total = (uint32_t)v; break;
        case 'M':
            c.method = optarg;
            http_opt = "--method";
            bad = strcmp(optarg, "POST") && strcmp(optarg, "PUT") && strcmp(optarg, "GET");
            if (bad)
                fprintf(stderr, "wot-rpcapp: bad --method '%s', expected POST, PUT or GET\n", optarg);
            break;
        case 'e': bad = add_header("--reply-header", c.reply_headers, sizeof c.reply_headers, optarg); break;
        case 'E': bad = add_header("--ws-header", c.ws_headers, sizeof c.ws_headers, optarg); ws_opt = "--ws-header"; break;
        case 'X': bad = choice("--transport", optarg, "http", "websocket", &c.transport); break;
        case 'P':
            c.ws_path = optarg;
            ws_opt = "--ws-path";
            bad = optarg[0] != '/' || strpbrk(optarg, " \t\r\n") != NULL;
            if (bad)
                fprintf(stderr, "wot-rpcapp: bad --ws-path '%s', expected a request target "
                        "starting with '/', no spaces\n", optarg);
            break;
        case 'f': c.frame = optarg; ws_opt = "--frame"; break;
        case 'n': c.acks = 0; ws_opt = "--no-acks"; break;
        case 'U': c.ack_unheard = optarg; ws_opt = "--ack-unheard"; bad = !*optarg; break;
        case 'J': c.ack_rejected = optarg; ws_opt = "--ack-rejected"; bad = !*optarg; break;
        case 'u':
            c.reply_subscribe = optarg;
            bad = at_most_one_u(optarg) || !*optarg;
            if (bad)
                fprintf(stderr, "wot-rpcapp: bad --reply-subscribe '%s', expected a message with "
                        "at most one %%u (the shard) and no other %%\n", optarg);
            break;
        case 'Q': {
            char *end;
            errno = 0;
            c.rate = strtod(optarg, &end);
            bad = !*optarg || *end || errno || !(c.rate > 0 && c.rate <= 1e6);
            if (bad)
                fprintf(stderr, "wot-rpcapp: bad --rate '%s', expected RPCs per second of the "
                        "process, a number > 0 and <= 1000000\n", optarg);
            break;
        }
        case 'V': bad = choice("--arrival", optarg, "poisson", "constant", &c.arrival); break;
        case 'W': bad = num("--window", optarg, 1, RA_MAX_WINDOW, &v); c.window = (uint32_t)v; break;
        case 'K': bad = num("--first-shard", optarg, 0, 1000000, &v); c.first_shard = (uint32_t)v; break;
        case 'h': usage(); return 0;
        default: bad = 1;
        }
    }
    if (bad || optind != argc || !server || !devices || !c.log_dir) {
        if (!bad)
            fputs("wot-rpcapp: --server, --devices and --log-dir are required\n", stderr);
        usage();
        return 2;
    }
    const char *colon = strrchr(server, ':');
    char ip[INET_ADDRSTRLEN] = "";
    if (colon && (size_t)(colon - server) < sizeof ip)
        memcpy(ip, server, (size_t)(colon - server));
    c.server.sin_family = AF_INET;
    if (!colon || inet_pton(AF_INET, ip, &c.server.sin_addr) != 1 ||
        num("--server port", colon + 1, 1, 65535, &v)) {
        fprintf(stderr, "wot-rpcapp: bad --server '%s', expected IPv4:PORT\n", server);
        return 2;
    }
    c.server.sin_port = htons((uint16_t)v);
    snprintf(c.host, sizeof c.host, "%s", server);
    if (source && inet_pton(AF_INET, source, &c.source.sin_addr) != 1) {
        fprintf(stderr, "wot-rpcapp: bad --source '%s', expected an IPv4 address\n", source);
        return 2;
    }
    c.source.sin_family = AF_INET;
    if (device_ranges(devices, &c))
        return 2;
    if (c.rate <= 0 && c.window != 1) {
        fputs("wot-rpcapp: --window is for the open loop (--rate); a closed-loop application "
              "has one RPC outstanding\n", stderr);
        return 2;
    }
    if (transport_rules(&c, http_opt, ws_opt))
        return 2;
    if (c.transport == TR_HTTP && !c.id_header && !strstr(c.rpc_path, "{id}") &&
        !strstr(c.body, "{id}")) {
        fputs("wot-rpcapp: the RPC carries no id: expected {id} in --body or --rpc-path, or "
              "--id-header\n", stderr);
        return 2;
    }
    if (!c.apps_total)
        c.apps_total = c.first_app + c.apps;
    if (c.apps_total < c.first_app + c.apps) {
        fprintf(stderr, "wot-rpcapp: --apps-total %u below --first-app + --apps (%u)\n",
                c.apps_total, c.first_app + c.apps);
        return 2;
    }
    if (c.dev_count == 0 || c.think_max_ms < c.think_min_ms || c.warmup_ns >= c.duration_ns) {
        fputs("wot-rpcapp: expected --devices COUNT >= 1, --think-ms MIN <= MAX and --warmup-s "
              "below --duration-s\n", stderr);
        return 2;
    }
    struct stat st;
    if (stat(c.log_dir, &st) || !S_ISDIR(st.st_mode) || access(c.log_dir, W_OK)) {
        fprintf(stderr, "wot-rpcapp: --log-dir '%s' is not a writable directory\n", c.log_dir);
        return 2;
    }
    if (!c.start_ns)
        c.start_ns = (uint64_t)mono_ns() + 1000000000ULL;  /* 1 s to connect */
    struct rlimit rl;
    uint64_t need = (uint64_t)c.apps + c.shards + 16;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < need) {
            fprintf(stderr, "wot-rpcapp: RLIMIT_NOFILE %llu < %llu descriptors needed (--apps + "
                    "--shards + 16)\n", (unsigned long long)rl.rlim_cur, (unsigned long long)need);
            return 1;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal};   /* no SA_RESTART: epoll_wait returns */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    return ra_run(&c);
}
