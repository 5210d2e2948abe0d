/* conn_file.c - the connections file of wot-fleet (CONTRACTS §3c):
 *   index,name,protocol,server,source,path,reply_path,heartbeat_ms,event_ms,service_us,reply_bytes,reconnect_ms,attach_headers,attach_body[,delimiter]
 * protocol: websocket, chunked (a GET subscription + POSTs) or chunked-post (one POST held open
 * both ways; reply_path empty, as for websocket).
 * One row per connected device; blank and '#' lines skipped. attach_headers and attach_body are
 * percent-encoded (a row stays one line without commas): the attach request's header lines
 * ("Name: value" joined by CRLF) and the device's first message once attached, both rendered
 * per device by the runner. The optional last column (present when the header names it),
 * delimiter, percent-encoded too: empty = one HTTP chunk is one message (a server that sends one
 * message per chunk, nchan), else 1..8 bytes that end every message of a chunked or chunked-post
 * device in both directions, wherever chunks are cut (msg_frame.h). Bad input: exit 2 with
 * "FILE:LINE: what, expected what". */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../resources.h"
#include "conn.h"

#define HEADER "index,name,protocol,server,source,path,reply_path,heartbeat_ms,event_ms," \
               "service_us,reply_bytes,reconnect_ms,attach_headers,attach_body"
#define NFIELDS 14
#define HEADER_FRAMED HEADER ",delimiter"
#define MAX_MS 86400000ULL        /* one day */

static int parse_addr(const char *s, struct sockaddr_in *a, int with_port) {
    char host[INET_ADDRSTRLEN];
    const char *c = with_port ? strrchr(s, ':') : s + strlen(s);
    if (!c || c == s || (size_t)(c - s) >= sizeof host)
        return -1;
    memcpy(host, s, (size_t)(c - s));
    host[c - s] = '\0';
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
        return -1;
    if (with_port) {
        unsigned long long port;
        if (csv_parse_uint(c + 1, 65535, &port) || port == 0)
            return -1;
        a->sin_port = htons((uint16_t)port);
    }
    return 0;
}

static int parse_u32(const char *file, long ln, const char *col, const char *s,
                     unsigned long long min, unsigned long long max, uint32_t *out) {
    unsigned long long v;
    if (csv_parse_uint(s, max, &v) || v < min) {
        char what[160], exp[96];
        snprintf(what, sizeof what, "bad %s '%.40s'", col, s);
        snprintf(exp, sizeof exp, "an integer %llu..%llu", min, max);
        return csv_fail(file, ln, what, exp);
    }
    *out = (uint32_t)v;
    return 0;
}

