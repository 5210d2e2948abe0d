/* proxy.c - --proxy: every request goes to one CoAP forward proxy, which finds the real target
 * in the request's options (RFC 7252 section 5.7.2 / 5.10.2). The options of each distinct URI
 * are encoded once while the trace loads (trace.c uri_for); the send loop only sends the
 * prepared datagrams, so the hot path stays the same and allocation-free. */
#include <stdlib.h>
#include <string.h>

#include "coapopt.h"
#include "ge.h"
#include "proxy.h"

/* "HOST:PORT" or "[V6]:PORT"; the host is resolved with the trace's endpoints */
int proxy_parse(ge_t *g, char *arg) {
    char *colon = strrchr(arg, ':');
    if (!colon || colon == arg || !colon[1])
        return -1;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535)
        return -1;
    *colon = 0;
    if (arg[0] == '[') { /* [::1]:5683 */
        size_t n = strlen(arg);
        if (n < 3 || arg[n - 1] != ']')
            return -1;
        arg[n - 1] = 0;
        arg++;
    }
    g->proxy.host = arg;
    g->proxy.port = (uint16_t)port;
    return 0;
}

/* a CoAP uint option value: big-endian, no leading zero bytes (RFC 7252 section 3.2) */
static size_t uint_value(unsigned v, uint8_t out[4]) {
    size_t n = 0;
    uint8_t tmp[4];
    while (v) {
        tmp[n++] = (uint8_t)(v & 0xff);
        v >>= 8;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

int proxy_options(int mode, const coap_uri_t *u, const char *uristr, uint8_t *buf, size_t cap,
                  size_t *len) {
    uint16_t last = 0;
    *len = 0;
    if (mode == PROXY_URI)
        return put_opt(buf, cap, len, &last, COAP_OPTION_PROXY_URI, (const uint8_t *)uristr,
                       strlen(uristr));
    uint8_t segs[1024], port[4];
    if (put_opt(buf, cap, len, &last, COAP_OPTION_URI_HOST, u->host.s, u->host.length) < 0 ||
        put_opt(buf, cap, len, &last, COAP_OPTION_URI_PORT, port, uint_value(u->port, port)) < 0)
        return -1;
    if (u->path.length) {
        size_t sl = sizeof segs;
        if (coap_split_path(u->path.s, u->path.length, segs, &sl) < 0 ||
            put_segments(buf, cap, len, &last, COAP_OPTION_URI_PATH, segs, sl) < 0)
            return -1;
    }
    if (u->query.length) {
        size_t sl = sizeof segs;
        if (coap_split_query(u->query.s, u->query.length, segs, &sl) < 0 ||
            put_segments(buf, cap, len, &last, COAP_OPTION_URI_QUERY, segs, sl) < 0)
            return -1;
    }
    return put_opt(buf, cap, len, &last, COAP_OPTION_PROXY_SCHEME, (const uint8_t *)"coap", 4);
}
