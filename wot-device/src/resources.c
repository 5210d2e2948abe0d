/* resources.c - parse the resource file:
 *   path,service_time_us,mode,payload_bytes[,OBSERVE COLUMNS][,body]     (header required)
 * Blank lines and lines starting with '#' are ignored; CRLF accepted. The optional last
 * column `body` is the response body itself, percent-encoded ('%' ',' CR LF and NUL as %XX;
 * empty: payload_bytes filler bytes 'x'): a Thing's own TD at /.well-known/wot (docs/WOT.md).
 * It is decoded once here, so serving it allocates nothing. */
#include "resources.h"

#include "pct_body.h" /* common/pct_body.h */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEADER "path,service_time_us,mode,payload_bytes"
/* with Observe columns (RFC 7641 notifications, see README "Observe") */
#define OBS_COLS "notify_dist,notify_mean_us,notify_jitter_us,notify_service_us,notify_type,max_age_s"
#define HEADER_OBS HEADER "," OBS_COLS
#define BODY_COL ",body"
#define OBS_FIELDS 10
#define MAX_FIELDS 11

int csv_fail(const char *file, long line, const char *what, const char *expected) {
    fprintf(stderr, "%s:%ld: %s, expected %s\n", file, line, what, expected);
    return -1;
}

int csv_next_line(FILE *fp, const char *file, char **line, size_t *cap, long *ln) {
    ssize_t len;
    while ((len = getline(line, cap, fp)) >= 0) {
        ++*ln;
        if ((size_t)len != strlen(*line))
            return csv_fail(file, *ln, "NUL byte in line", "text");
        while (len > 0 && ((*line)[len - 1] == '\n' || (*line)[len - 1] == '\r'))
            (*line)[--len] = '\0';
        if (len > 0 && (*line)[0] != '#')
            return 1;
    }
    return 0;
}

