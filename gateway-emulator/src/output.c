/* output.c - progress.bin (mmap'ed, plain stores) and the top-level writer after the loop:
 * requests.csv, then each feature's and the transport's own files, then summary.json
 * (contract §2). Calls down into the feature writers; nothing calls back up. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ge.h"
#include "transport.h"

#define PROGRESS_MAGIC 0x57544250524f4731ULL

static const char *METHOD[] = {"", "GET", "POST", "PUT", "DELETE", "OBSERVE", "CANCEL", "PATCH"};
static const char *OUTCOME[] = {"none", "ok", "error", "timeout", "reset", "unsent"};

int output_progress_open(ge_t *g) {
    char path[4096];
    snprintf(path, sizeof path, "%s/progress.bin", g->out_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ftruncate(fd, PG_WORDS * sizeof(uint64_t)) < 0) {
        fprintf(stderr, "gateway-emulator: cannot create %s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return 1;
    }
    void *m = mmap(NULL, PG_WORDS * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        fprintf(stderr, "gateway-emulator: cannot mmap %s: %s\n", path, strerror(errno));
        return 1;
    }
    g->progress = m;
    for (int i = 0; i < PG_WORDS; i++)
        g->progress[i] = 0;
    g->progress[PG_MAGIC] = PROGRESS_MAGIC; /* x86-64: little-endian, as the contract says */
    g->progress[PG_STATE] = ST_LOADING;
    return 0;
}

void output_progress_close(ge_t *g) {
    if (g->progress)
        munmap((void *)g->progress, PG_WORDS * sizeof(uint64_t));
    g->progress = NULL;
}

