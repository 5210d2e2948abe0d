/* http_parse.c - an HTTP/1.1 response parser fed in pieces (RFC 9112): status line and headers
 * into a fixed buffer, then a Content-Length, chunked or close-delimited body that is counted,
 * not kept. Interim 1xx responses are skipped. No allocation. */
#include <string.h>
#include <strings.h>

#include "http.h"

void http_parser_reset(http_parser_t *p) {
    p->state = HP_HEAD;
    p->close = 0;
    p->status = 0;
    p->hlen = 0;
    p->remaining = 0;
    p->body = 0;
}

typedef struct {
    const char *v;
    size_t n;
} span_t;

/* the values of the three headers that frame a response, in one pass over the head's lines
 * (the status line skipped); an absent one has n == 0. Names compared only when the first
 * letter and the length match: most lines cost two comparisons. */
static void framing_headers(const char *h, size_t n, span_t *conn, span_t *te, span_t *cl) {
    static const struct { const char *name; size_t len; } NAMES[3] = {
        {"connection", 10}, {"transfer-encoding", 17}, {"content-length", 14}};
    span_t *out[3] = {conn, te, cl};
    *conn = *te = *cl = (span_t){NULL, 0};
    const char *end = h + n, *line = memchr(h, '\n', n);
    while (line && line + 1 < end) {
        line++;
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            break;
        const char *colon = memchr(line, ':', (size_t)(eol - line));
        char first = (char)(*line | 0x20);
        for (int k = 0; colon && k < 3; k++) {
            if (first != NAMES[k].name[0] || (size_t)(colon - line) != NAMES[k].len ||
                strncasecmp(line, NAMES[k].name, NAMES[k].len) != 0)
                continue;
            const char *v = colon + 1, *ve = eol;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            if (!out[k]->n) /* the first of a repeated header */
                *out[k] = (span_t){v, (size_t)(ve - v)};
            break;
        }
        line = eol;
    }
}

static int has_token(const char *v, size_t n, const char *tok) {
    size_t tl = strlen(tok);
    for (size_t i = 0; i + tl <= n; i++)
        if (strncasecmp(v + i, tok, tl) == 0)
            return 1;
    return 0;
}

/* the complete head in p->head[0..n): decide how the body ends */
static void head_done(http_parser_t *p, size_t n) {
    const char *h = p->head;
    if (n < 12 || memcmp(h, "HTTP/1.", 7) != 0 || h[8] != ' ' || h[9] < '1' || h[9] > '5' ||
        h[10] < '0' || h[10] > '9' || h[11] < '0' || h[11] > '9') {
        p->state = HP_ERR;
        return;
    }
    p->status = (uint16_t)((h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0'));
    span_t conn, te, cl;
    framing_headers(h, n, &conn, &te, &cl);
    p->close = h[7] == '0' ? !(conn.n && has_token(conn.v, conn.n, "keep-alive"))
                           : (conn.n && has_token(conn.v, conn.n, "close"));
    p->hlen = 0;
    if (p->status < 200) { /* interim (100 Continue): the real response follows */
        uint8_t close = p->close;
        http_parser_reset(p);
        p->close = close;
        return;
    }
    if (p->status == 204 || p->status == 304) {
        p->state = HP_DONE;
        return;
    }
    if (te.n && has_token(te.v, te.n, "chunked")) {
        p->state = HP_CHUNK_SIZE;
        return;
    }
    if (cl.n) {
        uint64_t len = 0;
        for (size_t i = 0; i < cl.n; i++) {
            char d = cl.v[i];
            if (d < '0' || d > '9' || len > (UINT64_MAX - 9) / 10) {
                p->state = HP_ERR;
                return;
            }
            len = len * 10 + (uint64_t)(d - '0');
        }
        p->remaining = len;
        p->state = len ? HP_BODY : HP_DONE;
        return;
    }
    p->close = 1; /* neither: the body ends when the server closes */
    p->state = HP_EOF_BODY;
}

/* append one byte of a line-oriented part; 1 when the line (ending "\n") is complete */
static int line_byte(http_parser_t *p, uint8_t b) {
    if (p->hlen >= HTTP_HEAD_MAX - 1) {
        p->state = HP_ERR;
        return 0;
    }
    p->head[p->hlen++] = (char)b;
    return b == '\n';
}

static void chunk_size_line(http_parser_t *p) {
    uint64_t v = 0;
    size_t i = 0, digits = 0;
    for (; i < p->hlen; i++, digits++) {
        char c = p->head[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            break;
        if (v >> 56) {
            p->state = HP_ERR;
            return;
        }
        v = v << 4 | (uint64_t)d;
    }
    if (!digits || (p->head[i] != ';' && p->head[i] != '\r' && p->head[i] != ' ' &&
                    p->head[i] != '\n')) {
        p->state = HP_ERR;
        return;
    }
    p->hlen = 0;
    p->remaining = v;
    p->state = v ? HP_CHUNK_DATA : HP_TRAILER;
}

size_t http_parse_feed(http_parser_t *p, const uint8_t *d, size_t n) {
    size_t i = 0;
    while (i < n && p->state != HP_DONE && p->state != HP_ERR) {
        switch (p->state) {
        case HP_HEAD: {
            size_t room = HTTP_HEAD_MAX - p->hlen, take = n - i < room ? n - i : room;
            size_t from = p->hlen >= 3 ? p->hlen - 3 : 0;
            memcpy(p->head + p->hlen, d + i, take);
            size_t tot = p->hlen + take;
            const char *e =
                tot >= from + 4 ? memmem(p->head + from, tot - from, "\r\n\r\n", 4) : NULL;
            if (e)
                e += 4;
            if (!e) {
                if (tot >= HTTP_HEAD_MAX) {
                    p->state = HP_ERR;
                    return i;
                }
                p->hlen = (uint16_t)tot;
                i += take;
                break;
            }
            size_t used = (size_t)(e - p->head) - p->hlen;
            i += used;
            head_done(p, (size_t)(e - p->head));
            break;
        }
        case HP_BODY:
        case HP_CHUNK_DATA: {
            uint64_t take = n - i < p->remaining ? n - i : p->remaining;
            p->remaining -= take;
            p->body += take;
            i += take;
            if (!p->remaining)
                p->state = p->state == HP_BODY ? HP_DONE : HP_CHUNK_CRLF;
            break;
        }
        case HP_EOF_BODY:
            p->body += n - i;
            i = n;
            break;
        case HP_CHUNK_SIZE:
            if (line_byte(p, d[i++]))
                chunk_size_line(p);
            break;
        case HP_CHUNK_CRLF:
            if (line_byte(p, d[i++])) {
                p->state = p->hlen == 2 && p->head[0] == '\r' ? HP_CHUNK_SIZE : HP_ERR;
                p->hlen = 0;
            }
            break;
        case HP_TRAILER: /* trailer fields until an empty line */
            if (line_byte(p, d[i++])) {
                int empty = p->hlen <= 2;
                p->hlen = 0;
                if (empty)
                    p->state = HP_DONE;
            }
            break;
        }
    }
    return i;
}

void http_parse_eof(http_parser_t *p) {
    p->state = p->state == HP_EOF_BODY ? HP_DONE : HP_ERR;
}
