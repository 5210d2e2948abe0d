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

/* value of header `name` (case-insensitive) in the head's lines, NUL-free span; 0 if absent */
static size_t header(const char *h, size_t n, const char *name, const char **val) {
    size_t nl = strlen(name);
    const char *end = h + n, *line = memchr(h, '\n', n); /* skip the status line */
    while (line && line + 1 < end) {
        line++;
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            break;
        if ((size_t)(eol - line) > nl && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1, *ve = eol;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            *val = v;
            return (size_t)(ve - v);
        }
        line = eol;
    }
    return 0;
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
    const char *v;
    size_t vl = header(h, n, "connection", &v);
    p->close = h[7] == '0' ? !(vl && has_token(v, vl, "keep-alive")) : (vl && has_token(v, vl, "close"));
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
    if ((vl = header(h, n, "transfer-encoding", &v)) && has_token(v, vl, "chunked")) {
        p->state = HP_CHUNK_SIZE;
        return;
    }
    if ((vl = header(h, n, "content-length", &v))) {
        uint64_t len = 0;
        for (size_t i = 0; i < vl; i++) {
            if (v[i] < '0' || v[i] > '9' || len > (UINT64_MAX - 9) / 10) {
                p->state = HP_ERR;
                return;
            }
            len = len * 10 + (uint64_t)(v[i] - '0');
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
            const char *e = NULL;
            for (size_t k = from; k + 4 <= tot; k++)
                if (memcmp(p->head + k, "\r\n\r\n", 4) == 0) {
                    e = p->head + k + 4;
                    break;
                }
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
