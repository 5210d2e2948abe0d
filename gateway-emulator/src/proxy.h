/* proxy.h - the options of a request sent through a CoAP forward proxy (proxy.c). */
#ifndef GE_PROXY_H
#define GE_PROXY_H

#include <stddef.h>
#include <stdint.h>

#include <coap3/coap.h>

/* The options of the request for `uristr` (already split into `u`) when it goes to a forward
 * proxy: PROXY_URI -> one Proxy-Uri option holding the whole URI; PROXY_SCHEME -> Uri-Host,
 * Uri-Port, Uri-Path..., Uri-Query..., Proxy-Scheme "coap" (RFC 7252 section 5.10.2).
 * Writes *len bytes into buf; -1 when they do not fit in cap. Runs at load time only. */
int proxy_options(int mode, const coap_uri_t *u, const char *uristr, uint8_t *buf, size_t cap,
                  size_t *len);

#endif
