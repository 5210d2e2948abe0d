/* coap_wire.c - see coap_wire.h. */
#include "coap_wire.h"

#include <coap3/coap.h>
#include <string.h>

#define OPT_IF_MATCH 1
#define OPT_URI_HOST 3
#define OPT_IF_NONE_MATCH 5
#define OPT_OBSERVE 6
#define OPT_URI_PORT 7
#define OPT_URI_PATH 11
#define OPT_CONTENT_FORMAT 12
#define OPT_URI_QUERY 15
#define OPT_ACCEPT 17
#define OPT_BLOCK2 23
#define OPT_BLOCK1 27

/* Critical options (odd numbers) a device may ignore and still act as wot-device (libcoap's
 * server accepts them): the request is for this endpoint, queries are ignored like in
 * wot-device, and every representation here has one format; Block1/Block2 (27/23) are
 * served by fleet/block.c. Proxy-Uri/Scheme (35/39) and anything unknown are "Bad Option"
 * (RFC 7252 §5.4.1). */
static int critical_ok(uint16_t num) {
    return num == OPT_IF_MATCH || num == OPT_URI_HOST || num == OPT_IF_NONE_MATCH ||
           num == OPT_URI_PORT || num == OPT_URI_PATH || num == OPT_URI_QUERY ||
           num == OPT_ACCEPT || num == OPT_BLOCK2 || num == OPT_BLOCK1;
}

/* an option's unsigned value (RFC 7252 §3.2 uint), at most 4 bytes used */
static uint32_t opt_uint(const coap_option_t *o) {
    uint32_t v = 0;
    for (size_t k = 0; k < o->length && k < 4; k++)
        v = v << 8 | o->value[k];
    return v;
}

int fl_coap_parse(const uint8_t *d, size_t n, struct fl_msg *m) {
    if (n < 4)
        return -1;
    m->type = (d[0] >> 4) & 3;
    m->tkl = d[0] & 15;
    m->code = d[1];
    m->mid = (uint16_t)(d[2] << 8 | d[3]);
    m->path[0] = '\0';
    m->path_too_long = 0;
    m->bad_option = 0;
    m->observe = 0;
    m->has_block1 = m->has_block2 = 0;
    m->observe_val = m->block1 = m->block2 = 0;
    m->query_hash = 2166136261u;
    if ((d[0] >> 6) != 1 || m->tkl > 8 || 4 + (size_t)m->tkl > n)
        return -1;
    m->token = d + 4;
    if (m->code == 0)      /* empty message: header only (RFC 7252 §4.1) */
        return n == 4 && m->tkl == 0 ? 0 : -1;
    size_t i = 4 + m->tkl, plen = 0;
    uint32_t num = 0;
    while (i < n) {
        if (d[i] == 0xFF)  /* payload marker: a payload must follow */
            return i + 1 < n ? 0 : -1;
        coap_option_t o;
        size_t used = coap_opt_parse(d + i, n - i, &o);
        if (used == 0)
            return -1;
        i += used;
        num += o.delta;
        if (num > 0xFFFF)
            return -1;
        if (num == OPT_URI_PATH) {
            if (plen + (plen ? 1 : 0) + o.length > FL_PATH_MAX) {
                m->path_too_long = 1;
                continue;
            }
            if (plen)
                m->path[plen++] = '/';
            memcpy(m->path + plen, o.value, o.length);
            plen += o.length;
            m->path[plen] = '\0';
        } else if (num == OPT_OBSERVE) {
            m->observe = 1;
            m->observe_val = opt_uint(&o);
        } else if (num == OPT_BLOCK2 && o.length <= 3) {
            m->has_block2 = 1;
            m->block2 = opt_uint(&o);
        } else if (num == OPT_BLOCK1 && o.length <= 3) {
            m->has_block1 = 1;
            m->block1 = opt_uint(&o);
        } else if (num == OPT_URI_QUERY) {   /* FNV-1a over the queries, '&' between them */
            m->query_hash = (m->query_hash ^ '&') * 16777619u;
            for (size_t k = 0; k < o.length; k++)
                m->query_hash = (m->query_hash ^ o.value[k]) * 16777619u;
        } else if ((num & 1) && (!critical_ok((uint16_t)num) || num == OPT_BLOCK1 ||
                                 num == OPT_BLOCK2) && !m->bad_option) {
            m->bad_option = (uint16_t)num;
        }
    }
    return 0;
}

size_t fl_coap_build(uint8_t *out, size_t cap, uint8_t type, uint8_t code, uint16_t mid,
                     const uint8_t *token, uint8_t tkl, int content_format, const char *body,
                     size_t nx) {
    size_t need = 4 + (size_t)tkl + (content_format >= 0 ? 3 : 0) + (nx ? 1 + nx : 0);
    if (tkl > 8 || need > cap)
        return 0;
    out[0] = (uint8_t)(0x40 | (type << 4) | tkl);
    out[1] = code;
    out[2] = (uint8_t)(mid >> 8);
    out[3] = (uint8_t)mid;
    if (tkl)
        memcpy(out + 4, token, tkl);
    size_t i = 4 + (size_t)tkl;
    if (content_format >= 0) {
        uint8_t v[2];
        size_t vl = coap_encode_var_safe(v, sizeof v, (unsigned)content_format);
        i += coap_opt_encode(out + i, cap - i, OPT_CONTENT_FORMAT, v, vl);
    }
    if (nx) {
        out[i++] = 0xFF;
        if (body)
            memcpy(out + i, body, nx);
        else
            memset(out + i, 'x', nx);
        i += nx;
    }
    return i;
}

struct fl_opt fl_opt_uint(uint16_t num, uint32_t value) {
    struct fl_opt o = {.num = num};
    o.len = (uint8_t)coap_encode_var_safe(o.v, sizeof o.v, value);
    return o;
}

size_t fl_coap_build_opts(uint8_t *out, size_t cap, uint8_t type, uint8_t code, uint16_t mid,
                          const uint8_t *token, uint8_t tkl, const struct fl_opt *opts,
                          int nopts, size_t nx) {
    return fl_coap_build_opts_body(out, cap, type, code, mid, token, tkl, opts, nopts, NULL, nx);
}

size_t fl_coap_build_opts_body(uint8_t *out, size_t cap, uint8_t type, uint8_t code,
                               uint16_t mid, const uint8_t *token, uint8_t tkl,
                               const struct fl_opt *opts, int nopts, const char *body,
                               size_t nx) {
    size_t i = fl_coap_build(out, cap, type, code, mid, token, tkl, -1, NULL, 0);
    if (i == 0)
        return 0;
    uint16_t last = 0;
    for (int k = 0; k < nopts; k++) {
        if (cap - i < 5u + opts[k].len)
            return 0;
        i += coap_opt_encode(out + i, cap - i, (uint16_t)(opts[k].num - last), opts[k].v,
                             opts[k].len);
        last = opts[k].num;
    }
    if (nx) {
        if (cap - i < 1 + nx)
            return 0;
        out[i++] = 0xFF;
        if (body)
            memcpy(out + i, body, nx);
        else
            memset(out + i, 'x', nx);
        i += nx;
    }
    return i;
}
