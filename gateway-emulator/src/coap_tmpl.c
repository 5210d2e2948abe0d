/* coap_tmpl.c - per-request values in CoAP request paths (coap_tmpl.h). */
#include <string.h>

#include "coap_tmpl.h"

#define OPT_URI_PATH 11

/* where the path starts in a coap[s]:// URI string (after the authority's '/'), or -1 */
static long path_start(const char *uri) {
    const char *a = strstr(uri, "://");
    if (!a)
        return -1;
    const char *p = strchr(a + 3, '/');
    return p ? (long)(p + 1 - uri) : (long)strlen(uri);
}

int coap_tmpl_render(const char *uri, char *out, size_t cap, coap_tmpl_t *t, const char **why,
                     char *name, size_t namecap) {
    memset(t, 0, sizeof *t);
    *why = NULL;
    if (!strstr(uri, "{{"))
        return 0;
    long ps = path_start(uri);
    const char *q = strchr(uri, '?');
    size_t n = 0;
    t->path_off = (size_t)(ps < 0 ? 0 : ps);
    t->path_len = (q ? (size_t)(q - uri) : strlen(uri)) - t->path_off;
    for (const char *c = uri; *c;) {
        if (c[0] == '{' && c[1] == '{') {
            const char *e = strstr(c + 2, "}}");
            size_t len = e ? (size_t)(e - c - 2) : 0;
            int kind = e ? tv_kind(c + 2, len) : 0;
            if (name && namecap) {
                size_t k = len < namecap - 1 ? len : namecap - 1;
                memcpy(name, c + 2, k);
                name[k] = 0;
            }
            if (!kind)
                return *why = "unknown value", -1;
            if (ps < 0 || c - uri < ps || (q && c > q))
                return *why = "a value outside the path (host, port or query)", -1;
            if (t->n == COAP_TMPL_MAX)
                return *why = "too many values in one uri", -1;
            unsigned w = tv_width(kind);
            if (n + w + 1 > cap)
                return *why = "the uri is too long", -1;
            t->slot[t->n++] = (tv_slot_t){(uint32_t)n, (uint8_t)kind};
            memset(out + n, '0', w);
            n += w;
            c = e + 2;
            continue;
        }
        if (n + 2 > cap)
            return *why = "the uri is too long", -1;
        out[n++] = *c++;
    }
    out[n] = 0;
    for (size_t i = t->path_off; i < t->path_off + t->path_len; i++)
        if (uri[i] == '%') /* the option would hold the decoded bytes: offsets would shift */
            return *why = "a percent-escape in a path with values", -1;
    return 1;
}

/* the value of the seg-th Uri-Path option: its offset into opts, or -1 */
static long uri_path_value(const uint8_t *o, size_t len, unsigned seg) {
    unsigned num = 0, k = 0;
    for (size_t p = 0; p < len && o[p] != 0xFF;) {
        unsigned d = o[p] >> 4, l = o[p] & 15;
        p++;
        if (d == 13)
            d = 13u + o[p++];
        else if (d == 14)
            d = 269u + ((unsigned)o[p] << 8 | o[p + 1]), p += 2;
        if (l == 13)
            l = 13u + o[p++];
        else if (l == 14)
            l = 269u + ((unsigned)o[p] << 8 | o[p + 1]), p += 2;
        num += d;
        if (num == OPT_URI_PATH && k++ == seg)
            return (long)p;
        p += l;
    }
    return -1;
}

int coap_tmpl_locate(const coap_tmpl_t *t, const char *rendered, const uint8_t *opts,
                     size_t optlen, tv_slot_t *out) {
    /* the rendered path starts where the template's does: only the path holds values */
    for (size_t i = 0; i < t->n; i++) {
        size_t off = t->slot[i].off, seg = 0, seg_start = t->path_off;
        for (size_t c = t->path_off; c < off; c++)
            if (rendered[c] == '/')
                seg++, seg_start = c + 1;
        long v = uri_path_value(opts, optlen, (unsigned)seg);
        if (v < 0)
            return -1;
        out[i] = (tv_slot_t){(uint32_t)(v + (long)(off - seg_start)), t->slot[i].kind};
    }
    return 0;
}

int tv_is_clock(int kind) { return kind == TV_TIME_MS || kind == TV_TIME_NS; }

void coap_tmpl_fill(uint8_t *dgram, const tv_slot_t *s, size_t n, const tv_values_t *v,
                    int which) {
    for (size_t i = 0; i < n; i++) {
        if (!(which & (tv_is_clock(s[i].kind) ? TV_CLOCK : TV_EARLY)))
            continue;
        tv_slot_t one = {s[i].off + 12, s[i].kind}; /* after the header and the token */
        tv_fill(dgram, &one, 1, v);
    }
}
