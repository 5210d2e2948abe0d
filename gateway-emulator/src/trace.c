/* trace.c - load and validate the trace CSV (contract §1), resolve hosts once, encode the
 * CoAP options of every distinct URI with libcoap. Runs before the start; may allocate. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <coap3/coap.h>

#include "coap_tmpl.h"
#include "coapopt.h"
#include "ge.h"
#include "pct_body.h" /* common/pct_body.h */
#include "proxy.h"

#define MAX_PAYLOAD 1024          /* one datagram */
#define MAX_BODY 1048576          /* with --block-size: block-wise (block.c) */
#define MAX_OPTS 1024
#define MAX_FIELDS 7
#define MAX_TRACE_CLIENTS 60000 /* a socket each; the socket index is 16 bits */

/* ---- a small string -> index hash table (open addressing, power of two) ---- */
typedef struct {
    char **keys;
    uint32_t *vals;
    size_t cap, used;
} strmap_t;

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    while (*s)
        h = (h ^ (uint8_t)*s++) * 1099511628211ULL;
    return h;
}

static int strmap_grow(strmap_t *m) {
    size_t ncap = m->cap ? m->cap * 2 : 64;
    char **nk = calloc(ncap, sizeof *nk);
    uint32_t *nv = calloc(ncap, sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = fnv1a(m->keys[i]) & (ncap - 1);
        while (nk[j])
            j = (j + 1) & (ncap - 1);
        nk[j] = m->keys[i];
        nv[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = ncap;
    return 0;
}

/* returns slot of key; *found tells whether present */
static size_t strmap_find(const strmap_t *m, const char *key, int *found) {
    size_t j = fnv1a(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0) {
            *found = 1;
            return j;
        }
        j = (j + 1) & (m->cap - 1);
    }
    *found = 0;
    return j;
}

static void strmap_free(strmap_t *m) {
    for (size_t i = 0; i < m->cap; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->vals);
}

/* ---- loader state ---- */
typedef struct {
    ge_t *g;
    const char *file;
    long line;
    strmap_t uri_map;  /* full uri string -> uri index */
    size_t reqs_cap, uris_cap, eps_cap;
    ep_index_t ep_ix; /* endpoint by address: each new URI finds its endpoint in O(1) */
    int clients_col; /* -1 not known yet, 0 no client column, 1 every line has one */
    int body_col;    /* the header ends in ",body": every line's last field is its body */
    size_t at_cap;   /* entries of g->tbody.at */
} loader_t;

static int bad(loader_t *L, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s:%ld: ", L->file, L->line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

static char *trim(char *s) {
    while (*s && isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

/* strict non-negative decimal integer */
static int parse_u64(const char *s, uint64_t max, uint64_t *out) {
    if (!*s)
        return -1;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned d = (unsigned)(*p - '0');
        if (v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* resolve host:port once; returns endpoint index or -1 (message printed) */
static int endpoint_for(loader_t *L, const char *host, uint16_t port, int *is_literal) {
    ge_t *g = L->g;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t sl;
    struct sockaddr_in *s4 = (void *)&ss;
    struct sockaddr_in6 *s6 = (void *)&ss;
    *is_literal = 1;
    if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        sl = sizeof *s4;
    } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        sl = sizeof *s6;
    } else {
        *is_literal = 0;
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_DGRAM;
        int rc = getaddrinfo(host, NULL, &hints, &res);
        if (rc != 0 || !res) {
            bad(L, "cannot resolve host '%s' (%s), expected a resolvable host name or an IP address",
                host, gai_strerror(rc));
            return -1;
        }
        /* prefer IPv4 */
        struct addrinfo *pick = res;
        for (struct addrinfo *a = res; a; a = a->ai_next)
            if (a->ai_family == AF_INET) {
                pick = a;
                break;
            }
        memcpy(&ss, pick->ai_addr, pick->ai_addrlen);
        sl = pick->ai_addrlen;
        if (ss.ss_family == AF_INET)
            s4->sin_port = htons(port);
        else
            s6->sin6_port = htons(port);
        freeaddrinfo(res);
    }
    int known = ep_index_find(g, &L->ep_ix, &ss);
    if (known >= 0)
        return known;
    if (g->neps >= 65535) {
        bad(L, "more than 65535 distinct endpoints, expected fewer");
        return -1;
    }
    if (g->neps == L->eps_cap) {
        L->eps_cap = L->eps_cap ? L->eps_cap * 2 : 16;
        endpoint_t *ne = realloc(g->eps, L->eps_cap * sizeof *ne);
        if (!ne)
            return -1;
        g->eps = ne;
    }
    endpoint_t *e = &g->eps[g->neps];
    e->addr = ss;
    e->addrlen = sl;
    if (ep_index_add(&L->ep_ix, g, g->neps) < 0)
        return -1;
    return (int)g->neps++;
}

static const char *const SCHEME_NAME[] = {"", "coap://", "coaps://", "http://"};

/* CoAP-only options an http:// trace cannot take (the first one given, else NULL) */
static const char *coap_only_option(const ge_t *g) {
    return g->non ? "--type non" : g->retransmit ? "--retransmit" : g->block_size ? "--block-size"
           : g->proxy.host ? "--proxy (a CoAP forward proxy; put an HTTP proxy in the URI's host)"
           : g->ports_per_device ? "--ports-per-device (HTTP uses --http-connections)"
           : NULL;
}

/* one scheme per trace; coaps:// exactly when the DTLS credentials are given (dtls_cli.c);
 * http:// without CoAP-only options, and --http-* options only with http:// */
static int scheme_check(loader_t *L, const char *uristr, int scheme) {
    ge_t *g = L->g;
    if (!g->scheme) {
        g->scheme = scheme;
        g->scheme_line = L->line;
    } else if (g->scheme != scheme) {
        return bad(L, "uri '%s' mixes %s with the %s URIs from line %ld, expected one scheme "
                      "per trace", uristr, SCHEME_NAME[scheme], SCHEME_NAME[g->scheme],
                   g->scheme_line), -1;
    }
    int coaps = scheme == SCHEME_COAPS, http = scheme == SCHEME_HTTP;
    if (coaps && !g->dtls_opt.identity)
        return bad(L, "coaps:// uri '%s' without DTLS credentials, expected --dtls-psk-identity "
                      "and --dtls-psk-key-file", uristr), -1;
    if (!coaps && g->dtls_opt.identity)
        return bad(L, "%s uri '%s' with --dtls-psk-identity/--dtls-psk-key-file, expected "
                      "coaps:// URIs (or no DTLS options)", SCHEME_NAME[scheme], uristr), -1;
    const char *opt = http ? coap_only_option(g) : NULL;
    if (opt)
        return bad(L, "http:// uri '%s' with %s, expected no CoAP-only option with an HTTP "
                      "trace", uristr, opt), -1;
    if (!http && (g->http_opt.conns || g->http_opt.per_request || g->http_opt.nheaders))
        return bad(L, "%s uri '%s' with --http-* options, expected http:// URIs (or no --http-* "
                      "option)", SCHEME_NAME[scheme], uristr), -1;
    return 0;
}

static int intern_uri(loader_t *L, size_t slot, const char *uristr, int ep, const char *path,
                      size_t plen, const char *query, size_t qlen);

/* http://host[:port]/path[?query] (host: IPv4, [IPv6] or a name; port default 80) */
static int http_uri_for(loader_t *L, const char *uristr, size_t slot) {
    const char *a = uristr + 7, *e = a + strcspn(a, "/?#");
    if (strchr(uristr, '#') || e == a || (size_t)(e - a) > 255)
        return bad(L, "bad uri '%s', expected http://host[:port]/path[?query] (no fragment)",
                   uristr), -1;
    if (scheme_check(L, uristr, SCHEME_HTTP) < 0)
        return -1;
    char host[256];
    const char *hs = a, *he, *pc;
    if (*a == '[') { /* [IPv6] */
        he = memchr(a, ']', (size_t)(e - a));
        if (!he)
            return bad(L, "bad host in uri '%s', expected [IPv6 address]", uristr), -1;
        hs = a + 1;
        pc = he + 1;
    } else {
        he = memchr(a, ':', (size_t)(e - a));
        if (!he)
            he = e;
        pc = he;
    }
    uint64_t port = 80;
    if (pc < e) {
        char pb[8] = {0};
        if (*pc != ':' || e - pc - 1 < 1 || e - pc - 1 > 5)
            return bad(L, "bad port in uri '%s', expected a port 1..65535", uristr), -1;
        memcpy(pb, pc + 1, (size_t)(e - pc - 1));
        if (parse_u64(pb, 65535, &port) < 0 || port == 0)
            return bad(L, "bad port in uri '%s', expected a port 1..65535", uristr), -1;
    }
    memcpy(host, hs, (size_t)(he - hs));
    host[he - hs] = 0;
    if (!*host)
        return bad(L, "bad uri '%s', expected http://host[:port]/path[?query]", uristr), -1;
    int literal, ep = endpoint_for(L, host, (uint16_t)port, &literal);
    if (ep < 0)
        return -1;
    const char *path = *e == '/' ? e + 1 : e, *q = strchr(path, '?');
    size_t plen = q ? (size_t)(q - path) : strlen(path);
    for (const char *c = path; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f)
            return bad(L, "bad path in uri '%s', expected no spaces or control characters "
                          "(percent-encode them)", uristr), -1;
    int u = intern_uri(L, slot, uristr, ep, path, plen, q ? q + 1 : NULL, q ? strlen(q + 1) : 0);
    if (u >= 0 && !(L->g->uris[u].authority = strndup(a, (size_t)(e - a))))
        return -1;
    return u;
}

/* parse and intern a URI; returns uri index or -1 (message printed) */
static int uri_for(loader_t *L, const char *uristr) {
    ge_t *g = L->g;
    int found;
    if (L->uri_map.used * 2 >= L->uri_map.cap && strmap_grow(&L->uri_map) < 0)
        return -1;
    size_t slot = strmap_find(&L->uri_map, uristr, &found);
    if (found)
        return (int)L->uri_map.vals[slot];

    if (strncmp(uristr, "http://", 7) == 0)
        return http_uri_for(L, uristr, slot);
    if (strncmp(uristr, "https://", 8) == 0)
        return bad(L, "https:// uri '%s': TLS is not supported, expected http:// (or coap://, "
                      "coaps://)", uristr), -1;
    /* per-request values in the path (coap_tmpl.h): encoded as slots of zeros */
    char rendered[MAX_OPTS * 2 + 512], vname[32];
    coap_tmpl_t T;
    const char *why, *tmpl_uri = uristr;
    int has_tv = coap_tmpl_render(uristr, rendered, sizeof rendered, &T, &why, vname, sizeof vname);
    if (has_tv < 0 && !strcmp(why, "unknown value"))
        return bad(L, "bad uri '%s': unknown value '{{%s}}', expected one of %s", uristr, vname,
                   tv_names()), -1;
    if (has_tv < 0)
        return bad(L, "bad uri '%s': %s, expected the values %s in the path only", uristr, why,
                   tv_names()), -1;
    if (has_tv && g->proxy.host)
        return bad(L, "bad uri '%s': per-request values through --proxy, expected a literal "
                      "path (the proxy options are not templated)", uristr), -1;
    if (has_tv)
        uristr = rendered;
    int coaps = strncmp(uristr, "coaps://", 8) == 0;
    if (!coaps && strncmp(uristr, "coap://", 7) != 0)
        return bad(L, "bad uri '%s', expected coap://host[:port]/path[?query] (or coaps://, "
                      "http://)", uristr), -1;
    coap_uri_t u;
    if (coap_split_uri((const uint8_t *)uristr, strlen(uristr), &u) < 0 ||
        u.scheme != (coaps ? COAP_URI_SCHEME_COAPS : COAP_URI_SCHEME_COAP) ||
        u.host.length == 0 || u.host.length > 255)
        return bad(L, "bad uri '%s', expected coap://host[:port]/path[?query] (or coaps://)", uristr), -1;
    if (scheme_check(L, uristr, coaps ? SCHEME_COAPS : SCHEME_COAP) < 0)
        return -1;
    if (u.port == 0)
        return bad(L, "bad port in uri '%s', expected a port 1..65535", uristr), -1;
    char host[256];
    memcpy(host, u.host.s, u.host.length);
    host[u.host.length] = 0;
    int literal;
    /* --proxy: every URI goes to the proxy, which finds the target in the options (proxy.c) */
    int ep = g->proxy.host ? endpoint_for(L, g->proxy.host, g->proxy.port, &literal)
                           : endpoint_for(L, host, u.port, &literal);
    if (ep < 0)
        return -1;

    /* three encodings: plain, with Observe: 0 (OBSERVE) and with Observe: 1 (CANCEL) */
    uint8_t optv[3][MAX_OPTS], segs[MAX_OPTS];
    size_t olens[3];
    for (int v = 0; v < 3; v++) {
    uint8_t *opts = optv[v];
    size_t olen = 0;
    uint16_t last = 0;
    if (g->proxy.host) {
        /* through a proxy: the target travels in Proxy-Uri/Proxy-Scheme options; an Observe
         * option would have to sit between them, which proxy.c does not do: OBSERVE lines are
         * refused with --proxy (below), so only the plain encoding is used */
        if (v > 0) {
            olens[v] = 0;
            continue;
        }
        if (proxy_options(g->proxy.mode, &u, uristr, opts, sizeof optv[v], &olen) < 0)
            return bad(L, "uri '%s' cannot be sent through the proxy, expected a URI whose "
                          "proxy options fit in %d bytes", uristr, MAX_OPTS), -1;
    } else if (!literal &&
        put_opt(opts, sizeof optv[v], &olen, &last, COAP_OPTION_URI_HOST, u.host.s, u.host.length) < 0)
        return bad(L, "uri '%s' too long, expected options under %d bytes", uristr, MAX_OPTS), -1;
    if (v > 0) { /* RFC 7641: register = empty value (0), deregister = 1 */
        uint8_t one = 1;
        if (put_opt(opts, sizeof optv[v], &olen, &last, COAP_OPTION_OBSERVE, &one, v == 2 ? 1 : 0) < 0)
            return bad(L, "uri '%s' too long, expected options under %d bytes", uristr, MAX_OPTS), -1;
    }
    if (u.path.length && !g->proxy.host) {
        size_t sl = sizeof segs;
        if (coap_split_path(u.path.s, u.path.length, segs, &sl) < 0 ||
            put_segments(opts, MAX_OPTS, &olen, &last, COAP_OPTION_URI_PATH, segs, sl) < 0)
            return bad(L, "bad path in uri '%s', expected a path under %d bytes", uristr, MAX_OPTS),
                   -1;
    }
    if (u.query.length && !g->proxy.host) {
        size_t sl = sizeof segs;
        if (coap_split_query(u.query.s, u.query.length, segs, &sl) < 0 ||
            put_segments(opts, MAX_OPTS, &olen, &last, COAP_OPTION_URI_QUERY, segs, sl) < 0)
            return bad(L, "bad query in uri '%s', expected a query under %d bytes", uristr,
                       MAX_OPTS),
                   -1;
    }
    olens[v] = olen;
    }
    size_t olen = olens[0];

    int r = has_tv ? intern_uri(L, slot, tmpl_uri, ep, tmpl_uri + T.path_off, T.path_len,
                                (const char *)u.query.s, u.query.length)
                   : intern_uri(L, slot, uristr, ep, (const char *)u.path.s, u.path.length,
                                (const char *)u.query.s, u.query.length);
    if (r < 0)
        return -1;
    uri_t *ur = &g->uris[r];
    if (has_tv) { /* the slots' offsets in the plain encoding's Uri-Path options */
        if (!(ur->tv = malloc(T.n * sizeof *ur->tv)))
            return -1;
        if (coap_tmpl_locate(&T, rendered, optv[0], olens[0], ur->tv) < 0)
            return bad(L, "bad uri '%s': a value's path segment was not encoded as one Uri-Path "
                          "option, expected plain segments", tmpl_uri), -1;
        ur->ntv = (uint8_t)T.n;
        for (size_t i = 0; i < T.n; i++)
            ur->tv_clock |= (uint8_t)tv_is_clock(T.slot[i].kind);
    }
    ur->opts = malloc(olens[0] + olens[1] + olens[2] + 1);
    if (!ur->opts)
        return -1;
    memcpy(ur->opts, optv[0], olen);
    memcpy(ur->opts + olen, optv[1], olens[1]);
    memcpy(ur->opts + olen + olens[1], optv[2], olens[2]);
    ur->optlen = (uint16_t)olen;
    ur->obs_opts[0] = ur->opts + olen;
    ur->obs_opts[1] = ur->opts + olen + olens[1];
    ur->obs_len[0] = (uint16_t)olens[1];
    ur->obs_len[1] = (uint16_t)olens[2];
    return r;
}

/* a new entry of g->uris for uristr (its output path = path + "?query"); its index or -1 */
static int intern_uri(loader_t *L, size_t slot, const char *uristr, int ep, const char *path,
                      size_t plen0, const char *query, size_t qlen) {
    ge_t *g = L->g;
    if (g->nuris == L->uris_cap) {
        L->uris_cap = L->uris_cap ? L->uris_cap * 2 : 64;
        uri_t *nu = realloc(g->uris, L->uris_cap * sizeof *nu);
        if (!nu)
            return -1;
        g->uris = nu;
    }
    uri_t *ur = &g->uris[g->nuris];
    memset(ur, 0, sizeof *ur);
    size_t plen = plen0 + (qlen ? 1 + qlen : 0);
    ur->path = malloc(plen + 1);
    if (!ur->path)
        return -1;
    if (plen0)
        memcpy(ur->path, path, plen0);
    if (qlen) {
        ur->path[plen0] = '?';
        memcpy(ur->path + plen0 + 1, query, qlen);
    }
    ur->path[plen] = 0;
    ur->ep = (uint16_t)ep;
    L->uri_map.keys[slot] = strdup(uristr);
    L->uri_map.vals[slot] = (uint32_t)g->nuris;
    L->uri_map.used++;
    return (int)g->nuris++;
}

/* request idx's body (`pay` bytes, percent-encoded in `text`) appended to g->tbody */
static int body_keep(loader_t *L, size_t idx, const char *text, uint64_t pay) {
    ge_t *g = L->g;
    if (idx >= L->at_cap) {
        size_t cap = L->at_cap ? L->at_cap * 2 : 4096;
        uint64_t *na = realloc(g->tbody.at, cap * sizeof *na);
        if (!na)
            return -1;
        g->tbody.at = na;
        L->at_cap = cap;
    }
    g->tbody.at[idx] = 0;
    if (!pay)
        return 0;
    if (g->tbody.used + pay > g->tbody.cap) {
        size_t cap = g->tbody.cap ? g->tbody.cap : 65536;
        while (cap < g->tbody.used + pay)
            cap *= 2;
        char *nb = realloc(g->tbody.bytes, cap);
        if (!nb)
            return -1;
        g->tbody.bytes = nb;
        g->tbody.cap = cap;
    }
    pct_decode(text, g->tbody.bytes + g->tbody.used, (size_t)pay);
    g->tbody.at[idx] = 1 + g->tbody.used;
    g->tbody.used += pay;
    return 0;
}

/* the body column of a line (text non-empty): what is wrong with it, or 0 */
static int body_check(loader_t *L, const char *text, int m, int has_pay, uint64_t pay,
                      int is_http, const char *method) {
    if (!(m == M_PUT || m == M_POST || m == M_PATCH))
        return bad(L, "a body with %s, expected a body only with PUT, POST or PATCH", method);
    long n = pct_decode(text, NULL, 0);
    if (n < 0)
        return bad(L, "bad %%-escape in body, expected %%XX with two hex digits");
    if (!has_pay || (uint64_t)n != pay)
        return bad(L, "body of %ld bytes with payload_bytes %s%llu, expected a body of exactly "
                      "payload_bytes bytes (decoded)", n, has_pay ? "" : "(none) ",
                   (unsigned long long)pay);
    uint64_t one = L->g->block_size ? (uint64_t)L->g->block_size : MAX_PAYLOAD;
    if (!is_http && pay > one)
        return bad(L, "a body of %llu bytes with a CoAP uri, expected at most %llu (a body from "
                      "the trace is sent in one datagram, not block-wise)",
                   (unsigned long long)pay, (unsigned long long)one);
    return 0;
}

static int parse_line(loader_t *L, char *line, int64_t *last_us) {
    ge_t *g = L->g;
    char *f[MAX_FIELDS];
    int nf = 0;
    char *p = line, *body = NULL;
    if (L->body_col) { /* the last field: percent-encoded, so it holds no comma */
        char *c = strrchr(line, ',');
        if (!c)
            return bad(L, "1 field, expected 5 to 7: device_id,send_time_us,method,uri"
                          "[,payload_bytes[,client]],body (the header names a body column)");
        *c = 0;
        body = trim(c + 1);
    }
    for (;;) {
        char *c = strchr(p, ',');
        if (nf == MAX_FIELDS)
            break;
        f[nf++] = p;
        if (!c)
            break;
        *c = 0;
        p = c + 1;
    }
    if ((nf < 4 || nf > 6 || strchr(p, ',')) && L->body_col)
        return bad(L, "%d fields, expected 5 to 7: device_id,send_time_us,method,uri"
                      "[,payload_bytes[,client]],body (the header names a body column)",
                   (nf < MAX_FIELDS ? nf : MAX_FIELDS) + 1);
    if (nf < 4 || nf > 6 || strchr(p, ','))
        return bad(L, "%d fields, expected 4 to 6: device_id,send_time_us,method,uri[,payload_bytes"
                      "[,client]]",
                   nf < MAX_FIELDS ? nf : MAX_FIELDS);
    /* the client column: all lines or none (it decides the sockets for the whole trace) */
    if (L->clients_col < 0)
        L->clients_col = nf == 6;
    else if (L->clients_col != (nf == 6))
        return bad(L, "%d fields, expected %s like the trace's first request", nf,
                   L->clients_col ? "6 (with a client column)" : "4 or 5 (no client column)");
    for (int i = 0; i < nf; i++)
        f[i] = trim(f[i]);

    uint64_t dev, t, pay = 0;
    if (parse_u64(f[0], UINT32_MAX, &dev) < 0)
        return bad(L, "bad device_id '%s', expected an integer >= 0", f[0]);
    if (parse_u64(f[1], (uint64_t)INT64_MAX / 1000, &t) < 0)
        return bad(L, "bad send_time_us '%s', expected an integer >= 0 (microseconds)", f[1]);
    if ((int64_t)t < *last_us)
        return bad(L, "send_time_us %llu is before the previous line's %lld, expected non-decreasing times",
                   (unsigned long long)t, (long long)*last_us);
    int m;
    if (strcmp(f[2], "GET") == 0)
        m = M_GET;
    else if (strcmp(f[2], "PUT") == 0)
        m = M_PUT;
    else if (strcmp(f[2], "POST") == 0)
        m = M_POST;
    else if (strcmp(f[2], "DELETE") == 0)
        m = M_DELETE;
    else if (strcmp(f[2], "OBSERVE") == 0)
        m = M_OBSERVE;
    else if (strcmp(f[2], "CANCEL") == 0)
        m = M_CANCEL;
    else if (strcmp(f[2], "PATCH") == 0)
        m = M_PATCH;
    else
        return bad(L, "bad method '%s', expected GET, PUT, POST, DELETE, OBSERVE or CANCEL "
                      "(coap://) or GET, PUT, POST, DELETE or PATCH (http://)", f[2]);
    int observe = m == M_OBSERVE || m == M_CANCEL;
    uint64_t client = 0;
    if (nf == 6) {
        if (parse_u64(trim(f[5]), MAX_TRACE_CLIENTS - 1, &client) < 0)
            return bad(L, "bad client '%s', expected an integer 0..%d (the source endpoint that "
                          "sends the request)", trim(f[5]), MAX_TRACE_CLIENTS - 1);
        if (observe)
            return bad(L, "method %s with a client column, expected GET, PUT, POST or DELETE",
                       f[2]);
        if (client + 1 > g->trace_clients)
            g->trace_clients = (uint32_t)client + 1;
    }
    int is_http = strncmp(f[3], "http://", 7) == 0;
    if (is_http && observe)
        return bad(L, "method %s with an http:// uri, expected GET, PUT, POST, DELETE or PATCH "
                      "(Observe is CoAP only)", f[2]);
    if (!is_http && m == M_PATCH)
        return bad(L, "method PATCH with a %s uri, expected GET, PUT, POST, DELETE, OBSERVE or "
                      "CANCEL (PATCH is sent over http:// only)", f[3]);
    if (is_http && nf == 6)
        return bad(L, "a client column with an http:// uri, expected 4 or 5 fields (HTTP "
                      "requests share the --http-connections of their target)");
    if (nf >= 5 && *f[4]) { /* with a client column the payload may be left empty */
        uint64_t maxp = g->block_size || is_http ? MAX_BODY : MAX_PAYLOAD;
        if (parse_u64(f[4], maxp, &pay) < 0)
            return bad(L, "bad payload_bytes '%s', expected an integer 0..%llu%s", f[4],
                       (unsigned long long)maxp,
                       g->block_size || is_http ? "" : " (larger bodies need --block-size)");
        if (pay > 0 && (m == M_GET || m == M_DELETE || observe))
            return bad(L, "payload_bytes %llu with %s, expected a payload only with PUT, POST "
                          "or PATCH",
                       (unsigned long long)pay, f[2]);
    }
    if (body && *body && body_check(L, body, m, nf >= 5 && *f[4], pay, is_http, f[2]))
        return 2;
    int uri = uri_for(L, f[3]);
    if (uri < 0)
        return 2;

    if (g->n == L->reqs_cap) {
        L->reqs_cap = L->reqs_cap ? L->reqs_cap * 2 : 4096;
        req_t *nr = realloc(g->reqs, L->reqs_cap * sizeof *nr);
        if (!nr) {
            fprintf(stderr, "gateway-emulator: out of memory loading the trace\n");
            return 1;
        }
        g->reqs = nr;
    }
    if (observe && g->dtls_opt.identity && g->dtls_opt.mode == 1 /* per-request */)
        return bad(L, "method %s with --dtls-sessions per-request, expected GET, PUT, POST or "
                      "DELETE (an observation needs a session that outlives its request)", f[2]);
    if (observe && g->uris[uri].ntv)
        return bad(L, "method %s with per-request values in its uri '%s', expected GET, PUT, "
                      "POST or DELETE (an observation's path must not change)", f[2], f[3]);
    if (observe && g->proxy.host)
        return bad(L, "method %s through --proxy, expected GET, PUT, POST or DELETE (Observe "
                      "through a forward proxy is not supported)", f[2]);
    if (observe) { /* pair a CANCEL with its OBSERVE (observe.c) */
        const char *why = NULL;
        if (observe_note(g, (uint32_t)g->n, m, (uint32_t)uri, (uint32_t)dev, &why) < 0)
            return why ? bad(L, "%s", why) : 1;
    }
    req_t *r = &g->reqs[g->n++];
    memset(r, 0, sizeof *r);
    r->sched_ns = (int64_t)t * 1000;
    r->device = (uint32_t)dev;
    r->method = (uint8_t)m;
    r->path_id = (uint32_t)uri;
    r->ep = g->uris[uri].ep;
    r->sock = (uint16_t)client; /* the trace's client (net.c): its socket index */
    /* payload size until net_prepare encodes the datagram; bodies above one datagram: block.c */
    r->dgram_len = (uint16_t)(pay > MAX_PAYLOAD ? 0 : pay);
    if (is_http) /* the body's size until http_prep.c renders the request (up to MAX_BODY) */
        r->dgram_off = (uint32_t)pay;
    if (block_note_body(g, (uint32_t)(g->n - 1), pay) < 0 ||
        (L->body_col && body_keep(L, g->n - 1, body, *body ? pay : 0) < 0)) {
        fprintf(stderr, "gateway-emulator: out of memory loading the trace\n");
        return 1;
    }
    *last_us = (int64_t)t;
    return 0;
}

int trace_load(ge_t *g) {
    FILE *fp = fopen(g->trace_path, "r");
    if (!fp) {
        fprintf(stderr, "%s:0: cannot open (%s), expected a readable trace file\n", g->trace_path,
                strerror(errno));
        return 2;
    }
    int rc = trace_read(g, fp, g->trace_path);
    fclose(fp);
    return rc;
}

int trace_read(ge_t *g, FILE *fp, const char *name) {
    loader_t L;
    memset(&L, 0, sizeof L);
    L.g = g;
    L.file = name;
    L.clients_col = -1;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0, seen_content = 0;
    int64_t last_us = 0;
    while ((len = getline(&buf, &cap, fp)) >= 0) {
        L.line++;
        if (memchr(buf, 0, (size_t)len)) {
            rc = bad(&L, "NUL byte in line, expected text");
            break;
        }
        char *s = trim(buf);
        if (!*s || *s == '#')
            continue;
        if (!seen_content) {
            seen_content = 1;
            if (strncmp(s, "device_id", 9) == 0) {
                size_t hl = strlen(s);
                L.body_col = hl > 5 && strcmp(s + hl - 5, ",body") == 0;
                if (L.body_col && g->http_opt.body_file) {
                    rc = bad(&L, "a body column with --http-body-template, expected one of them "
                                 "(each request's own body, or one template for all)");
                    break;
                }
                continue;
            }
        }
        rc = parse_line(&L, s, &last_us);
        if (rc)
            break;
    }
    if (!rc && ferror(fp))
        rc = bad(&L, "read error (%s), expected a readable file", strerror(errno));
    if (!rc && g->n == 0)
        rc = bad(&L, "no requests in the trace, expected at least one request line");
    if (!rc && g->n > UINT32_MAX - 1)
        rc = bad(&L, "too many requests, expected fewer than 2^32");
    free(buf);
    strmap_free(&L.uri_map);
    free(L.ep_ix.slot);
    return rc;
}

void trace_free(ge_t *g) {
    for (size_t i = 0; i < g->nuris; i++) {
        free(g->uris[i].path);
        free(g->uris[i].opts);
        free(g->uris[i].authority);
    }
    free(g->uris);
    free(g->reqs);
    free(g->eps);
    observe_free(g);
    block_free(g);
    trace_body_release(g);
    g->uris = NULL, g->reqs = NULL, g->eps = NULL;
    g->nuris = g->n = g->neps = 0;
}

void trace_body_release(ge_t *g) {
    free(g->tbody.bytes);
    free(g->tbody.at);
    memset(&g->tbody, 0, sizeof g->tbody);
}
