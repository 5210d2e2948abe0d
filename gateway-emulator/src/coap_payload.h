/* coap_payload.h - the payload of CoAP PUT and POST requests from --http-body-template
 * (coap_payload.c): the HTTP body template's placeholders ({{index}} {{device}} {{method}}
 * {{path}} {{payload}} and the per-request values of template_vars.h), rendered into each
 * request's datagram before the start with slots of zeros for the per-request values. The
 * values known before the start are written then; the clock's at the send (udp.c), all of them
 * into the closed loop's client copy (clients.c). One datagram: no block-wise payloads. */
#ifndef GE_COAP_PAYLOAD_H
#define GE_COAP_PAYLOAD_H

#include "ge.h"
#include "template_vars.h"

/* before net_prepare sizes the datagrams: compiles the template and sets each PUT/POST's
 * payload length; 0 ok (or no template), 2 bad input (said), 1 no memory */
int coap_payload_prepare(ge_t *g);
/* at the encoding of request idx (len bytes at d, its payload last): the rendered payload,
 * its slots noted and the values known before the start written */
int coap_payload_render(ge_t *g, uint32_t idx, uint8_t *d, size_t len);
/* writes request idx's payload values of kind `which` (coap_tmpl.h TV_*) into d */
void coap_payload_fill(const ge_t *g, uint32_t idx, uint8_t *d, const tv_values_t *v, int which);
int coap_payload_has_clock(const ge_t *g);
void coap_payload_free(ge_t *g);

#endif
