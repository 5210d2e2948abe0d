/* output.c - the files wot-fleet writes at exit (docs/CONTRACTS.md §3b): one device log per
 * loop, the per-device counters and the summary with each loop's read lag and timer
 * lateness. Runs after the loops have stopped: allocation and stdio are fine here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"
#include "fleet_push.h"
#include "../textout.h"

static int write_log(const char *dir, const struct fl_loop *l) {
    char name[64];
    snprintf(name, sizeof name, "fleet-log-%d.csv", l->id);
    FILE *f = textout_open("wot-fleet", dir, name);
    if (!f)
        return -1;
    static char buf[1 << 16];
    setvbuf(f, buf, _IOFBF, sizeof buf);
    fputs("device,arrival_ns,start_ns,end_ns,path,method,code,token,arrival_kernel_ns,"
          "response_sent_ns,due_ns\n", f);
    for (size_t i = 0; i < l->log_n; i++) {
        const struct fl_log_row *r = &l->log[i];
        fprintf(f, "%u,%llu,", r->device, (unsigned long long)r->arrival_ns);
        if (r->start_ns)
            fprintf(f, "%llu,%llu,", (unsigned long long)r->start_ns,
                    (unsigned long long)r->end_ns);
        else
            fputs(",,", f);
        fprintf(f, "%s,%s,%u.%02u,", r->res ? r->res->path : "", textout_method(r->method),
                r->code >> 5, r->code & 31);
        for (int k = 0; k < r->tkl; k++)
            fprintf(f, "%02x", r->token[k]);
        textout_opt_u64(f, r->arrival_k_ns);
        textout_opt_u64(f, r->sent_ns);
        textout_opt_u64(f, r->start_ns ? r->due_ns : 0);
        fputc('\n', f);
    }
    return textout_close("wot-fleet", f, name);
}

static int write_devices(const char *dir, const struct fleet *fl) {
    FILE *f = textout_open("wot-fleet", dir, "fleet-devices.csv");
    if (!f)
        return -1;
    static char buf[1 << 16];
    setvbuf(f, buf, _IOFBF, sizeof buf);
    fputs("device,name,requests,responses,overload_503,not_found,malformed,piggybacked,"
          "log_dropped\n", f);
    for (uint32_t i = 0; i < fl->ndev; i++) {
        const struct fl_device *d = &fl->dev[i];
        fprintf(f, "%u,%s,%llu,%llu,%llu,%llu,%llu,%llu,%llu\n", d->index, d->name,
                (unsigned long long)d->c.requests, (unsigned long long)d->c.responses,
                (unsigned long long)d->c.overload_503, (unsigned long long)d->c.not_found,
                (unsigned long long)d->c.malformed, (unsigned long long)d->c.piggybacked,
                (unsigned long long)d->c.log_dropped);
    }
    return textout_close("wot-fleet", f, "fleet-devices.csv");
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* {"p50": .., "p99": .., "max": ..} by nearest rank; nulls without samples */
static void put_pcts(FILE *f, uint64_t *v, size_t n) {
    if (n == 0) {
        fputs("{\"p50\": null, \"p99\": null, \"max\": null}", f);
        return;
    }
    qsort(v, n, sizeof *v, cmp_u64);
    size_t i50 = (n * 50 + 99) / 100, i99 = (n * 99 + 99) / 100;
    fprintf(f, "{\"p50\": %llu, \"p99\": %llu, \"max\": %llu}",
            (unsigned long long)v[i50 ? i50 - 1 : 0], (unsigned long long)v[i99 ? i99 - 1 : 0],
            (unsigned long long)v[n - 1]);
}

static uint64_t rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %llu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib * 1024ULL;
}

