/* conn_output.c - the connected devices' files, written at exit (CONTRACTS §3c):
 * conn-log-<loop>.csv (one row per RPC that arrived with an id), events-log-<loop>.csv (one row
 * per upstream event whose due time came, up to the rows reserved), conn-devices.csv (counters
 * per device), conn-summary.json (totals, disconnects by cause, the events' outcomes and send
 * lag histogram, per-loop lag and costs). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"

static const char *const outcome_name[] = {"sent", "lost_disconnect", "send_error"};
static const char *const cause_name[CC_N] = {"server_closed", "reset", "testbed", "protocol"};

static FILE *open_out(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "w");
    if (!fp)
        fprintf(stderr, "wot-fleet: cannot write %s: %s\n", path, strerror(errno));
    return fp;
}

static int close_out(FILE *fp, const char *name) {
    int bad = ferror(fp);
    if (fclose(fp) || bad) {
        fprintf(stderr, "wot-fleet: writing %s failed\n", name);
        return -1;
    }
    return 0;
}

/* one row of a loop's log (i: its index) */
typedef void (*row_fn)(FILE *fp, const struct cn_loop *l, size_t i);

/* DIR/<stem>-<loop>.csv: the header, then n rows */
static int write_rows(const struct cn_set *s, const struct cn_loop *l, const char *stem,
                      const char *header, size_t n, row_fn row) {
    char name[64];
    snprintf(name, sizeof name, "%s-%d.csv", stem, l->id);
    FILE *fp = open_out(s->log_dir, name);
    if (!fp)
        return -1;
    fputs(header, fp);
    for (size_t i = 0; i < n; i++)
        row(fp, l, i);
    return close_out(fp, name);
}

static void log_row(FILE *fp, const struct cn_loop *l, size_t i) {
    const struct cn_log_row *r = &l->log[i];
    fprintf(fp, "%u,%.*s,%llu,%llu,%llu,", r->device, r->idlen, r->id,
            (unsigned long long)r->arrival_ns, (unsigned long long)r->due_ns,
            (unsigned long long)r->end_ns);
    if (r->sent_ns)
        fprintf(fp, "%llu", (unsigned long long)r->sent_ns);
    fprintf(fp, ",%s,%llu,%s\n", outcome_name[r->outcome], (unsigned long long)r->read_ns,
            r->kstamp ? "kernel" : "user");
}

static const char *const ev_outcome_name[CE_N] = {"sent", "queued", "unsent_down",
                                                  "backlog_full", "send_error"};

static void event_row(FILE *fp, const struct cn_loop *l, size_t i) {
    const struct cn_ev_row *r = &l->ev.row[i];
    fprintf(fp, "%u,%llu,%llu,", r->device, (unsigned long long)r->seq,
            (unsigned long long)r->due_ns);
    if (r->outcome == CE_SENT)
        fprintf(fp, "%llu", (unsigned long long)r->sent_ns);
    fprintf(fp, ",%s\n", ev_outcome_name[r->outcome]);
}

/* "upstream": the events of every loop: by outcome, rows, bytes, the send-lag histogram
 * [[lower bound ns, count], ...] of the buckets that have any (4 per octave) */
