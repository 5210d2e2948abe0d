/* textout.c - see textout.h. */
#include "textout.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

FILE *textout_open(const char *prog, const char *dir, const char *file) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "%s: cannot write %s: %s\n", prog, path, strerror(errno));
    return f;
}

int textout_close(const char *prog, FILE *f, const char *what) {
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        fprintf(stderr, "%s: error writing %s\n", prog, what);
        return -1;
    }
    return 0;
}

void textout_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

void textout_opt_u64(FILE *f, unsigned long long v) {
    fputc(',', f);
    if (v)
        fprintf(f, "%llu", v);
}

const char *textout_method(unsigned char code) {
    static const char *names[] = {"?", "GET", "POST", "PUT", "DELETE"};
    return code < 5 ? names[code] : "?";
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static double rank_us(const long long *v, size_t n, double p) {
    if (!n)
        return 0;
    size_t k = (size_t)(p * (double)n + 0.999999);
    k = k < 1 ? 1 : k > n ? n : k;
    return (double)v[k - 1] / 1000.0;
}

void textout_lag_us(FILE *f, long long *v, size_t n) {
    if (v)
        qsort(v, n, sizeof *v, cmp_ll);
    else
        n = 0;
    fprintf(f, "{\"sent\": %zu, \"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"p999\": %.3f, "
            "\"max\": %.3f}", n, rank_us(v, n, .5), rank_us(v, n, .9), rank_us(v, n, .99),
            rank_us(v, n, .999), n ? (double)v[n - 1] / 1000.0 : 0.0);
}

static void rel_ns(FILE *f, unsigned long long v, unsigned long long base) {
    fputc(',', f);
    if (v)
        fprintf(f, "%lld", (long long)(v - base));
}

void textout_push_row(FILE *f, const struct textout_push_row *r) {
    fprintf(f, "%llu,%u,%s,%s,%lld", r->index, r->device, r->method, r->path,
            (long long)(r->scheduled_ns - r->base_ns));
    rel_ns(f, r->sent_ns, r->base_ns);
    rel_ns(f, r->received_ns, r->base_ns);
    fputc(',', f);
    if (r->code)
        fprintf(f, "%u.%02u", r->code >> 5, r->code & 31);
    fprintf(f, ",%s,%u", r->outcome, r->retransmissions);
    rel_ns(f, r->received_kernel_ns, r->base_ns);
    fprintf(f, ",%s,%s\n", r->phase, r->op);
}
