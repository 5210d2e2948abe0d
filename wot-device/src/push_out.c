/* push_out.c - the push files: DIR/push-setup.csv once the setup has ended (the harness's
 * signal), DIR/push-requests.csv at exit (one row per schedule row, the GE's requests.csv
 * columns plus phase and op), and the "push" member of device-summary.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "push.h"
#include "textout.h"
#include "push_int.h"

uint64_t push_base_ns(void);     /* push_run.c */
int push_rx_kernel(void);
uint64_t push_late_acks(void);
int push_started(void);
void push_finalize(void);


static const char *const OUTCOME[] = {"error", "ok", "error", "timeout", "reset", "unsent"};
static const char *const PHASE[] = {"setup", "test", "teardown"};
static const char *const METHOD[] = {"?", "GET", "POST", "PUT", "DELETE"};

static void row(FILE *f, size_t i, uint64_t base) {
    const struct push_row *r = &P.rows[i];
    char path[600];
    push_row_path(r, path, sizeof path);
    for (char *c = path; *c; c++)
        if (*c == ',' || *c == '\n' || *c == '"')
            *c = '_';                    /* a server's location must not break the CSV */
    textout_push_row(f, &(struct textout_push_row){
        .index = i, .device = P.id, .method = METHOD[r->method], .path = path,
        .scheduled_ns = r->phase == PH_TEST ? base + r->at_ns : r->due_ns,
        .sent_ns = r->sent_ns, .received_ns = r->recv_ns, .received_kernel_ns = r->recv_k_ns,
        .base_ns = base, .code = r->code, .outcome = OUTCOME[r->outcome], .retransmissions = r->retx,
        .phase = PHASE[r->phase], .op = P.ops[r->op]});
}

static int write_rows(const char *dir, const char *name, size_t n, uint64_t base) {
    char path[4200], tmp[4210];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "wot-device: cannot write %s\n", tmp);
        return -1;
    }
    static char buf[1 << 16];
    setvbuf(f, buf, _IOFBF, sizeof buf);
    fputs(TEXTOUT_PUSH_COLUMNS, f);
    for (size_t i = 0; i < n; i++)
        row(f, i, base);
    int bad = ferror(f);
    if (fclose(f) || bad || rename(tmp, path)) {   /* whole or not at all */
        fprintf(stderr, "wot-device: error writing %s\n", path);
        return -1;
    }
    return 0;
}

int push_write_setup(const char *dir, uint64_t base) {
    return write_rows(dir, "push-setup.csv", P.n_setup, base);
}

int push_write(const char *dir) {
    if (!push_enabled())
        return 0;
    push_finalize();   /* whatever is still open ends by the GE's rule */
    return write_rows(dir, "push-requests.csv", P.n, push_base_ns());
}

void push_json(FILE *f) {
    if (!push_enabled()) {
        fputs(", \"push\": null", f);
        return;
    }
    uint64_t c[6] = {0}, ph[3] = {0};
    long long *lag = malloc((P.n_test ? P.n_test : 1) * sizeof *lag);
    size_t nl = 0;
    for (size_t i = 0; i < P.n; i++) {
        const struct push_row *r = &P.rows[i];
        c[r->outcome]++;
        ph[r->phase]++;
        if (lag && r->phase == PH_TEST && r->sent_ns)
            lag[nl++] = (long long)(r->sent_ns - r->due_ns);
    }
    fprintf(f, ", \"push\": {\"id\": %u, \"requests\": %zu, \"outcomes\": {\"ok\": %llu, "
            "\"error\": %llu, \"timeout\": %llu, \"reset\": %llu, \"unsent\": %llu}, "
            "\"setup\": %llu, \"test\": %llu, \"teardown\": %llu, \"started\": %s, "
            "\"start_mono_ns\": %llu, \"timeout_ms\": %llu, \"rx_stamps\": \"%s\", "
            "\"late_answers_acked\": %llu, \"location\": ",
            P.id, P.n, (unsigned long long)(c[OUT_OK]),
            (unsigned long long)(c[OUT_ERROR] + c[OUT_NONE]), (unsigned long long)c[OUT_TIMEOUT],
            (unsigned long long)c[OUT_RESET], (unsigned long long)c[OUT_UNSENT],
            (unsigned long long)ph[0], (unsigned long long)ph[1], (unsigned long long)ph[2],
            push_started() ? "true" : "false", (unsigned long long)push_base_ns(),
            (unsigned long long)(P.timeout_ns / 1000000ULL), push_rx_kernel() ? "kernel" : "user",
            (unsigned long long)push_late_acks());
    if (P.have_location) {
        fputc('"', f);
        for (const char *s = P.location; *s; s++)
            if (*s == '"' || *s == '\\')
                fprintf(f, "\\%c", *s);
            else if ((unsigned char)*s >= 0x20)
                fputc(*s, f);
        fputc('"', f);
    } else {
        fputs("null", f);
    }
    fputs(", \"send_lag_us\": ", f);
    textout_lag_us(f, lag, nl);
    fputc('}', f);
    free(lag);
}
