/* textout.h - writing the result files at exit (wot-device's devlog.c, wot-fleet's output.c):
 * open DIR/FILE, close with the write errors checked, a JSON string. Messages start "PROG: ". */
#ifndef WOT_TEXTOUT_H
#define WOT_TEXTOUT_H
#include <stddef.h>
#include <stdio.h>

/* fopen(DIR/FILE, "w"); NULL with a message on stderr */
FILE *textout_open(const char *prog, const char *dir, const char *file);
/* fclose with ferror checked; 0 ok, -1 with a message naming `what` */
int textout_close(const char *prog, FILE *f, const char *what);
/* s as a JSON string (quotes, backslashes and control characters escaped) */
void textout_json_str(FILE *f, const char *s);

/* ",N", or "," alone for 0 (an empty CSV field: unknown) */
void textout_opt_u64(FILE *f, unsigned long long v);
/* {"sent": n, "p50", "p90", "p99", "p999", "max"} of send lags in ns, as µs (nearest rank);
 * sorts v in place (the push summaries of wot-device and wot-fleet) */
void textout_lag_us(FILE *f, long long *v, size_t n);
/* One row of push-requests.csv (wot-device) / fleet-push.csv (wot-fleet), CONTRACTS §3 "Push":
 * times absolute CLOCK_MONOTONIC ns (0 = empty), written relative to `base`. */
#define TEXTOUT_PUSH_COLUMNS "index,device,method,path,scheduled_ns,sent_ns,received_ns,code," \
                             "outcome,retransmissions,received_kernel_ns,phase,op\n"
struct textout_push_row {
    unsigned long long index;
    unsigned device;
    const char *method, *path, *outcome, *phase, *op;
    unsigned long long scheduled_ns, sent_ns, received_ns, received_kernel_ns, base_ns;
    unsigned code, retransmissions;   /* code: the CoAP code byte, 0 = none */
};
void textout_push_row(FILE *f, const struct textout_push_row *r);
/* the CoAP request method name of a code 0.01..0.04, "?" otherwise */
const char *textout_method(unsigned char code);

#endif
