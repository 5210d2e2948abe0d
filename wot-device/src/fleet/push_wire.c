/* push_wire.c - the CoAP bytes of the engine's own requests (RFC 7252 §3) and what it reads of
 * an answer: a request is encoded once, before the run, by wot-device's encoder (coapreq.c;
 * message ID and token left zero for the send to patch); options are read with libcoap's
 * coap_opt_parse, as coap_wire.c does for the server side. */
#include <stdio.h>
#include <string.h>

#include <coap3/coap.h>

#include "../coapreq.h"
#include "push_int.h"

#define OPT_LOCATION_PATH 8
#define OPT_URI_PATH 11
#define OPT_URI_QUERY 15
#define OPT_LOCATION_QUERY 20

size_t flp_encode(uint8_t *out, size_t cap, int con, uint8_t method, const char *path,
                  int32_t content_format, const uint8_t *payload, size_t plen) {
    return coapreq_encode(out, cap, con, method, FLP_TKL, path, content_format, payload, plen);
}

/* Calls back for each option of a datagram (after header and token) until the payload. */
typedef void (*opt_fn)(unsigned num, const uint8_t *v, size_t n, void *ctx);

static void walk_options(const uint8_t *dg, size_t n, opt_fn fn, void *ctx) {
    if (n < 4)
        return;
    size_t i = 4 + (size_t)(dg[0] & 15);
    unsigned num = 0;
    while (i < n && dg[i] != 0xFF) {
        coap_option_t o;
        size_t used = coap_opt_parse(dg + i, n - i, &o);
        if (used == 0)
            return;
        i += used;
        num += o.delta;
        fn(num, o.value, o.length, ctx);
    }
}

/* "path" and "query" parts joined into out as path?query */
struct uri_acc {
    char path[FLP_LOC_MAX], query[FLP_LOC_MAX];
    size_t pl, ql;
    unsigned path_num, query_num;
};

static void append(char *dst, size_t *len, size_t cap, char sep, const uint8_t *v, size_t n) {
    if (*len + n + 2 > cap)
        return;                        /* longer than any path or query here: cut */
    if (*len)
        dst[(*len)++] = sep;
    memcpy(dst + *len, v, n);
    *len += n;
    dst[*len] = '\0';
}

static void collect(unsigned num, const uint8_t *v, size_t n, void *ctx) {
    struct uri_acc *a = ctx;
    if (num == a->path_num)
        append(a->path, &a->pl, sizeof a->path, '/', v, n);
    else if (num == a->query_num)
        append(a->query, &a->ql, sizeof a->query, '&', v, n);
}

static size_t joined(const struct uri_acc *a, char *out, size_t cap) {
    int w = snprintf(out, cap, "%s%s%s", a->path, a->ql ? "?" : "", a->query);
    return w < 0 ? 0 : (size_t)w < cap ? (size_t)w : cap - 1;
}

void flp_uri_of(const uint8_t *dg, size_t n, char *out, size_t cap) {
    struct uri_acc a = {.path_num = OPT_URI_PATH, .query_num = OPT_URI_QUERY};
    walk_options(dg, n, collect, &a);
    joined(&a, out, cap);
}

size_t flp_location_of(const uint8_t *dg, size_t n, char *out, size_t cap) {
    struct uri_acc a = {.path_num = OPT_LOCATION_PATH, .query_num = OPT_LOCATION_QUERY};
    walk_options(dg, n, collect, &a);
    if (!a.pl && !a.ql)
        return 0;
    return joined(&a, out, cap);
}

void flp_join_location(const char *loc, size_t loc_len, const char *suffix, char *out,
                       size_t cap) {
    int loc_has_q = memchr(loc, '?', loc_len) != NULL;
    int join = loc_has_q && suffix[0] == '?';
    snprintf(out, cap, "%.*s%s%s", (int)loc_len, loc, join ? "&" : "", join ? suffix + 1 : suffix);
}

/* template: [u16 suffix length][suffix][i32 content format][u16 payload length][payload] */
size_t flp_template_put(uint8_t *out, size_t cap, const char *suffix, int32_t cf,
                        const uint8_t *payload, size_t plen) {
    uint16_t sl = (uint16_t)strlen(suffix), pl = (uint16_t)plen;
    size_t need = 2 + sl + 1 + 4 + 2 + plen;
    if (need > cap)
        return 0;
    uint8_t *p = out;
    memcpy(p, &sl, 2);
    memcpy(p + 2, suffix, sl + 1u);
    p += 2 + sl + 1;
    memcpy(p, &cf, 4);
    memcpy(p + 4, &pl, 2);
    memcpy(p + 6, payload, plen);
    return need;
}

void flp_template_get(const uint8_t *in, struct flp_template *t) {
    uint16_t sl;
    memcpy(&sl, in, 2);
    t->suffix = (const char *)in + 2;
    const uint8_t *p = in + 2 + sl + 1;
    memcpy(&t->content_format, p, 4);
    memcpy(&t->plen, p + 4, 2);
    t->payload = p + 6;
}
