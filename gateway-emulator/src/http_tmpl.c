/* http_tmpl.c - request templates (--http-header, --http-body-template, a path of the trace):
 * text with the placeholders {{index}} {{device}} {{method}} {{path}} {{payload}} ({{payload}}:
 * the trace line's payload_bytes as that many 'x') and the per-request values {{seq}}
 * {{client}} {{rand}} {{time_ms}} {{time_ns}} (template_vars.h: a fixed-width slot filled at the
 * send); single braces are text, so JSON bodies need no escaping. Compiled once, rendered for
 * every trace line before the start (the hot path copies prepared bytes and fills slots). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "template_vars.h"

enum { SEG_TEXT = 0, SEG_INDEX, SEG_DEVICE, SEG_METHOD, SEG_PATH, SEG_PAYLOAD, SEG_VAR };
static const char *const NAMES[] = {"", "index", "device", "method", "path", "payload"};

typedef struct {
    uint8_t kind;
    uint32_t off, len; /* SEG_TEXT: bytes of text[]; SEG_VAR: off = its TV_* kind */
} seg_t;

struct http_tmpl_s {
    seg_t *seg;
    size_t nseg;
    char *text; /* literal bytes, braces unescaped */
};

static void where_at(const char *text, const char *at, long *line, long *col) {
    *line = 1;
    *col = 1;
    for (const char *c = text; c < at; c++, (*col)++)
        if (*c == '\n')
            (*line)++, *col = 0;
}

void http_tmpl_free(http_tmpl_t *t) {
    if (t) {
        free(t->seg);
        free(t->text);
        free(t);
    }
}

static http_tmpl_t *fail(http_tmpl_t *t, const char *where, const char *text, const char *at,
                         const char *what) {
    long line, col;
    where_at(text, at, &line, &col);
    fprintf(stderr, "%s:%ld:%ld: %s, expected one of {{index}} {{device}} {{method}} "
                    "{{path}} {{payload}} %s\n", where, line, col, what, tv_names());
    http_tmpl_free(t);
    return NULL;
}

static int add(http_tmpl_t *t, uint8_t kind, uint32_t off, uint32_t len) {
    seg_t *s = realloc(t->seg, (t->nseg + 1) * sizeof *s);
    if (!s)
        return -1;
    t->seg = s;
    s[t->nseg++] = (seg_t){kind, off, len};
    return 0;
}

http_tmpl_t *http_tmpl_compile(const char *text, const char *where) {
    http_tmpl_t *t = calloc(1, sizeof *t);
    size_t n = strlen(text), tl = 0, start = 0;
    if (!t || !(t->text = malloc(n + 1)))
        return fail(t, where, text, text, "out of memory");
    for (const char *c = text; *c;) {
        if (c[0] != '{' || c[1] != '{') { /* single braces are text (JSON bodies) */
            t->text[tl++] = *c++;
            continue;
        }
        const char *e = strstr(c + 2, "}}");
        if (!e || memchr(c, '\n', (size_t)(e - c)))
            return fail(t, where, text, c, "an unclosed '{{'");
        int kind = 0;
        for (int k = SEG_INDEX; k <= SEG_PAYLOAD; k++)
            if ((size_t)(e - c - 2) == strlen(NAMES[k]) && !strncmp(c + 2, NAMES[k], (size_t)(e - c - 2)))
                kind = k;
        int var = kind ? TV_NONE : tv_kind(c + 2, (size_t)(e - c - 2));
        if (!kind && !var) {
            char what[96];
            snprintf(what, sizeof what, "unknown placeholder '%.*s'",
                     (int)(e - c + 2 > 60 ? 60 : e - c + 2), c);
            return fail(t, where, text, c, what);
        }
        if ((tl > start && add(t, SEG_TEXT, (uint32_t)start, (uint32_t)(tl - start))) ||
            add(t, (uint8_t)(var ? SEG_VAR : kind), (uint32_t)var, 0))
            return fail(t, where, text, c, "out of memory");
        start = tl;
        c = e + 2;
    }
    if (tl > start && add(t, SEG_TEXT, (uint32_t)start, (uint32_t)(tl - start)))
        return fail(t, where, text, text, "out of memory");
    return t;
}

static size_t put(char *out, size_t at, const char *s, size_t n) {
    if (out)
        memcpy(out + at, s, n);
    return n;
}

int http_tmpl_dynamic(const http_tmpl_t *t) {
    for (size_t i = 0; i < t->nseg; i++)
        if (t->seg[i].kind == SEG_VAR)
            return 1;
    return 0;
}

size_t http_tmpl_render(const http_tmpl_t *t, const http_vars_t *v, char *out) {
    size_t n = 0;
    char num[24];
    for (size_t i = 0; i < t->nseg; i++) {
        const seg_t *s = &t->seg[i];
        switch (s->kind) {
        case SEG_TEXT: n += put(out, n, t->text + s->off, s->len); break;
        case SEG_INDEX: n += put(out, n, num, (size_t)sprintf(num, "%u", v->index)); break;
        case SEG_DEVICE: n += put(out, n, num, (size_t)sprintf(num, "%u", v->device)); break;
        case SEG_METHOD: n += put(out, n, v->method, strlen(v->method)); break;
        case SEG_PATH: n += put(out, n, v->path, strlen(v->path)); break;
        case SEG_PAYLOAD:
            if (out)
                memset(out + n, 'x', v->payload);
            n += v->payload;
            break;
        case SEG_VAR: /* zeros now, the request's value at its send */
            if (out) {
                memset(out + n, '0', tv_width((int)s->off));
                if (v->slots && tv_note(v->slots, (uint32_t)(v->base + n), (int)s->off) < 0)
                    v->slots->n = SIZE_MAX; /* out of memory: the caller sees it */
            }
            n += tv_width((int)s->off);
            break;
        }
    }
    return n;
}
