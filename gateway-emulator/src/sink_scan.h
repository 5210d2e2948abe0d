/* sink_scan.h - finds the update ids in a notification stream (sink_scan.c): the decimal
 * digits right after a marker string (e.g. `urn:e:` before a {{seq}} the update carried). Fed in
 * pieces exactly as bytes arrive (a marker or an id may straddle two reads); a KMP automaton,
 * no allocation after sink_scan_init. */
#ifndef GE_SINK_SCAN_H
#define GE_SINK_SCAN_H

#include <stddef.h>
#include <stdint.h>

#define SINK_MARKER_MAX 64

typedef struct {
    char marker[SINK_MARKER_MAX];
    uint8_t fail[SINK_MARKER_MAX]; /* KMP: longest proper prefix that is also a suffix */
    size_t m;
    size_t k;      /* marker bytes matched */
    int digits;    /* 1: reading the id after a whole marker */
    unsigned nd;   /* its digits so far */
    uint64_t val;
} sink_scan_t;

/* 0 ok, -1 marker empty or longer than SINK_MARKER_MAX - 1 */
int sink_scan_init(sink_scan_t *s, const char *marker);
/* feeds n bytes; calls found(ctx, id) for every id completed (its last digit followed by a
 * non-digit in these bytes); returns how many */
size_t sink_scan_feed(sink_scan_t *s, const uint8_t *d, size_t n,
                      void (*found)(void *ctx, uint64_t id), void *ctx);
/* the message ended (a webhook's body): an id at its very end counts; state reset */
size_t sink_scan_end(sink_scan_t *s, void (*found)(void *ctx, uint64_t id), void *ctx);

#endif
