/* push_out.c - the engine's push files (docs/CONTRACTS.md §3b "Push"): push-setup.csv once
 * every device's setup has ended (the harness's signal), fleet-push.csv at exit (one row per
 * schedule row: wot-device's push-requests.csv columns, `device` = the device's index, times
 * relative to the test start) and fleet-summary.json's "push". Not on a loop's path: the
 * setup file is written by the main thread from rows the loops no longer change (a setup
 * row that has an outcome is final), the rest after the loops have stopped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "push_int.h"
#include "../textout.h"


static const char *const OUTCOME[] = {"error", "ok", "error", "timeout", "reset", "unsent"};
static const char *const PHASE[] = {"setup", "test", "teardown"};
static const char *const METHOD[] = {"?", "GET", "POST", "PUT", "DELETE"};

void flp_row_path(const struct fl_push_loop *pl, const struct flp_dev *pd,
                  const struct flp_row *r, char *out, size_t cap) {
    const struct fl_push *P = pl->P;
    if (!(r->flags & FLF_LOCATION)) {
        flp_uri_of(P->dg + r->dg_off, r->dg_len, out, cap);
    } else {
        struct flp_template t;
        flp_template_get(P->dg + r->dg_off, &t);
        if (pd->have_location)
            flp_join_location((const char *)pl->loc + pd->loc_off, pd->loc_len, t.suffix, out, cap);
        else
            snprintf(out, cap, FLP_LOCATION "%s", t.suffix);
    }
    for (char *c = out; *c; c++)
        if (*c == ',' || *c == '\n' || *c == '"')
            *c = '_';                  /* a server's location must not break the CSV */
}

static void put_row(FILE *f, const struct fl_push_loop *pl, const struct flp_dev *pd,
                    uint32_t i, uint64_t base) {
    const struct flp_row *r = &pl->P->rows[pd->first + i];
    char path[2 * FLP_LOC_MAX];
    flp_row_path(pl, pd, r, path, sizeof path);
    uint64_t sched = r->phase == FLP_TEST ? base + r->at_ns : r->due_ns;
    if (r->phase == FLP_TEST && !pl->P->start_ns)
        sched = r->due_ns;             /* never started: when it became unsent */
    textout_push_row(f, &(struct textout_push_row){
        .index = i, .device = pd->d->index, .method = METHOD[r->method], .path = path,
        .scheduled_ns = sched, .sent_ns = r->sent_ns, .received_ns = r->recv_ns,
        .received_kernel_ns = r->recv_k_ns, .base_ns = base, .code = r->code,
        .outcome = OUTCOME[r->outcome], .retransmissions = r->retx,
        .phase = PHASE[r->phase], .op = pl->P->ops[r->op]});
}

/* every device's rows of `phases` (a bit per phase), written whole (rename) */
static int write_rows(const struct fleet *f, const char *name, unsigned phases, uint64_t base) {
    FILE *out = textout_open("wot-fleet", f->log_dir, name);
    if (!out)
        return -1;
    static char buf[1 << 16];
    setvbuf(out, buf, _IOFBF, sizeof buf);
    fputs(TEXTOUT_PUSH_COLUMNS, out);
    for (int l = 0; l < f->nloops; l++) {
        const struct fl_push_loop *pl = f->loops[l].push;
        for (uint32_t k = 0; k < pl->ndevs; k++) {
            const struct flp_dev *pd = &pl->devs[k];
            for (uint32_t i = 0; i < pd->n; i++)
                if (phases & (1u << pl->P->rows[pd->first + i].phase))
                    put_row(out, pl, pd, i, base);
        }
    }
    return textout_close("wot-fleet", out, name);
}

int flp_write_setup(const struct fleet *f) {
    return write_rows(f, "push-setup.csv", 1u << FLP_SETUP, f->push->setup_begin_ns);
}

/* what is still open when the engine stops ends by wot-device's rule */
static void finalize(const struct fleet *f, uint64_t now) {
    const struct fl_push *P = f->push;
    for (size_t i = 0; i < P->nrows; i++) {
        struct flp_row *r = &P->rows[i];
        if (r->outcome)
            continue;
        if (r->sent_ns)
            r->outcome = now >= r->sent_ns + P->timeout_ns ? FLO_TIMEOUT : FLO_ERROR;
        else {
            r->outcome = FLO_UNSENT;
            if (!r->due_ns)
                r->due_ns = now;
        }
    }
}

int fl_push_write(const struct fleet *f) {
    if (!f->push)
        return 0;
    finalize(f, (uint64_t)mono_ns());
    return write_rows(f, "fleet-push.csv", 7u, flp_base_ns(f->push));
}

void fl_push_json(FILE *out, const struct fleet *f) {
    const struct fl_push *P = f->push;
    if (!P) {
        fputs(", \"push\": null", out);
        return;
    }
    uint64_t c[6] = {0}, ph[3] = {0}, late = 0, errs = 0, rtx = 0, overflow = 0;
    long long *lag = malloc((P->nrows ? P->nrows : 1) * sizeof *lag);
    size_t nl = 0;
    for (size_t i = 0; i < P->nrows; i++) {
        const struct flp_row *r = &P->rows[i];
        c[r->outcome]++;
        ph[r->phase]++;
        if (lag && r->phase == FLP_TEST && r->sent_ns)
            lag[nl++] = (long long)(r->sent_ns - r->due_ns);
    }
    for (int l = 0; l < f->nloops; l++) {
        const struct fl_push_loop *pl = f->loops[l].push;
        late += pl->late_acks;
        errs += pl->send_errors;
        rtx += pl->retransmissions;
        overflow += pl->loc_overflow;
    }
    fprintf(out, ", \"push\": {\"devices\": %u, \"requests\": %zu, \"outcomes\": {\"ok\": %llu, "
            "\"error\": %llu, \"timeout\": %llu, \"reset\": %llu, \"unsent\": %llu}, "
            "\"setup\": %llu, \"test\": %llu, \"teardown\": %llu, \"started\": %s, "
            "\"start_mono_ns\": %llu, \"timeout_ms\": %llu, \"retransmissions\": %llu, "
            "\"late_answers_acked\": %llu, \"send_errors\": %llu, \"location_too_long\": %llu, "
            "\"send_lag_us\": ",
            P->ndevs, P->nrows, (unsigned long long)c[FLO_OK],
            (unsigned long long)(c[FLO_ERROR] + c[FLO_NONE]), (unsigned long long)c[FLO_TIMEOUT],
            (unsigned long long)c[FLO_RESET], (unsigned long long)c[FLO_UNSENT],
            (unsigned long long)ph[0], (unsigned long long)ph[1], (unsigned long long)ph[2],
            P->start_ns ? "true" : "false", (unsigned long long)flp_base_ns(P),
            (unsigned long long)(P->timeout_ns / 1000000ULL), (unsigned long long)rtx,
            (unsigned long long)late, (unsigned long long)errs, (unsigned long long)overflow);
    textout_lag_us(out, lag, nl);
    fputc('}', out);
    free(lag);
}
