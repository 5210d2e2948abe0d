/* transport.c - the table: which transport serves the run's target, chosen once from the
 * trace's URI scheme (trace.c allows one scheme per trace). */
#include <stddef.h>

#include "dtls.h"
#include "transport.h"

static const struct transport *const BY_SCHEME[] = {
    [SCHEME_NONE] = &transport_udp, /* an empty trace: nothing is sent */
    [SCHEME_COAP] = &transport_udp,
    [SCHEME_COAPS] = &transport_dtls,
    [SCHEME_HTTP] = &transport_http,
};

int transport_select(ge_t *g) {
    int rc = dtls_check_scheme(g); /* credentials need coaps:// URIs */
    if (rc)
        return rc;
    g->tp = BY_SCHEME[g->scheme]; /* trace.c sets SCHEME_NONE..SCHEME_HTTP */
    if (g->closed.clients) /* closed loop over plain CoAP (clients_check_options refused DTLS), or HTTP */
        g->tp = g->scheme == SCHEME_HTTP ? &transport_http_closed : &transport_closed;
    return g->tp->prepare(g);
}
