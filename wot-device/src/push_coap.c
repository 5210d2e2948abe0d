/* push_coap.c - the CoAP bytes of a push request and what the device reads of an answer
 * (RFC 7252 §3: header, token, options by delta, payload). Encoding happens before the run;
 * the send path only patches the message ID and token. */
#include <stdio.h>
#include <string.h>

#include <coap3/coap.h>

#include "coapreq.h"
#include "push_int.h"

#define OPT_LOCATION_PATH 8
#define OPT_LOCATION_QUERY 20

void push_row_path(const struct push_row *r, char *out, size_t cap) {
    size_t ll = strlen(PUSH_LOCATION);
    if (strncmp(r->path, PUSH_LOCATION, ll) || !P.have_location) {
        snprintf(out, cap, "%s", r->path);
        return;
    }
    const char *rest = r->path + ll;   /* "" or "?query" */
    int loc_has_q = strchr(P.location, '?') != NULL;
    snprintf(out, cap, "%s%s%s", P.location, loc_has_q && *rest == '?' ? "&" : "",
             loc_has_q && *rest == '?' ? rest + 1 : rest);
}

int push_encode(struct push_row *r) {
    char full[600];
    push_row_path(r, full, sizeof full);
    uint8_t b[PUSH_MAX_DGRAM];
    size_t pos = coapreq_encode(b, sizeof b, r->con, r->method, PUSH_TKL, full,
                                r->content_format, r->payload, r->payload_len);
    if (pos == 0 || P.dg_used + pos > P.dg_cap)
        return -1;
    memcpy(P.dg + P.dg_used, b, pos);
    r->dg_off = (uint32_t)P.dg_used;
    r->dg_len = (uint32_t)pos;
    P.dg_used += pos;
    return 0;
}

int push_parse(const uint8_t *d, size_t len, struct push_msg *m) {
    if (len < 4 || (d[0] >> 6) != 1)
        return -1;
    m->type = (d[0] >> 4) & 3;
    m->tkl = d[0] & 15;
    m->code = d[1];
    m->mid = (uint16_t)(d[2] << 8 | d[3]);
    if (m->tkl > 8 || len < 4u + m->tkl)
        return -1;
    m->token = d + 4;
    m->opts = d + 4 + m->tkl;
    m->opts_len = len - 4 - m->tkl;
    return 0;
}

/* Reads one extended delta/length nibble; -1 at a malformed end. */
static long ext_nibble(unsigned nib, const uint8_t **p, const uint8_t *end) {
    if (nib < 13)
        return nib;
    if (nib == 13) {
        if (*p >= end)
            return -1;
        return 13 + *(*p)++;
    }
    if (nib == 14) {
        if (*p + 1 >= end)
            return -1;
        long v = 269 + ((*p)[0] << 8 | (*p)[1]);
        *p += 2;
        return v;
    }
    return -1;
}

void push_take_location(const struct push_msg *m) {
    const uint8_t *p = m->opts, *end = m->opts + m->opts_len;
    char path[256] = "", query[256] = "";
    size_t pl = 0, ql = 0;
    unsigned num = 0;
    while (p < end && *p != 0xFF) {
        unsigned b = *p++;
        long delta = ext_nibble(b >> 4, &p, end), n = ext_nibble(b & 15, &p, end);
        if (delta < 0 || n < 0 || p + n > end)
            return;
        num += (unsigned)delta;
        char *dst = num == OPT_LOCATION_PATH ? path : num == OPT_LOCATION_QUERY ? query : NULL;
        size_t *dl = num == OPT_LOCATION_PATH ? &pl : &ql;
        if (dst && *dl + (size_t)n + 2 < sizeof path) {
            if (*dl)
                dst[(*dl)++] = num == OPT_LOCATION_PATH ? '/' : '&';
            memcpy(dst + *dl, p, (size_t)n);
            *dl += (size_t)n;
            dst[*dl] = '\0';
        }
        p += n;
    }
    if (!pl && !ql)
        return;
    snprintf(P.location, sizeof P.location, "%s%s%s", path, ql ? "?" : "", query);
    P.have_location = 1;
}
