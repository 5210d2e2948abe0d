/* coapreq.c - see coapreq.h. Options are written with libcoap's coap_opt_encode. */
#include "coapreq.h"

#include <string.h>

#include <coap3/coap.h>

#define OPT_URI_PATH 11
#define OPT_CONTENT_FORMAT 12
#define OPT_URI_QUERY 15

/* Option num after option *last, value v[0..n); -1 when it does not fit. */
static int put_opt(uint8_t *b, size_t cap, size_t *pos, unsigned *last, unsigned num,
                   const void *v, size_t n) {
    size_t w = coap_opt_encode((coap_opt_t *)(b + *pos), cap - *pos, (uint16_t)(num - *last),
                               (const uint8_t *)v, n);
    if (w == 0)
        return -1;
    *pos += w;
    *last = num;
    return 0;
}

/* Every sep-separated part of s[0..n) as option num ("a/" is "a" and an empty part, as a
 * URI's segments are; nothing for an empty s). */
static int put_parts(uint8_t *b, size_t cap, size_t *pos, unsigned *last, unsigned num,
                     const char *s, size_t n, char sep) {
    if (n == 0)
        return 0;
    for (;;) {
        const char *e = memchr(s, sep, n);
        size_t k = e ? (size_t)(e - s) : n;
        if (put_opt(b, cap, pos, last, num, s, k))
            return -1;
        if (!e)
            return 0;
        n -= k + 1;
        s = e + 1;
    }
}

size_t coapreq_encode(uint8_t *out, size_t cap, int con, uint8_t method, uint8_t tkl,
                      const char *path, int32_t content_format, const uint8_t *payload,
                      size_t plen) {
    if (tkl > 8 || cap < 4u + tkl)
        return 0;
    size_t pos = 0;
    out[pos++] = (uint8_t)(0x40 | (con ? 0 : 1) << 4 | tkl);
    out[pos++] = method;
    out[pos++] = 0;
    out[pos++] = 0;                    /* message ID: patched at the send */
    memset(out + pos, 0, tkl);         /* token: patched at the send */
    pos += tkl;
    unsigned last = 0;
    const char *q = strchr(path, '?');
    size_t path_len = q ? (size_t)(q - path) : strlen(path);
    if (put_parts(out, cap, &pos, &last, OPT_URI_PATH, path, path_len, '/'))
        return 0;
    if (content_format >= 0) {
        uint8_t v[2];
        size_t k = coap_encode_var_safe(v, sizeof v, (unsigned)content_format);
        if (put_opt(out, cap, &pos, &last, OPT_CONTENT_FORMAT, v, k))
            return 0;
    }
    if (q && put_parts(out, cap, &pos, &last, OPT_URI_QUERY, q + 1, strlen(q + 1), '&'))
        return 0;
    if (plen) {
        if (pos + 1 + plen > cap)
            return 0;
        out[pos++] = 0xFF;
        memcpy(out + pos, payload, plen);
        pos += plen;
    }
    return pos;
}
