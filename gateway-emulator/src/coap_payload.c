/* coap_payload.c - CoAP PUT/POST payloads from --http-body-template (coap_payload.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coap_payload.h"
#include "coap_tmpl.h"
#include "http.h"

#define PAYLOAD_MAX 1024 /* one datagram (trace.c MAX_PAYLOAD) */
#define NONE UINT32_MAX

static const char *const METHOD[] = {"", "GET", "POST", "PUT", "DELETE", "GET", "GET", "PATCH"};

struct coap_payload_s {
    http_tmpl_t *t;
    tv_list_t slots;   /* every request's slots, in request order; off from the datagram start */
    uint32_t *first;   /* per request: its first slot (NONE: no payload) */
    uint16_t *pay;     /* per request: the trace's payload_bytes ({{payload}}) */
    uint8_t n;         /* slots per payload (the same template: the same values) */
    uint8_t clock;     /* one is the clock's */
};

static int has_body(const req_t *r) { return r->method == M_PUT || r->method == M_POST; }

static http_vars_t vars(const ge_t *g, uint32_t i) {
    const req_t *r = &g->reqs[i];
    return (http_vars_t){i, r->device, METHOD[r->method], g->uris[r->path_id].path,
                         g->cpl->pay[i], NULL, 0};
}

int coap_payload_prepare(ge_t *g) {
    if (!g->http_opt.body_file || g->scheme == SCHEME_HTTP)
        return 0;
    if (g->block_size) {
        fprintf(stderr, "gateway-emulator: --http-body-template with --block-size and a coap:// "
                        "trace, expected no --block-size (a templated CoAP payload fits one "
                        "datagram)\n");
        return 2;
    }
    char *text = http_read_file(g->http_opt.body_file);
    if (!text) {
        fprintf(stderr, "%s:0: cannot read the --http-body-template, expected a readable text "
                        "file\n", g->http_opt.body_file);
        return 2;
    }
    struct coap_payload_s *P = calloc(1, sizeof *P);
    if (!P) {
        free(text);
        return 1;
    }
    g->cpl = P;
    P->t = http_tmpl_compile(text, g->http_opt.body_file);
    free(text);
    if (!P->t)
        return 2;
    P->first = malloc((g->n ? g->n : 1) * sizeof *P->first);
    P->pay = malloc((g->n ? g->n : 1) * sizeof *P->pay);
    if (!P->first || !P->pay)
        return 1;
    for (size_t i = 0; i < g->n; i++) {
        P->first[i] = NONE;
        P->pay[i] = g->reqs[i].dgram_len;
        if (!has_body(&g->reqs[i]))
            continue;
        http_vars_t v = vars(g, (uint32_t)i);
        size_t len = http_tmpl_render(P->t, &v, NULL);
        if (len > PAYLOAD_MAX) {
            fprintf(stderr, "%s:0: the payload of request %zu is %zu bytes, expected at most "
                            "%d (one datagram: a templated CoAP payload is not block-wise)\n",
                    g->http_opt.body_file, i, len, PAYLOAD_MAX);
            return 2;
        }
        g->reqs[i].dgram_len = (uint16_t)len; /* the payload's size until net_prepare encodes */
    }
    return 0;
}

int coap_payload_render(ge_t *g, uint32_t idx, uint8_t *d, size_t len) {
    struct coap_payload_s *P = g->cpl;
    if (!P || !has_body(&g->reqs[idx]))
        return 0;
    http_vars_t v = vars(g, idx);
    size_t plen = http_tmpl_render(P->t, &v, NULL);
    size_t before = P->slots.n;
    v.slots = &P->slots;
    v.base = len - plen;
    http_tmpl_render(P->t, &v, (char *)d + len - plen);
    if (P->slots.n == SIZE_MAX)
        return 1;
    if (P->slots.n > before) {
        P->first[idx] = (uint32_t)before;
        P->n = (uint8_t)(P->slots.n - before);
        for (size_t k = before; k < P->slots.n; k++)
            P->clock |= (uint8_t)tv_is_clock(P->slots.slot[k].kind);
        tv_values_t tv = {idx, g->reqs[idx].sock, g->http_opt.seed, 0};
        coap_payload_fill(g, idx, d, &tv, TV_EARLY);
    }
    return 0;
}

void coap_payload_fill(const ge_t *g, uint32_t idx, uint8_t *d, const tv_values_t *v,
                       int which) {
    const struct coap_payload_s *P = g->cpl;
    if (!P || P->first[idx] == NONE)
        return;
    const tv_slot_t *s = P->slots.slot + P->first[idx];
    for (size_t k = 0; k < P->n; k++)
        if (which & (tv_is_clock(s[k].kind) ? TV_CLOCK : TV_EARLY))
            tv_fill(d, s + k, 1, v);
}

int coap_payload_has_clock(const ge_t *g) { return g->cpl && g->cpl->clock; }

void coap_payload_free(ge_t *g) {
    if (!g->cpl)
        return;
    http_tmpl_free(g->cpl->t);
    free(g->cpl->slots.slot);
    free(g->cpl->first);
    free(g->cpl->pay);
    free(g->cpl);
    g->cpl = NULL;
}