/* Parses a decimal integer field; returns 0 on success. */
int csv_parse_uint(const char *s, unsigned long long max, unsigned long long *out) {
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end != '\0' || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Checks a resource path; returns NULL if fine, else a description of the problem. */
int csv_split(char *line, char **f, int max) {
    int nf = 0;
    for (char *s = line;;) {
        char *comma = strchr(s, ',');
        if (nf < max)
            f[nf] = s;
        nf++;
        if (!comma)
            return nf;
        *comma = '\0';
        s = comma + 1;
    }
}

static const char *bad_path(const char *p) {
    if (*p == '\0')
        return "empty path";
    if (*p == '/')
        return "path starts with '/'";
    if (p[strlen(p) - 1] == '/')
        return "path ends with '/'";
    if (strstr(p, "//"))
        return "empty path segment";
    if (strcmp(p, ".well-known/core") == 0)
        return "path '.well-known/core' is reserved";
    for (const unsigned char *c = (const unsigned char *)p; *c; c++) {
        if (*c <= ' ' || *c >= 0x7f || *c == '?' || *c == '#' || *c == '"')
            return "invalid character in path";
    }
    return NULL;
}

static int add(struct resource_set *rs, size_t *cap, struct resource r) {
    if (rs->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        struct resource *nv = realloc(rs->v, nc * sizeof(*nv));
        if (!nv)
            return -1;
        rs->v = nv;
        *cap = nc;
    }
    rs->v[rs->n++] = r;
    return 0;
}

/* the six Observe columns of one line (f[4..9]) */
static int parse_observe(const char *file, long ln, char **f, struct resource *r) {
    static const char *dists[] = {"none", "deterministic", "uniform", "exponential", "normal"};
    r->notify_dist = NOTIFY_NONE;
    int d = -1;
    for (int i = 0; i < 5; i++)
        if (strcmp(f[4], dists[i]) == 0)
            d = i;
    if (d < 0)
        return csv_fail(file, ln, "bad notify_dist",
                    "none, deterministic, uniform, exponential or normal");
    unsigned long long mean, jit, svc, age;
    if (csv_parse_uint(f[5], RES_MAX_SERVICE_US, &mean) || (d != 0 && mean == 0))
        return csv_fail(file, ln, "bad notify_mean_us", "an integer 1..3600000000 (0 only with notify_dist none)");
    if (csv_parse_uint(f[6], RES_MAX_SERVICE_US, &jit))
        return csv_fail(file, ln, "bad notify_jitter_us", "an integer 0..3600000000");
    if ((d == NOTIFY_DET || d == NOTIFY_EXP) && jit != 0)
        return csv_fail(file, ln, "notify_jitter_us with a deterministic or exponential notify_dist",
                    "0 (jitter is the uniform half-width or the normal standard deviation)");
    if (d == NOTIFY_UNIFORM && jit > mean)
        return csv_fail(file, ln, "notify_jitter_us above notify_mean_us",
                    "a uniform half-width <= the mean (intervals must stay >= 0)");
    if (csv_parse_uint(f[7], RES_MAX_SERVICE_US, &svc))
        return csv_fail(file, ln, "bad notify_service_us", "an integer 0..3600000000");
    if (strcmp(f[8], "con") != 0 && strcmp(f[8], "non") != 0)
        return csv_fail(file, ln, "bad notify_type", "con or non");
    if (csv_parse_uint(f[9], 0xFFFFFFFFULL, &age))
        return csv_fail(file, ln, "bad max_age_s", "an integer 0..4294967295");
    r->notify_dist = (enum notify_dist)d;
    r->notify_mean_ns = mean * 1000ULL;
    r->notify_jitter_ns = jit * 1000ULL;
    r->notify_service_ns = svc * 1000ULL;
    r->notify_con = strcmp(f[8], "con") == 0;
    r->max_age_s = (uint32_t)age;
    return 0;
}

/* The `body` column: percent-decoded (common/pct_body.h) into a copy of exactly
 * r->payload_bytes bytes. */
static int parse_body(const char *file, long ln, const char *v, struct resource *r) {
    if (*v == '\0')
        return 0;
    if (r->notify_dist != NOTIFY_NONE)
        return csv_fail(file, ln, "a body on an observable resource",
                        "an empty body (notifications carry filler bytes)");
    char *b = malloc(r->payload_bytes ? r->payload_bytes : 1);
    if (!b)
        return csv_fail(file, ln, "out of memory", "a smaller body");
    long n = pct_decode(v, b, r->payload_bytes);
    if (n < 0) {
        free(b);
        return csv_fail(file, ln, "bad %-escape in body", "%XX with two hex digits");
    }
    if ((unsigned long)n != r->payload_bytes) {
        free(b);
        char what[96];
        snprintf(what, sizeof what, "body of %ld bytes with payload_bytes %u", n,
                 r->payload_bytes);
        return csv_fail(file, ln, what, "a body of exactly payload_bytes bytes (decoded)");
    }
    r->body = b;
    return 0;
}

static int parse_line(const char *file, long ln, char *line, struct resource_set *rs, size_t *cap,
                      int want) {
    char *f[MAX_FIELDS];
    int nf = csv_split(line, f, MAX_FIELDS);
    int obs = want >= OBS_FIELDS, body = want == 5 || want == MAX_FIELDS;
    if (nf != want) {
        char what[64];
        snprintf(what, sizeof what, "%d fields", nf);
        return csv_fail(file, ln, what, !obs ? (body ? "5 fields " HEADER BODY_COL
                                                     : "4 fields " HEADER)
                                             : (body ? "11 fields " HEADER_OBS BODY_COL
                                                     : "10 fields " HEADER_OBS));
    }
    const char *why = bad_path(f[0]);
    if (why)
        return csv_fail(file, ln, why, "a path without leading '/' made of printable characters, e.g. r0 or a/b");
    for (size_t i = 0; i < rs->n; i++)
        if (strcmp(rs->v[i].path, f[0]) == 0)
            return csv_fail(file, ln, "duplicate path", "each path once");
    unsigned long long st, pb;
    if (csv_parse_uint(f[1], RES_MAX_SERVICE_US, &st))
        return csv_fail(file, ln, "bad service_time_us", "an integer 0..3600000000");
    struct resource r = {.service_ns = st * 1000ULL, .payload_bytes = 0};
    if (strcmp(f[2], "sleep") == 0)
        r.mode = MODE_SLEEP;
    else if (strcmp(f[2], "busy") == 0)
        r.mode = MODE_BUSY;
    else
        return csv_fail(file, ln, "bad mode", "sleep or busy");
    if (csv_parse_uint(f[3], RES_MAX_PAYLOAD, &pb))
        return csv_fail(file, ln, "bad payload_bytes", "an integer 0..1048576");
    r.payload_bytes = (uint32_t)pb;
    if (obs && parse_observe(file, ln, f, &r))
        return -1;
    if (r.notify_dist != NOTIFY_NONE && r.payload_bytes > RES_MAX_NOTIFY_PAYLOAD)
        return csv_fail(file, ln, "payload_bytes above 1024 on an observable resource",
                    "at most 1024 (notifications are not sent block-wise)");
    if (body && parse_body(file, ln, f[want - 1], &r))
        return -1;
    r.path = strdup(f[0]);
    if (!r.path || add(rs, cap, r)) {
        free(r.path);
        free((char *)r.body);
        return csv_fail(file, ln, "out of memory", "a smaller file");
    }
    return 0;
}

int resources_load(const char *file, struct resource_set *out) {
    out->v = NULL;
    out->n = 0;
    FILE *fp = fopen(file, "r");
    if (!fp) {
        fprintf(stderr, "%s:0: cannot open: %s, expected a readable resource file\n", file,
                strerror(errno));
        return -1;
    }
    int rc = resources_read(fp, file, out);
    fclose(fp);
    return rc;
}

int resources_read(FILE *fp, const char *file, struct resource_set *out) {
    out->v = NULL;
    out->n = 0;
    char *line = NULL;
    size_t lcap = 0, cap = 0;
    long ln = 0;
    int seen_header = 0, rc = 0, want = 4;
    int got;
    while ((got = csv_next_line(fp, file, &line, &lcap, &ln)) != 0) {
        if (got < 0) {
            rc = -1;
            break;
        }
        if (!seen_header) {
            if (strcmp(line, HEADER_OBS) == 0)
                want = OBS_FIELDS;
            else if (strcmp(line, HEADER_OBS BODY_COL) == 0)
                want = MAX_FIELDS;
            else if (strcmp(line, HEADER BODY_COL) == 0)
                want = 5;
            else if (strcmp(line, HEADER) != 0) {
                rc = csv_fail(file, ln, "missing or wrong header",
                              "'" HEADER "' or '" HEADER_OBS "', either with ',body' at the end");
                break;
            }
            seen_header = 1;
            continue;
        }
        if ((rc = parse_line(file, ln, line, out, &cap, want)))
            break;
    }
    if (rc == 0 && !seen_header)
        rc = csv_fail(file, ln, "empty file", "the header '" HEADER "'");
    else if (rc == 0 && out->n == 0)
        rc = csv_fail(file, ln, "no resources", "at least one resource line");
    free(line);
    if (rc)
        resources_free(out);
    return rc;
}

void resources_free(struct resource_set *rs) {
    for (size_t i = 0; i < rs->n; i++) {
        free(rs->v[i].path);
        free((char *)rs->v[i].body);
    }
    free(rs->v);
    rs->v = NULL;
    rs->n = 0;
}
