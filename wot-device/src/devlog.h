/* devlog.h - the device log (contract §3): one entry per request, preallocated, bounded. */
#ifndef WOT_DEVLOG_H
#define WOT_DEVLOG_H
#include <stddef.h>
#include <stdint.h>
#include "resources.h"

#define LOG_RES_UNKNOWN (-1)      /* request for an unknown path (4.04) */

struct log_entry {
    uint64_t arrival_ns, start_ns, end_ns; /* start/end 0 = not served (5.03, 4.04) */
    uint64_t arrival_k_ns;                 /* kernel receive stamp of the request, 0 = none */
    uint64_t sent_ns;                      /* response handed to sendmsg, 0 = not seen */
    int32_t res;                           /* index into the resource set, or LOG_RES_UNKNOWN */
    uint8_t method;                        /* coap_request_t value (1 GET .. 4 DELETE) */
    uint8_t code;                          /* CoAP code byte, class << 5 | detail */
    uint8_t tkl;                           /* request token length (0..8 kept) */
    uint8_t token[8];                      /* the request's token: joins the GE's row exactly */
};

/* copies a request's token (at most 8 bytes) into an entry */
void devlog_token(struct log_entry *e, const uint8_t *token, size_t len);

struct counters {
    uint64_t requests, responses, overload_503, not_found, malformed;
    uint64_t piggybacked;  /* served by the I/O thread, answered in the ACK (or NON) */
};

struct devlog {
    struct log_entry *e;
    size_t cap, n;
    uint64_t dropped;
};

/* Reserves capacity entries with mmap(MAP_NORESERVE): untouched pages cost no RSS. */
int devlog_init(struct devlog *l, size_t capacity);
/* Appends one entry (I/O thread only) and returns where it is stored; NULL (a drop is counted)
 * when full. */
struct log_entry *devlog_add(struct devlog *l, const struct log_entry *e);
/* Writes DIR/device-log.csv and DIR/device-summary.json; returns 0 or -1 (message printed). */
int devlog_write(const struct devlog *l, const struct resource_set *rs, const struct counters *c,
                 const char *dir, const char *name, int threads, const char *response);
void devlog_free(struct devlog *l);

#endif
