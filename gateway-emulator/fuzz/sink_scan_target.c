/* sink_scan_target.c - libFuzzer target: the notification sink's id scanner (sink_scan.c) on
 * any bytes, with a marker taken from the input. Each stream is scanned twice: whole, and in
 * pieces whose size comes from the input's first byte (notifications arrive in reads of any
 * size, a marker or an id may straddle two); both must find the same ids in the same order. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/sink_scan.h"

#define MAX_IDS 4096

typedef struct {
    uint64_t id[MAX_IDS];
    size_t n;
} found_t;

static void found(void *ctx, uint64_t id) {
    found_t *f = ctx;
    if (f->n < MAX_IDS)
        f->id[f->n] = id;
    f->n++;
}

static void run(const char *marker, const uint8_t *d, size_t n, size_t piece, found_t *f) {
    sink_scan_t s;
    if (sink_scan_init(&s, marker) < 0)
        abort();
    f->n = 0;
    for (size_t at = 0; at < n; at += piece)
        sink_scan_feed(&s, d + at, n - at < piece ? n - at : piece, found, f);
    sink_scan_end(&s, found, f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3)
        return 0;
    size_t piece = (size_t)(data[0] & 0x1f) + 1, mlen = (size_t)(data[1] & 7) + 1;
    if (size < 2 + mlen)
        return 0;
    char marker[SINK_MARKER_MAX];
    memcpy(marker, data + 2, mlen);
    marker[mlen] = 0;
    if (strlen(marker) == 0)
        return 0; /* a NUL inside: the marker is shorter, or empty (refused by the sink) */
    static found_t a, b;
    const uint8_t *d = data + 2 + mlen;
    size_t n = size - 2 - mlen;
    run(marker, d, n, n ? n : 1, &a);
    run(marker, d, n, piece, &b);
    if (a.n != b.n || memcmp(a.id, b.id, (a.n < MAX_IDS ? a.n : MAX_IDS) * sizeof a.id[0]))
        abort();
    return 0;
}