/* append an unsigned/signed decimal to p */
static char *put_i64(char *p, int64_t v) {
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
    if (v < 0)
        *p++ = '-';
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *put_str(char *p, const char *s) {
    size_t l = strlen(s);
    memcpy(p, s, l);
    return p + l;
}

static void write_requests(const ge_t *g, FILE *f) {
    static char line[8192];
    const int clients = g->closed.clients > 0 || g->trace_clients > 0;
    fputs("index,device,method,path,scheduled_ns,sent_ns,received_ns,code,outcome,retransmissions,"
          "received_kernel_ns,client,phase\n",
          f);
    for (size_t i = 0; i < g->n; i++) {
        const req_t *r = &g->reqs[i];
        const char *path_s = g->uris[r->path_id].path;
        if (strlen(path_s) > sizeof line - 256)
            path_s = "(path too long)";
        char *p = line;
        p = put_i64(p, (int64_t)i);
        *p++ = ',';
        p = put_i64(p, r->device);
        *p++ = ',';
        p = put_str(p, METHOD[r->method]);
        *p++ = ',';
        p = put_str(p, path_s);
        *p++ = ',';
        p = put_i64(p, r->sched_ns);
        *p++ = ',';
        int64_t sent = g->tp->sent_ns(g, (uint32_t)i); /* per-request DTLS: not the handshake */
        if (sent != INT64_MIN)
            p = put_i64(p, sent);
        *p++ = ',';
        if (r->code || r->outcome == O_RESET)
            p = put_i64(p, r->recv_ns);
        *p++ = ',';
        if (r->code && g->scheme == SCHEME_HTTP) { /* the status, e.g. 200 */
            p = put_i64(p, r->status);
        } else if (r->code) {
            p = put_i64(p, r->code >> 5);
            *p++ = '.';
            *p++ = (char)('0' + (r->code & 31) / 10);
            *p++ = (char)('0' + (r->code & 31) % 10);
        }
        *p++ = ',';
        p = put_str(p, OUTCOME[r->outcome < O_COUNT ? r->outcome : 0]);
        *p++ = ',';
        p = put_i64(p, r->retrans);
        *p++ = ',';
        if ((r->code || r->outcome == O_RESET) && (r->flags & RF_KSTAMP))
            p = put_i64(p, r->recv_ns - (int64_t)r->rx_wait_ns);
        *p++ = ',';
        if (clients) /* the source endpoint: a closed-loop client, or the trace's client */
            p = put_i64(p, r->sock);
        *p++ = ',';
        p = put_str(p, clients_phase(g, r));
        *p++ = '\n';
        fwrite(line, 1, (size_t)(p - line), f);
    }
}

static void write_summary(const ge_t *g, FILE *f) {
    uint64_t c[O_COUNT];
    stats_outcomes(g, c);
    lag_stats_t lag;
    stats_send_lag(g, &lag);
    int64_t last_sched = g->n ? g->reqs[g->n - 1].sched_ns : 0, last_sent = 0;
    uint64_t nsent = 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->reqs[i].flags & RF_SENT) {
            nsent++;
            if (g->reqs[i].sent_ns > last_sent)
                last_sent = g->reqs[i].sent_ns;
        }
    fputs("{\n  \"label\": ", f);
    json_str(f, g->label ? g->label : "");
    fputs(",\n  \"trace\": ", f);
    json_str(f, g->trace_path);
    fprintf(f,
            ",\n  \"requests\": %zu,\n  \"outcomes\": {\"ok\": %llu, \"error\": %llu, "
            "\"timeout\": %llu, \"reset\": %llu, \"unsent\": %llu},\n",
            g->n, (unsigned long long)c[O_OK], (unsigned long long)c[O_ERROR],
            (unsigned long long)c[O_TIMEOUT], (unsigned long long)c[O_RESET],
            (unsigned long long)c[O_UNSENT]);
    double dur = (double)(g->end_mono - g->start_mono) / 1e9;
    fprintf(f, "  \"start_mono_ns\": %lld,\n  \"end_mono_ns\": %lld,\n  \"duration_s\": %.9f,\n",
            (long long)g->start_mono, (long long)g->end_mono, dur > 0 ? dur : 0.0);
    /* rates over the span from the start instant to the last scheduled / sent request */
    fprintf(f, "  \"offered_rate\": %.3f,\n  \"achieved_rate\": %.3f,\n",
            last_sched > 0 ? (double)g->n / ((double)last_sched / 1e9) : 0.0,
            last_sent > 0 ? (double)nsent / ((double)last_sent / 1e9) : 0.0);
    fprintf(f,
            "  \"send_lag_us\": {\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"p999\": %.3f, "
            "\"max\": %.3f},\n",
            lag.p50, lag.p90, lag.p99, lag.p999, lag.max);
    if (g->warmup.enabled)
        fprintf(f,
                "  \"warmup\": {\"endpoints\": %zu, \"answered\": %zu, \"took_ms\": %.3f, "
                "\"rounds\": %d},\n",
                g->neps, g->warmup.answered, (double)g->warmup.took_ns / 1e6, g->warmup.rounds);
    else
        fputs("  \"warmup\": null,\n", f);
    /* a request's token is salt_hi (4 bytes) then salt_lo ^ index (4 bytes, big-endian): with the
     * salt, a device log's token column names the GE request exactly */
    g->tp->summary(g, f); /* e.g. the "dtls" member */
    fprintf(f, "  \"token_salt\": \"%016llx\",\n", (unsigned long long)g->salt);
    fprintf(f, "  \"rx_stamps\": \"%s\",\n  \"clock_map_bracket_ns\": %lld,\n",
            g->rx_stamps ? "kernel" : "user", (long long)g->map_bracket_ns);
    fprintf(f, "  \"memory_locked\": %s,\n", g->memory_locked ? "true" : "false");
    if (g->closed.clients || g->trace_clients) /* distinct client source endpoints */
        fprintf(f, "  \"clients\": %u,\n",
                g->closed.clients ? (unsigned)g->closed.clients : g->trace_clients);
    else
        fputs("  \"clients\": null,\n", f);
    fprintf(f,
            "  \"wait\": \"%s\",\n  \"type\": \"%s\",\n  \"timeout_ms\": %lld,\n  \"retransmit\": "
            "%s,\n  \"ports_per_device\": %d,\n  \"interrupted\": %s\n}\n",
            g->wait == WAIT_BUSY ? "busy" : "hybrid", g->non ? "non" : "con",
            (long long)(g->timeout_ns / 1000000), g->retransmit ? "true" : "false", g->ports_used,
            g->interrupted_by ? "true" : "false");
}

int output_write(ge_t *g) {
    char path[OUT_PATH_MAX];
    FILE *f = outfile_open(g, "requests.csv", path);
    if (!f)
        return 1;
    write_requests(g, f);
    if (outfile_close(f, path))
        return 1;
    if (observe_write(g) || block_write(g) || g->tp->write_outputs(g))
        return 1;
    if (!(f = outfile_open(g, "summary.json", path)))
        return 1;
    write_summary(g, f);
    return outfile_close(f, path);
}
