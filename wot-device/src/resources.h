/* resources.h - parse the device resource file (contract §1, "Resource file"). */
#ifndef WOT_RESOURCES_H
#define WOT_RESOURCES_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum svc_mode { MODE_SLEEP = 0, MODE_BUSY = 1 };

#define RES_MAX_PAYLOAD 1048576   /* above 1024 bytes block-wise (RFC 7959, block.c) */
#define RES_MAX_NOTIFY_PAYLOAD 1024 /* notifications stay one datagram */
#define RES_MAX_SERVICE_US 3600000000ULL

/* notification interval distributions of an observable resource (observe.c) */
enum notify_dist { NOTIFY_NONE = 0, NOTIFY_DET, NOTIFY_UNIFORM, NOTIFY_EXP, NOTIFY_NORMAL };

struct resource {
    char *path;                   /* without leading slash */
    uint64_t service_ns;
    enum svc_mode mode;
    uint32_t payload_bytes;
    /* Observe (RFC 7641), optional columns; notify_dist == NOTIFY_NONE: not observable */
    enum notify_dist notify_dist;
    uint64_t notify_mean_ns, notify_jitter_ns, notify_service_ns;
    int notify_con;               /* 1 CON notifications, 0 NON */
    uint32_t max_age_s;
    /* the optional `body` column: payload_bytes bytes of a file mapped read-only once per
     * process (a Thing's own TD at /.well-known/wot, docs/WOT.md); NULL: filler bytes 'x' */
    const char *body;
};

struct resource_set {
    struct resource *v;
    size_t n;
};

/* Parses FILE; on error prints "FILE:LINE: what, expected what" to stderr and returns -1. */
int resources_load(const char *file, struct resource_set *out);
/* the reader itself on an open stream; `file` names it in messages (tests, fuzz targets) */
int resources_read(FILE *fp, const char *file, struct resource_set *out);
void resources_free(struct resource_set *rs);

/* Shared by the CSV readers (this file and fleet/devices_file.c). */
/* prints "FILE:LINE: what, expected what" to stderr; returns -1 */
int csv_fail(const char *file, long line, const char *what, const char *expected);
/* a decimal integer 0..max, nothing else; 0 ok, -1 bad */
int csv_parse_uint(const char *s, unsigned long long max, unsigned long long *out);
/* the next line of fp that is neither blank nor a '#' comment, without its line end, in *line
   (getline's buffer); *ln counts every line read. Returns 1 with a line, 0 at the end, -1 after
   csv_fail for a NUL byte in the line. */
#include <stdio.h>
int csv_next_line(FILE *fp, const char *file, char **line, size_t *cap, long *ln);
/* splits line at commas in place into f[0..max); returns the number of fields (may be > max) */
int csv_split(char *line, char **f, int max);

#endif