/* a request target: starts with '/', no blanks, commas or control characters */
static int bad_path(const char *p) {
    if (p[0] != '/')
        return 1;
    for (; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == ',' || *p == 0x7f)
            return 1;
    return 0;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* percent-decodes s in place; its length, or -1 for a bad escape, %00 or more than max bytes */
static long pct_decode(char *s, size_t max) {
    size_t o = 0;
    for (size_t i = 0; s[i]; i++, o++) {
        if (s[i] == '%') {
            int hi = hexval(s[i + 1]), lo = hi < 0 ? -1 : hexval(s[i + 2]);
            if (lo < 0 || (hi | lo) == 0)
                return -1;
            s[o] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            s[o] = s[i];
        }
        if (o >= max)
            return -1;
    }
    s[o] = '\0';
    return (long)o;
}

static int token_char(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* "Name: value" lines joined by CRLF (decoded) -> each line ending in CRLF, malloc'd; NULL
 * when bad (a name that is not a token, a line without ": ", a lone CR or LF) */
static char *header_lines(const char *s) {
    size_t n = strlen(s);
    char *out = malloc(n + 3);
    if (!out)
        return NULL;
    const char *p = s;
    for (;;) {
        const char *name = p;
        while (token_char(*p))
            p++;
        if (p == name || *p != ':')
            break;
        for (p++; *p && *p != '\r' && *p != '\n'; p++) {
        }
        if (*p == '\0') {
            memcpy(out, s, n);
            memcpy(out + n, "\r\n", 3);
            return out;
        }
        if (p[0] != '\r' || p[1] != '\n')
            break;
        p += 2;
    }
    free(out);
    return NULL;
}

static int parse_attach(const char *file, long ln, char *hdr, char *body, struct cn_device *d) {
    if (*hdr) {
        char *lines = NULL;
        if (pct_decode(hdr, CN_ATTACH_HEADERS_MAX) < 0 || !(lines = header_lines(hdr)))
            return csv_fail(file, ln, "bad attach_headers",
                            "percent-encoded 'Name: value' lines joined by CRLF, at most "
                            "2048 bytes");
        d->attach_headers = lines;
    }
    if (*body) {
        long n = pct_decode(body, CN_ATTACH_BODY_MAX);
        if (n < 0)
            return csv_fail(file, ln, "bad attach_body",
                            "a percent-encoded message, no %00, at most 8192 bytes");
        if (!(d->attach_body = strdup(body)))
            return csv_fail(file, ln, "out of memory", "a smaller connections file");
        d->attach_body_len = (uint32_t)n;
    }
    return 0;
}

/* f[14]: the delimiter column, NULL in a file without it */
static int parse_row(const char *file, long ln, char **f, struct cn_device *d, int reply_id) {
    unsigned long long idx;
    if (csv_parse_uint(f[0], 4294967294ULL, &idx))
        return csv_fail(file, ln, "bad index", "an integer 0..4294967294");
    d->index = (uint32_t)idx;
    d->line = (uint32_t)ln;
    if (!*f[1])
        return csv_fail(file, ln, "empty name", "a device name");
    if (strcmp(f[2], "websocket") == 0)
        d->proto = CN_WEBSOCKET;
    else if (strcmp(f[2], "chunked") == 0)
        d->proto = CN_CHUNKED;
    else if (strcmp(f[2], "chunked-post") == 0)
        d->proto = CN_STREAM;
    else
        return csv_fail(file, ln, "bad protocol", "websocket, chunked or chunked-post");
    if (parse_addr(f[3], &d->server, 1))
        return csv_fail(file, ln, "bad server", "IPv4:PORT, port 1..65535");
    if (*f[4] && parse_addr(f[4], &d->source, 0))
        return csv_fail(file, ln, "bad source", "an IPv4 address or empty");
    if (bad_path(f[5]))
        return csv_fail(file, ln, "bad path", "a request target starting with '/', no blanks or commas");
    if (d->proto == CN_CHUNKED ? bad_path(f[6]) || strlen(f[6]) > 200 : *f[6] != '\0')
        return csv_fail(file, ln, "bad reply_path",
                        "a path starting with '/' (at most 200 characters) for chunked (its "
                        "POSTs), empty for websocket and chunked-post "
                        "(replies travel on the WebSocket or the held-open POST)");
    if (parse_u32(file, ln, "heartbeat_ms", f[7], 0, MAX_MS, &d->heartbeat_ms) ||
        parse_u32(file, ln, "event_ms", f[8], 0, MAX_MS, &d->event_ms) ||
        parse_u32(file, ln, "service_us", f[9], 0, 60000000ULL, &d->service_us) ||
        parse_u32(file, ln, "reply_bytes", f[10], 16, CN_REPLY_MAX, &d->reply_bytes) ||
        parse_u32(file, ln, "reconnect_ms", f[11], 0, MAX_MS, &d->reconnect_ms))
        return -1;
    if (d->proto == CN_WEBSOCKET && reply_id != CR_BODY)
        return csv_fail(file, ln, "websocket device with a reply id outside the body",
                        "--reply-id body for websocket devices (a frame has no header or path)");
    if (d->proto == CN_STREAM && reply_id != CR_BODY)
        return csv_fail(file, ln, "chunked-post device with a reply id outside the body",
                        "--reply-id body for chunked-post devices (a chunk has no header or "
                        "path)");
    if (d->proto == CN_CHUNKED && (reply_id == CR_PATH) != (strstr(f[6], "{id}") != NULL))
        return csv_fail(file, ln, "bad reply_path",
                        reply_id == CR_PATH ? "{id} in it (--reply-id path)"
                                            : "no {id} in it (only with --reply-id path)");
    if (parse_attach(file, ln, f[12], f[13], d))
        return -1;
    if (f[14] && *f[14]) {
        long n = pct_decode(f[14], MF_DELIM_MAX);
        if (n <= 0 || d->proto == CN_WEBSOCKET)
            return csv_fail(file, ln, "bad delimiter",
                            d->proto == CN_WEBSOCKET ? "empty for websocket (a frame is a "
                            "message)" : "1..8 percent-encoded bytes, no %00, or empty");
        memcpy(d->delim, f[14], (size_t)n);
        d->dlen = (uint8_t)n;
    }
    d->name = strdup(f[1]);
    d->host = strdup(f[3]);
    d->path = strdup(f[5]);
    d->reply_path = strdup(f[6]);
    if (!d->name || !d->host || !d->path || !d->reply_path)
        return csv_fail(file, ln, "out of memory", "a smaller connections file");
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* indices must be unique: they name the device in every log row (index << 32 | line) */
static int check_unique(const char *file, const struct cn_set *s) {
    uint64_t *k = malloc(s->ndev * sizeof *k);
    if (!k)
        return csv_fail(file, 0, "out of memory", "a smaller file");
    for (uint32_t i = 0; i < s->ndev; i++)
        k[i] = (uint64_t)s->dev[i].index << 32 | s->dev[i].line;
    qsort(k, s->ndev, sizeof *k, cmp_u64);
    int rc = 0;
    for (uint32_t i = 1; i < s->ndev && rc == 0; i++)
        if (k[i] >> 32 == k[i - 1] >> 32) {
            char what[64];
            snprintf(what, sizeof what, "index already used on line %u", (uint32_t)k[i - 1]);
            rc = csv_fail(file, (long)(uint32_t)k[i], what, "a unique index");
        }
    free(k);
    return rc;
}

int cn_load(const char *file, struct cn_set *s) {
    FILE *fp = fopen(file, "r");
    if (!fp) {
        fprintf(stderr, "%s:0: cannot open: %s, expected a readable connections file\n", file,
                strerror(errno));
        return -1;
    }
    long maxn = 1;
    for (int c; (c = getc(fp)) != EOF;)
        maxn += c == '\n';
    rewind(fp);
    s->dev = calloc((size_t)maxn, sizeof *s->dev);
    char *line = NULL;
    size_t cap = 0;
    long ln = 0;
    int rc = s->dev ? 0 : csv_fail(file, 0, "out of memory", "a smaller file");
    int r = rc ? -1 : csv_next_line(fp, file, &line, &cap, &ln);
    int want = NFIELDS;           /* + 1 with the delimiter column */
    if (rc == 0 && r == 1 && strcmp(line, HEADER_FRAMED) == 0)
        want = NFIELDS + 1;
    else if (rc == 0 && (r != 1 || strcmp(line, HEADER) != 0))
        rc = r < 0 ? -1 : csv_fail(file, ln ? ln : 1, "missing or wrong header",
                                   "'" HEADER "' or '" HEADER_FRAMED "'");
    while (rc == 0 && (r = csv_next_line(fp, file, &line, &cap, &ln)) == 1) {
        char *f[NFIELDS + 2] = {0};
        int nf = csv_split(line, f, NFIELDS + 2);
        if (nf != want) {
            char what[64];
            snprintf(what, sizeof what, "%d fields", nf);
            rc = csv_fail(file, ln, what, want == NFIELDS ? "14 (" HEADER ")"
                                                          : "15 (" HEADER_FRAMED ")");
            break;
        }
        if (want == NFIELDS)
            f[NFIELDS] = NULL;
        struct cn_device *d = &s->dev[s->ndev];
        d->sub.fd = d->pub.fd = -1;
        if (parse_row(file, ln, f, d, s->reply_id))
            rc = -1;
        s->ndev++;                /* also a bad row: what it allocated is freed by cn_free */
    }
    if (rc == 0 && r < 0)
        rc = -1;
    if (rc == 0 && s->ndev == 0)
        rc = csv_fail(file, ln, "no connected devices", "at least one row after the header");
    if (rc == 0)
        rc = check_unique(file, s);
    free(line);
    fclose(fp);
    return rc;
}

void cn_free(struct cn_set *s) {
    for (uint32_t i = 0; s->dev && i < s->ndev; i++) {
        free((void *)s->dev[i].name);
        free((void *)s->dev[i].host);
        free((void *)s->dev[i].path);
        free((void *)s->dev[i].reply_path);
        free((void *)s->dev[i].attach_headers);
        free((void *)s->dev[i].attach_body);
    }
    free(s->dev);
    s->dev = NULL;
    s->ndev = 0;
}
