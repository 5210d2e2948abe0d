/* Test stand-in for gateway-emulator (CONTRACTS.md §2), used by the e2e tests only when the real
 * binary is not built. One unconnected UDP socket, CON/NON GETs sent at the trace times after
 * --start-at, responses matched by an 8-byte token, requests.csv + summary.json + progress.bin. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int dev; uint64_t sched, sent, recv; char method[8], path[128];
    struct sockaddr_in to; int code, outcome; /* 0 unsent 1 ok 2 error 3 timeout 4 reset 5 pending */
} req_t;

static volatile sig_atomic_t got_sig;
static void on_sig(int s) { got_sig = s; }
static uint64_t now_ns(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static int mcode(const char *m) {
    return !strcmp(m, "POST") ? 2 : !strcmp(m, "PUT") ? 3 : !strcmp(m, "DELETE") ? 4 : 1;
}

int main(int argc, char **argv) {
    const char *trace = NULL, *outdir = NULL, *wait = "hybrid", *type = "con", *label = "";
    uint64_t start_at = 0; long timeout_ms = 10000, warmup_ms = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--retransmit")) continue;
        if (!strcmp(a, "--trace")) trace = v; else if (!strcmp(a, "--out")) outdir = v;
        else if (!strcmp(a, "--start-at")) start_at = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--wait")) wait = v; else if (!strcmp(a, "--type")) type = v;
        else if (!strcmp(a, "--timeout-ms")) timeout_ms = atol(v);
        else if (!strcmp(a, "--label")) label = v;
        else if (!strcmp(a, "--warmup-ms")) warmup_ms = atol(v);
        i++;
    }
    if (!trace || !outdir) { fprintf(stderr, "usage: --trace FILE --out DIR\n"); return 2; }
    char fn[1024];
    snprintf(fn, sizeof fn, "%s/progress.bin", outdir);
    int pfd = open(fn, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (pfd < 0 || ftruncate(pfd, 64) < 0) { perror(fn); return 1; }
    volatile uint64_t *prog = mmap(NULL, 64, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
    prog[0] = 0x57544250524f4731ull;
    FILE *f = fopen(trace, "r");
    if (!f) { perror(trace); return 2; }
    size_t cap = 1024, n = 0; req_t *r = malloc(cap * sizeof *r); char line[512];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n' || !strncmp(line, "device_id", 9)) continue;
        if (n == cap) r = realloc(r, (cap *= 2) * sizeof *r);
        req_t *q = &r[n]; memset(q, 0, sizeof *q);
        char host[64]; unsigned long long us; int port = 5683;
        if (sscanf(line, "%d,%llu,%7[^,],coap://%63[^/:]", &q->dev, &us, q->method, host) != 4) {
            fprintf(stderr, "%s:%zu: malformed\n", trace, n + 1); return 2; }
        char *u = strstr(line, "coap://") + 7, *slash = strchr(u, '/'), *pc = strchr(u, ':');
        if (pc && pc < slash) port = atoi(pc + 1);
        sscanf(slash + 1, "%127[^,\n?]", q->path);
        q->sched = us * 1000; q->to.sin_family = AF_INET; q->to.sin_port = htons(port);
        inet_pton(AF_INET, host, &q->to.sin_addr);
        n++;
    }
    fclose(f);
    if (warmup_ms) {   /* the real GE pings every endpoint first; the stand-in only reports */
        snprintf(fn, sizeof fn, "%s/warmup.json", outdir);
        FILE *w = fopen(fn, "w");
        if (w) { fputs("{\"endpoints\": 0, \"answered\": 0, \"took_ms\": 0, \"rounds\": 0, \"unanswered\": []}\n", w); fclose(w); }
    }
    prog[1] = n; prog[7] = 1;
    struct sigaction act = {.sa_handler = on_sig};
    sigaction(SIGTERM, &act, NULL); sigaction(SIGINT, &act, NULL);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (!start_at) start_at = now_ns() + 100000000ull;
    struct timespec ts = {start_at / 1000000000ull, start_at % 1000000000ull};
    while (!got_sig && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) ;
    prog[7] = 2;
    size_t next = 0; uint64_t tmo = (uint64_t)timeout_ms * 1000000ull, last_sent = 0;
    long done = 0; int con = strcmp(type, "non") != 0;
    while (!got_sig) {
        uint64_t now = now_ns() - start_at;
        while (next < n && r[next].sched <= now) {
            req_t *q = &r[next]; uint8_t b[300]; size_t o = 0;
            b[o++] = (uint8_t)(0x48 | (con ? 0 : 0x10)); b[o++] = (uint8_t)mcode(q->method);
            b[o++] = (uint8_t)(next >> 8); b[o++] = (uint8_t)next;
            uint64_t tok = next; memcpy(b + o, &tok, 8); o += 8;
            int prev = 0; char *seg = q->path;
            while (*seg) {
                char *e = strchr(seg, '/'); size_t l = e ? (size_t)(e - seg) : strlen(seg);
                int d = 11 - prev; prev = 11;
                if (l < 13) b[o++] = (uint8_t)(d << 4 | l); else { b[o++] = (uint8_t)(d << 4 | 13); b[o++] = (uint8_t)(l - 13); }
                memcpy(b + o, seg, l); o += l; seg += l; if (*seg == '/') seg++;
            }
            q->sent = now_ns() - start_at; last_sent = q->sent;
            q->outcome = sendto(fd, b, o, 0, (struct sockaddr *)&q->to, sizeof q->to) < 0 ? 2 : 5;
            if (q->outcome == 2) done++;
            next++; prog[2] = next;
        }
        if (next == n) prog[7] = 3;
        for (size_t i = 0; i < next; i++)      /* timeouts (linear: fine for test sizes) */
            if (r[i].outcome == 5 && now > r[i].sent + tmo) { r[i].outcome = 3; done++; prog[4]++; }
        if (next == n && done == (long)n) break;
        int wait_ms = next < n ? (int)((r[next].sched > now ? r[next].sched - now : 0) / 1000000) : 10;
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, wait_ms > 10 ? 10 : wait_ms) > 0) {
            uint8_t b[1500]; ssize_t m;
            while ((m = recv(fd, b, sizeof b, MSG_DONTWAIT)) >= 4) {
                uint16_t mid = (uint16_t)(b[2] << 8 | b[3]); uint64_t tok; size_t idx;
                if ((b[0] & 15) == 8 && m >= 12) { memcpy(&tok, b + 4, 8); idx = tok; }
                else idx = mid;             /* RST: match by message id (low 16 bits) */
                if (idx >= next || r[idx].outcome != 5) continue;
                req_t *q = &r[idx]; q->recv = now_ns() - start_at; q->code = b[1]; done++;
                if (((b[0] >> 4) & 3) == 3) { q->outcome = 4; prog[5]++; }
                else if ((b[1] >> 5) == 2) { q->outcome = 1; prog[3]++; }
                else { q->outcome = 2; prog[6]++; }
            }
        }
    }
    uint64_t end = now_ns();
    static const char *oc[] = {"unsent", "ok", "error", "timeout", "reset", "timeout"};
    long cnt[6] = {0};
    snprintf(fn, sizeof fn, "%s/requests.csv", outdir);
    FILE *o = fopen(fn, "w");
    if (!o) { perror(fn); return 1; }
    fprintf(o, "index,device,method,path,scheduled_ns,sent_ns,received_ns,code,outcome,retransmissions\n");
    for (size_t i = 0; i < n; i++) {
        req_t *q = &r[i]; int oi = q->outcome == 5 ? 3 : q->outcome; cnt[oi]++;
        fprintf(o, "%zu,%d,%s,%s,%llu,", i, q->dev, q->method, q->path, (unsigned long long)q->sched);
        if (q->outcome) fprintf(o, "%llu", (unsigned long long)q->sent);
        fprintf(o, ",");
        if (q->recv) fprintf(o, "%llu,%d.%02d", (unsigned long long)q->recv, q->code >> 5, q->code & 31);
        else fprintf(o, ",");
        fprintf(o, ",%s,0\n", oc[oi]);
    }
    fclose(o);
    double dur = (double)(end - start_at) / 1e9;
    snprintf(fn, sizeof fn, "%s/summary.json", outdir);
    o = fopen(fn, "w");
    if (!o) { perror(fn); return 1; }
    fprintf(o, "{\"label\": \"%s\", \"trace\": \"%s\", \"requests\": %zu, \"outcomes\": {\"ok\": %ld, "
               "\"error\": %ld, \"timeout\": %ld, \"reset\": %ld, \"unsent\": %ld}, \"start_mono_ns\": %llu, "
               "\"end_mono_ns\": %llu, \"duration_s\": %.3f, \"offered_rate\": %.3f, \"achieved_rate\": %.3f, "
               "\"send_lag_us\": {\"p50\": 0, \"p90\": 0, \"p99\": 0, \"p999\": 0, \"max\": 0}, \"wait\": \"%s\", "
               "\"type\": \"%s\", \"timeout_ms\": %ld, \"retransmit\": false, \"ports_per_device\": 1, "
               "\"interrupted\": %s}\n", label, trace, n, cnt[1], cnt[2], cnt[3], cnt[4], cnt[0],
            (unsigned long long)start_at, (unsigned long long)end, dur,
            last_sent ? n / (last_sent / 1e9 + 1e-9) : 0.0, dur > 0 ? (n - cnt[0]) / dur : 0.0,
            wait, type, timeout_ms, got_sig ? "true" : "false");
    fclose(o);
    prog[7] = 4;
    if (got_sig) { fprintf(stderr, "gateway-emulator: interrupted by signal %d\n", (int)got_sig); return 128 + got_sig; }
    return 0;
}