static void put_events(FILE *fp, const struct cn_set *s) {
    struct cn_events t = {0};
    size_t rows = 0, cap = 0;
    for (int i = 0; i < s->nloops; i++) {
        const struct cn_events *e = &s->loops[i].ev;
        for (int k = 0; k < CE_N; k++)
            t.out[k] += e->out[k];
        for (int b = 0; b < CN_EV_HIST; b++)
            t.hist[b] += e->hist[b];
        t.unlogged += e->unlogged;
        t.bytes += e->bytes;
        rows += e->n;
        cap += e->cap;
        if (e->lag_max_ns > t.lag_max_ns)
            t.lag_max_ns = e->lag_max_ns;
    }
    uint64_t all = 0;
    for (int k = 0; k < CE_N; k++)
        all += t.out[k];
    fprintf(fp, ", \"upstream\": {\"scheduled\": %llu", (unsigned long long)all);
    for (int k = 0; k < CE_N; k++)
        fprintf(fp, ", \"%s\": %llu", ev_outcome_name[k], (unsigned long long)t.out[k]);
    fprintf(fp, ", \"rows\": %zu, \"rows_reserved\": %zu, \"unlogged\": %llu, \"bytes\": %llu, "
            "\"lag_max_ns\": %llu, \"lag_hist\": [", rows, cap, (unsigned long long)t.unlogged,
            (unsigned long long)t.bytes, (unsigned long long)t.lag_max_ns);
    int first = 1;
    for (unsigned b = 0; b < CN_EV_HIST; b++) {
        if (!t.hist[b])
            continue;
        fprintf(fp, "%s[%llu, %llu]", first ? "" : ", ", (unsigned long long)cn_ev_bucket_lo(b),
                (unsigned long long)t.hist[b]);
        first = 0;
    }
    fputs("]}", fp);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* {"p50":..,"p99":..,"max":..} nearest rank, null without samples */
static void print_pct(FILE *fp, uint64_t *v, size_t n) {
    if (!n) {
        fputs("{\"p50\": null, \"p99\": null, \"max\": null}", fp);
        return;
    }
    qsort(v, n, sizeof *v, cmp_u64);
    size_t i50 = (n * 50 + 99) / 100, i99 = (n * 99 + 99) / 100;
    fprintf(fp, "{\"p50\": %llu, \"p99\": %llu, \"max\": %llu}",
            (unsigned long long)v[i50 ? i50 - 1 : 0], (unsigned long long)v[i99 ? i99 - 1 : 0],
            (unsigned long long)v[n - 1]);
}

static long rss_bytes(void) {
    FILE *fp = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (fp && fgets(line, sizeof line, fp))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    if (fp)
        fclose(fp);
    return kb < 0 ? -1 : kb * 1024;
}

#define SUM_FIELDS(X) X(attaches) X(msgs_in) X(rpcs_in) X(no_id) X(replies) X(replies_lost) \
    X(events) X(heartbeats) X(pongs) X(posts_rejected) X(bytes_in) X(bytes_out)

static int write_devices(const struct cn_set *s, struct cn_counters *tot, uint64_t *attached) {
    FILE *fp = open_out(s->log_dir, "conn-devices.csv");
    if (!fp)
        return -1;
    fputs("device,name,protocol,attached_at_exit,attaches,connect_failures,server_closed,reset,"
          "testbed,protocol_error,msgs_in,rpcs_in,no_id,replies,replies_lost,events,heartbeats,"
          "pongs,posts_rejected,bytes_in,bytes_out\n", fp);
    for (uint32_t i = 0; i < s->ndev; i++) {
        const struct cn_device *d = &s->dev[i];
        const struct cn_counters *c = &d->c;
        uint64_t cf = 0;
        for (int k = 0; k < CC_N; k++) {
            cf += c->connect_failures[k];
            tot->connect_failures[k] += c->connect_failures[k];
            tot->disconnects[k] += c->disconnects[k];
        }
#define ADD(f) tot->f += c->f;
        SUM_FIELDS(ADD)
#undef ADD
        *attached += d->attached_ns != 0;
        fprintf(fp, "%u,%s,%s,%d,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,"
                "%llu,%llu,%llu,%llu\n", d->index, d->name,
                d->proto == CN_WEBSOCKET ? "websocket" : d->proto == CN_STREAM ? "chunked-post" : "chunked", d->attached_ns != 0,
                (unsigned long long)c->attaches, (unsigned long long)cf,
                (unsigned long long)c->disconnects[CC_SERVER_CLOSED],
                (unsigned long long)c->disconnects[CC_RESET],
                (unsigned long long)c->disconnects[CC_TESTBED],
                (unsigned long long)c->disconnects[CC_PROTOCOL],
                (unsigned long long)c->msgs_in, (unsigned long long)c->rpcs_in,
                (unsigned long long)c->no_id, (unsigned long long)c->replies,
                (unsigned long long)c->replies_lost, (unsigned long long)c->events,
                (unsigned long long)c->heartbeats, (unsigned long long)c->pongs,
                (unsigned long long)c->posts_rejected, (unsigned long long)c->bytes_in,
                (unsigned long long)c->bytes_out);
    }
    return close_out(fp, "conn-devices.csv");
}

int cn_write_outputs(const struct cn_set *s) {
    int rc = 0;
    for (int i = 0; i < s->nloops; i++)
        rc |= write_rows(s, &s->loops[i], "conn-log", "device,id,arrival_ns,due_ns,end_ns,"
                         "sent_ns,outcome,read_ns,arrival_stamp\n", s->loops[i].log_n, log_row) |
              write_rows(s, &s->loops[i], "events-log", "device,seq,due_ns,sent_ns,outcome\n",
                         s->loops[i].ev.n, event_row);
    struct cn_counters tot = {0};
    uint64_t attached = 0;
    rc |= write_devices(s, &tot, &attached);
    FILE *fp = open_out(s->log_dir, "conn-summary.json");
    if (!fp)
        return -1;
    fprintf(fp, "{\"name\": \"%s\", \"devices\": %u, \"loops\": %d, \"attached_at_exit\": %llu, "
            "\"attached_once\": %u", s->name, s->ndev, s->nloops, (unsigned long long)attached,
            s->attached_total);
#define PUT(f) fprintf(fp, ", \"" #f "\": %llu", (unsigned long long)tot.f);
    SUM_FIELDS(PUT)
#undef PUT
    for (int pass = 0; pass < 2; pass++) {
        fprintf(fp, ", \"%s\": {", pass ? "disconnects" : "connect_failures");
        for (int k = 0; k < CC_N; k++)
            fprintf(fp, "%s\"%s\": %llu", k ? ", " : "", cause_name[k],
                    (unsigned long long)(pass ? tot.disconnects[k] : tot.connect_failures[k]));
        fputc('}', fp);
    }
    /* which stamp the messages got (tcpstamp.h): the kernel's, or the read's time without it */
    uint64_t rk = 0, ru = 0, refused = 0;
    for (int i = 0; i < s->nloops; i++) {
        rk += s->loops[i].st.rx_kernel;
        ru += s->loops[i].st.rx_user;
        refused += s->loops[i].st.no_kernel_stamps;
    }
    fprintf(fp, ", \"stamps\": {\"kernel\": %llu, \"user\": %llu, \"sockets_refused\": %llu, "
            "\"pin_on\": %d}", (unsigned long long)rk, (unsigned long long)ru,
            (unsigned long long)refused, s->pin_on);
    put_events(fp, s);
    fputs(", \"loop\": [", fp);
    for (int i = 0; i < s->nloops; i++) {
        const struct cn_loop *l = &s->loops[i];
        fprintf(fp, "%s{\"loop\": %d, \"devices\": %u, \"log_entries\": %zu, \"log_dropped\": %llu, "
                "\"pool_full\": %llu, \"heap_full\": %llu, \"wakeups\": %llu, \"busy_ns\": %llu, "
                "\"cpu_ns\": %llu, \"timer_late_ns\": ", i ? ", " : "", l->id, l->ndev, l->log_n,
                (unsigned long long)l->st.log_dropped, (unsigned long long)l->st.pool_full,
                (unsigned long long)l->st.heap_full, (unsigned long long)l->st.wakeups,
                (unsigned long long)l->st.busy_ns, (unsigned long long)l->st.cpu_ns);
        print_pct(fp, l->late, l->late_n);
        fputc('}', fp);
    }
    fprintf(fp, "], \"rss_bytes\": %ld}\n", rss_bytes());
    return close_out(fp, "conn-summary.json") | rc;
}
