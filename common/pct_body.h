/* pct_body.h - the percent-encoded body field of WoTbench's CSV inputs (docs/CONTRACTS.md §1):
 * a resource file's `body` column (wot-device/src/resources.c: what a resource answers) and a
 * trace's `body` column (gateway-emulator/src/trace.c: what a request carries). Every byte that
 * is not printable ASCII, '%' or ',' is written %XX (wotbench.workload.formats.encode_body), so
 * the field holds no comma and the CSV stays one split per comma. Decoded once when the file is
 * read, never on a hot path. Header-only: each program includes it via -I../common. */
#ifndef WB_COMMON_PCT_BODY_H
#define WB_COMMON_PCT_BODY_H

#include <stddef.h>

static inline int pct_hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
         : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decodes the NUL-terminated field v: its first `cap` decoded bytes into out (out may be NULL
 * to measure). Returns the decoded length (which may exceed cap: the caller compares it with
 * the size it expects), or -1 on a '%' not followed by two hex digits. */
static inline long pct_decode(const char *v, char *out, size_t cap) {
    size_t n = 0;
    for (const char *c = v; *c; c++, n++) {
        int hi = 0, lo = 0;
        if (*c == '%' && ((hi = pct_hexval(c[1])) < 0 || (lo = pct_hexval(c[2])) < 0))
            return -1;
        if (out && n < cap)
            out[n] = *c == '%' ? (char)(hi << 4 | lo) : *c;
        if (*c == '%')
            c += 2;
    }
    return (long)n;
}

#endif