/* one loop's entry of "loop": lags from its log rows */
static int put_loop(FILE *f, const struct fl_loop *l) {
    uint64_t *lag = malloc((l->log_n ? l->log_n : 1) * sizeof *lag);
    uint64_t *late = malloc((l->log_n ? l->log_n : 1) * sizeof *late);
    if (!lag || !late) {
        free(lag);
        free(late);
        return -1;
    }
    size_t nlag = 0, nlate = 0;
    for (size_t i = 0; i < l->log_n; i++) {
        const struct fl_log_row *r = &l->log[i];
        if (r->arrival_k_ns && r->arrival_ns >= r->arrival_k_ns)
            lag[nlag++] = r->arrival_ns - r->arrival_k_ns;
        if (r->start_ns && r->res && r->res->mode == MODE_SLEEP && r->res->service_ns)
            late[nlate++] = r->end_ns > r->due_ns ? r->end_ns - r->due_ns : 0;
    }
    /* requests the signal cut short: waiting or in service (not logged), and separate
     * responses sent but not acknowledged yet (logged) */
    uint64_t pending = 0, unacked = 0;
    for (uint32_t i = 0; i < l->ndev; i++)
        pending += (uint64_t)l->dev[i].busy + l->dev[i].queued;
    for (uint32_t j = 0; j < l->jbump; j++)
        unacked += l->jobs[j].state == JS_AWAIT_ACK && l->jobs[j].kind == FL_JOB_REQUEST;
    fprintf(f, "{\"loop\": %d, \"devices\": %u, \"requests\": %llu, \"read_lag_ns\": ", l->id,
            l->ndev, (unsigned long long)l->st.requests);
    put_pcts(f, lag, nlag);
    fputs(", \"timer_late_ns\": ", f);
    put_pcts(f, late, nlate);
    fprintf(f, ", \"busy_ns\": %llu, \"wakeups\": %llu, \"pool_503\": %llu, "
            "\"duplicates\": %llu, \"rtx_sent\": %llu, \"rtx_gave_up\": %llu, \"rst_in\": %llu, "
            "\"send_errors\": %llu, \"log_entries\": %llu, \"log_dropped\": %llu, "
            "\"pending_at_exit\": %llu, \"unacked_at_exit\": %llu, \"cpu_ns\": %llu, "
            "\"spins\": %llu}",
            (unsigned long long)l->st.busy_ns, (unsigned long long)l->st.wakeups,
            (unsigned long long)l->st.pool_503, (unsigned long long)l->st.duplicates,
            (unsigned long long)l->st.rtx_sent, (unsigned long long)l->st.rtx_gave_up,
            (unsigned long long)l->st.rst_in, (unsigned long long)l->st.send_errors,
            (unsigned long long)l->log_n, (unsigned long long)l->log_dropped,
            (unsigned long long)pending, (unsigned long long)unacked,
            (unsigned long long)l->st.cpu_ns, (unsigned long long)l->st.spins);
    free(lag);
    free(late);
    return 0;
}

static int write_summary(const char *dir, const struct fleet *fl, uint64_t rss) {
    struct fl_counters t = {0};
    uint64_t log_n = 0, log_dropped = 0;
    for (uint32_t i = 0; i < fl->ndev; i++) {
        const struct fl_counters *c = &fl->dev[i].c;
        t.requests += c->requests;
        t.responses += c->responses;
        t.overload_503 += c->overload_503;
        t.not_found += c->not_found;
        t.malformed += c->malformed;
    }
    for (int i = 0; i < fl->nloops; i++) {
        log_n += fl->loops[i].log_n;
        log_dropped += fl->loops[i].log_dropped;
    }
    FILE *f = textout_open("wot-fleet", dir, "fleet-summary.json");
    if (!f)
        return -1;
    fputs("{\"name\": ", f);
    textout_json_str(f, fl->name);
    fprintf(f, ", \"devices\": %u, \"loops\": %d, \"workers\": %d, \"requests\": %llu, "
            "\"responses\": %llu, \"overload_503\": %llu, \"not_found\": %llu, "
            "\"malformed\": %llu, \"log_entries\": %llu, \"log_dropped\": %llu, \"loop\": [",
            fl->ndev, fl->nloops, fl->nworkers, (unsigned long long)t.requests,
            (unsigned long long)t.responses, (unsigned long long)t.overload_503,
            (unsigned long long)t.not_found, (unsigned long long)t.malformed,
            (unsigned long long)log_n, (unsigned long long)log_dropped);
    for (int i = 0; i < fl->nloops; i++) {
        if (i)
            fputs(", ", f);
        if (put_loop(f, &fl->loops[i])) {
            fclose(f);
            fprintf(stderr, "wot-fleet: out of memory writing fleet-summary.json\n");
            return -1;
        }
    }
    fputc(']', f);
    fl_obs_json(f, fl);     /* Observe, block-wise, impairments (observe.c, block.c, impair.c) */
    fl_block_json(f, fl);
    fl_imp_json(f, fl);
    fprintf(f, ", \"rss_bytes\": %llu", (unsigned long long)rss);
    if (fl->push)
        fl_push_json(f, fl);       /* the devices' own requests (fleet_push.h) */
    fputs("}\n", f);
    return textout_close("wot-fleet", f, "fleet-summary.json");
}

int fl_write_outputs(const struct fleet *f) {
    uint64_t rss = rss_bytes();  /* before the exit path allocates */
    for (int i = 0; i < f->nloops; i++)
        if (write_log(f->log_dir, &f->loops[i]) || fl_obs_write(f, &f->loops[i]))
            return -1;
    if (fl_imp_write(f) || write_devices(f->log_dir, f) || fl_push_write(f))
        return -1;
    return write_summary(f->log_dir, f, rss);
}
