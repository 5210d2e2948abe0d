/* resources.c - parse the resource file:
 *   path,service_time_us,mode,payload_bytes     (header required)
 * Blank lines and lines starting with '#' are ignored; CRLF accepted. */
#include "resources.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEADER "path,service_time_us,mode,payload_bytes"

static int fail(const char *file, long line, const char *what, const char *expected) {
    fprintf(stderr, "%s:%ld: %s, expected %s\n", file, line, what, expected);
    return -1;
}

/* Parses a decimal integer field; returns 0 on success. */
static int parse_uint(const char *s, unsigned long long max, unsigned long long *out) {
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

static int parse_line(const char *file, long ln, char *line, struct resource_set *rs, size_t *cap) {
    char *f[5];
    int nf = 0;
    char *s = line;
    for (;;) {
        char *comma = strchr(s, ',');
        if (nf < 5)
            f[nf] = s;
        nf++;
        if (!comma)
            break;
        *comma = '\0';
        s = comma + 1;
    }
    if (nf != 4) {
        char what[64];
        snprintf(what, sizeof what, "%d fields", nf);
        return fail(file, ln, what, "4 fields path,service_time_us,mode,payload_bytes");
    }
    const char *why = bad_path(f[0]);
    if (why)
        return fail(file, ln, why, "a path without leading '/' made of printable characters, e.g. r0 or a/b");
    for (size_t i = 0; i < rs->n; i++)
        if (strcmp(rs->v[i].path, f[0]) == 0)
            return fail(file, ln, "duplicate path", "each path once");
    unsigned long long st, pb;
    if (parse_uint(f[1], RES_MAX_SERVICE_US, &st))
        return fail(file, ln, "bad service_time_us", "an integer 0..3600000000");
    struct resource r = {.service_ns = st * 1000ULL, .payload_bytes = 0};
    if (strcmp(f[2], "sleep") == 0)
        r.mode = MODE_SLEEP;
    else if (strcmp(f[2], "busy") == 0)
        r.mode = MODE_BUSY;
    else
        return fail(file, ln, "bad mode", "sleep or busy");
    if (parse_uint(f[3], RES_MAX_PAYLOAD, &pb))
        return fail(file, ln, "bad payload_bytes", "an integer 0..1024");
    r.payload_bytes = (uint32_t)pb;
    r.path = strdup(f[0]);
    if (!r.path || add(rs, cap, r)) {
        free(r.path);
        return fail(file, ln, "out of memory", "a smaller file");
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
    char *line = NULL;
    size_t lcap = 0, cap = 0;
    long ln = 0;
    int seen_header = 0, rc = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, fp)) >= 0) {
        ln++;
        if ((size_t)len != strlen(line)) {
            rc = fail(file, ln, "NUL byte in line", "text");
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0 || line[0] == '#')
            continue;
        if (!seen_header) {
            if (strcmp(line, HEADER) != 0) {
                rc = fail(file, ln, "missing or wrong header", "'" HEADER "'");
                break;
            }
            seen_header = 1;
            continue;
        }
        if ((rc = parse_line(file, ln, line, out, &cap)))
            break;
    }
    if (rc == 0 && !seen_header)
        rc = fail(file, ln, "empty file", "the header '" HEADER "'");
    else if (rc == 0 && out->n == 0)
        rc = fail(file, ln, "no resources", "at least one resource line");
    free(line);
    fclose(fp);
    if (rc)
        resources_free(out);
    return rc;
}

void resources_free(struct resource_set *rs) {
    for (size_t i = 0; i < rs->n; i++)
        free(rs->v[i].path);
    free(rs->v);
    rs->v = NULL;
    rs->n = 0;
}
