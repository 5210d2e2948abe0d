/* coapreq.h - a CoAP request's bytes, encoded once before a run (RFC 7252 §3): wot-device's
 * push requests (push_coap.c) and wot-fleet's (fleet/push_wire.c). The message ID and the
 * token are left zero for the send to patch. */
#ifndef WOT_COAPREQ_H
#define WOT_COAPREQ_H
#include <stddef.h>
#include <stdint.h>

/* path "a/b?x=1&y=2" -> Uri-Path a, b and Uri-Query x=1, y=2; content_format < 0: none.
 * Returns the length, 0 when it does not fit `cap`. */
size_t coapreq_encode(uint8_t *out, size_t cap, int con, uint8_t method, uint8_t tkl,
                      const char *path, int32_t content_format, const uint8_t *payload,
                      size_t plen);

#endif
