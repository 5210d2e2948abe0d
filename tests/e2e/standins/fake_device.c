/* Test stand-in for wot-device (CONTRACTS.md §3), used by the e2e tests only when the real
 * binary is not built. Minimal CoAP over UDP: ping -> RST, requests -> piggybacked 2.05/4.04
 * after the resource's service time, device-log.csv + device-summary.json on SIGTERM/SIGINT. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct { char path[128]; long svc_us; int busy; int payload; } res_t;
typedef struct { uint64_t arr, start, end; int res, method, code; } logent_t;

static volatile sig_atomic_t stop_flag;
static void on_sig(int s) { (void)s; stop_flag = 1; }
static uint64_t now_ns(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static const char *mname(int m) {
    static const char *n[] = {"?", "GET", "POST", "PUT", "DELETE"};
    return (m >= 1 && m <= 4) ? n[m] : "?";
}

int main(int argc, char **argv) {
    const char *resf = NULL, *logdir = NULL, *listen_s = "0.0.0.0:5683", *name = "device";
    long cap = 100000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--resources")) resf = argv[i + 1];
        else if (!strcmp(argv[i], "--log-dir")) logdir = argv[i + 1];
        else if (!strcmp(argv[i], "--listen")) listen_s = argv[i + 1];
        else if (!strcmp(argv[i], "--name")) name = argv[i + 1];
        else if (!strcmp(argv[i], "--log-capacity")) cap = atol(argv[i + 1]);
    }
    if (!resf || !logdir) { fprintf(stderr, "usage: --resources FILE --log-dir DIR\n"); return 2; }
    FILE *f = fopen(resf, "r");
    if (!f) { perror(resf); return 2; }
    res_t res[256]; int nres = 0; char line[512];
    if (!fgets(line, sizeof line, f)) { fprintf(stderr, "%s:1: empty\n", resf); return 2; }
    while (nres < 256 && fgets(line, sizeof line, f)) {
        char mode[16];
        if (sscanf(line, "%127[^,],%ld,%15[^,],%d", res[nres].path, &res[nres].svc_us, mode,
                   &res[nres].payload) == 4) {
            res[nres].busy = !strcmp(mode, "busy");
            nres++;
        }
    }
    fclose(f);
    char host[64] = "0.0.0.0"; int port = 5683;
    const char *colon = strrchr(listen_s, ':');
    if (colon) { snprintf(host, sizeof host, "%.*s", (int)(colon - listen_s), listen_s); port = atoi(colon + 1); }
    else snprintf(host, sizeof host, "%s", listen_s);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, host, &sa.sin_addr);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) { perror("bind"); return 1; }
    { char rf[1024]; snprintf(rf, sizeof rf, "%s/ready", logdir); FILE *r = fopen(rf, "w"); if (r) fclose(r); }
    struct sigaction act = {.sa_handler = on_sig};
    sigaction(SIGTERM, &act, NULL); sigaction(SIGINT, &act, NULL);
    logent_t *lg = calloc(cap, sizeof *lg); long nlog = 0, nreq = 0, nresp = 0, nnf = 0, nbad = 0;
    uint8_t buf[1500], out[1500];
    while (!stop_flag) {
        struct sockaddr_in from; socklen_t fl = sizeof from;
        ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
        if (n < 0) continue;
        uint64_t arr = now_ns();
        if (n < 4 || (buf[0] >> 6) != 1) { nbad++; continue; }
        int type = (buf[0] >> 4) & 3, tkl = buf[0] & 15, code = buf[1];
        if (code == 0) {            /* ping (or empty ACK/RST): answer a CON with RST */
            if (type == 0) { uint8_t rst[4] = {0x70, 0, buf[2], buf[3]};
                sendto(fd, rst, 4, 0, (struct sockaddr *)&from, fl); }
            continue;
        }
        if (code > 4 || 4 + tkl > n) { nbad++; continue; }
        nreq++;
        char path[128] = ""; size_t plen = 0; int optnum = 0; ssize_t p = 4 + tkl;
        while (p < n && buf[p] != 0xFF) {
            int d = buf[p] >> 4, l = buf[p] & 15; p++;
            if (d == 13) d = 13 + buf[p++]; else if (d == 14) { d = 269 + (buf[p] << 8 | buf[p + 1]); p += 2; }
            if (l == 13) l = 13 + buf[p++]; else if (l == 14) { l = 269 + (buf[p] << 8 | buf[p + 1]); p += 2; }
            optnum += d;
            if (optnum == 11 && plen + l + 2 < sizeof path) {
                if (plen) path[plen++] = '/';
                memcpy(path + plen, buf + p, l); plen += l; path[plen] = 0;
            }
            p += l;
        }
        int ri = -1;
        for (int i = 0; i < nres; i++) if (!strcmp(res[i].path, path)) { ri = i; break; }
        uint64_t start = now_ns(); int rcode = 0x84, pay = 0;
        if (ri >= 0) {
            rcode = 0x45; pay = res[ri].payload;
            uint64_t until = start + (uint64_t)res[ri].svc_us * 1000;
            if (res[ri].busy) while (now_ns() < until) ;
            else { struct timespec ts = {until / 1000000000ull, until % 1000000000ull};
                   clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL); }
        } else nnf++;
        size_t o = 0;
        out[o++] = (uint8_t)(0x40 | ((type == 0 ? 2 : 1) << 4) | tkl);
        out[o++] = (uint8_t)rcode; out[o++] = buf[2]; out[o++] = buf[3];
        memcpy(out + o, buf + 4, tkl); o += tkl;
        if (pay > 0) { if (pay > 1000) pay = 1000; out[o++] = 0xFF; memset(out + o, 'x', pay); o += pay; }
        sendto(fd, out, o, 0, (struct sockaddr *)&from, fl);
        nresp++;
        if (nlog < cap) lg[nlog++] = (logent_t){arr, start, now_ns(), ri, code, rcode};
    }
    char fn[1024]; snprintf(fn, sizeof fn, "%s/device-log.csv", logdir);
    FILE *o = fopen(fn, "w");
    if (!o) { perror(fn); return 1; }
    fprintf(o, "arrival_ns,start_ns,end_ns,path,method,code\n");
    for (long i = 0; i < nlog; i++)
        fprintf(o, "%llu,%llu,%llu,%s,%s,%d.%02d\n", (unsigned long long)lg[i].arr,
                (unsigned long long)lg[i].start, (unsigned long long)lg[i].end,
                lg[i].res >= 0 ? res[lg[i].res].path : "?", mname(lg[i].method),
                lg[i].code >> 5, lg[i].code & 31);
    fclose(o);
    snprintf(fn, sizeof fn, "%s/device-summary.json", logdir);
    o = fopen(fn, "w");
    if (!o) { perror(fn); return 1; }
    fprintf(o, "{\"name\": \"%s\", \"requests\": %ld, \"responses\": %ld, \"overload_503\": 0, "
               "\"not_found\": %ld, \"malformed\": %ld, \"log_entries\": %ld, \"log_dropped\": %ld, "
               "\"threads\": 1}\n", name, nreq, nresp, nnf, nbad, nlog, nreq - nlog);
    fclose(o);
    return 0;
}
