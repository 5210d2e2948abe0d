/* sink_scan.c - the notification sink's id scanner (sink_scan.h). An id is 1..19 decimal digits
 * right after the marker; more digits than that are not an id we could have sent. */
#include <string.h>

#include "sink_scan.h"

#define ID_DIGITS_MAX 19

int sink_scan_init(sink_scan_t *s, const char *marker) {
    size_t m = strlen(marker);
    if (m == 0 || m >= SINK_MARKER_MAX)
        return -1;
    memset(s, 0, sizeof *s);
    memcpy(s->marker, marker, m);
    s->m = m;
    for (size_t i = 1, k = 0; i < m; i++) {
        while (k > 0 && marker[i] != marker[k])
            k = s->fail[k - 1];
        if (marker[i] == marker[k])
            k++;
        s->fail[i] = (uint8_t)k;
    }
    return 0;
}

static size_t finish(sink_scan_t *s, void (*found)(void *, uint64_t), void *ctx) {
    size_t got = 0;
    if (s->digits && s->nd > 0 && s->nd <= ID_DIGITS_MAX) {
        found(ctx, s->val);
        got = 1;
    }
    s->digits = 0;
    s->nd = 0;
    s->val = 0;
    return got;
}

size_t sink_scan_feed(sink_scan_t *s, const uint8_t *d, size_t n,
                      void (*found)(void *ctx, uint64_t id), void *ctx) {
    size_t got = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = d[i];
        if (s->digits) {
            if (c >= '0' && c <= '9') {
                if (s->nd <= ID_DIGITS_MAX)
                    s->val = s->val * 10 + (uint64_t)(c - '0');
                s->nd++;
                continue;
            }
            got += finish(s, found, ctx); /* then c may begin the next marker */
        }
        while (s->k > 0 && c != (uint8_t)s->marker[s->k])
            s->k = s->fail[s->k - 1];
        if (c == (uint8_t)s->marker[s->k] && ++s->k == s->m) {
            s->k = 0;
            s->digits = 1;
        }
    }
    return got;
}

size_t sink_scan_end(sink_scan_t *s, void (*found)(void *ctx, uint64_t id), void *ctx) {
    size_t got = finish(s, found, ctx);
    s->k = 0;
    return got;
}
