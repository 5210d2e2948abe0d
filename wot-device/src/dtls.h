/* dtls.h - DTLS-PSK for the device endpoint (docs/CONTRACTS.md §3, "DTLS"): the credentials
 * from the command line, the libcoap server setup, and the handshake counters. */
#ifndef WOT_DTLS_H
#define WOT_DTLS_H
#include <coap3/coap.h>
#include <stdint.h>
#include <stdio.h>

#define DTLS_DEFAULT_PORT 5684
#include "psk.h" /* common/psk.h: PSK_MAX_KEY, PSK_MAX_IDENTITY */

/* Reads --dtls-psk-identity / --dtls-psk-key-file (either may be NULL; both NULL = plain UDP).
 * Returns 0, or 2 after printing a message naming the option. */
int dtls_configure(const char *identity, const char *key_file);
/* 1 when the endpoint is to speak DTLS. */
int dtls_enabled(void);
/* Installs the PSK on the context (before coap_new_endpoint). 0 or 1 (message printed). */
int dtls_setup(coap_context_t *ctx);
/* Counts handshake outcomes from libcoap's session events. */
void dtls_on_event(coap_session_t *s, coap_event_t ev);
/* ", \"dtls\": null" or the counters, for device-summary.json. */
void dtls_json(FILE *f);
/* Wipes the key from memory. */
void dtls_free(void);

#endif
