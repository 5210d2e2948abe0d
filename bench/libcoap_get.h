/* libcoap_get.h - what the libcoap 4.3.1 benchmark clients (ge_coap_floor.c,
 * dtls_libcoap_client.c) share: an IPv4 destination, one GET with an 8-byte token. */
#ifndef WB_BENCH_LIBCOAP_GET_H
#define WB_BENCH_LIBCOAP_GET_H

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include <coap3/coap.h>

static inline void libcoap_ipv4(coap_address_t *dst, const char *host, const char *port) {
    coap_address_init(dst);
    dst->addr.sin.sin_family = AF_INET;
    dst->addr.sin.sin_port = htons((uint16_t)atoi(port));
    inet_pton(AF_INET, host, &dst->addr.sin.sin_addr);
    dst->size = sizeof dst->addr.sin;
}

/* path NULL = "/" */
static inline void libcoap_send_get(coap_session_t *s, int con, const char *path) {
    coap_pdu_t *pdu = coap_pdu_init(con ? COAP_MESSAGE_CON : COAP_MESSAGE_NON,
                                    COAP_REQUEST_CODE_GET, coap_new_message_id(s),
                                    coap_session_max_pdu_size(s));
    uint8_t tok[8];
    size_t tl;
    coap_session_new_token(s, &tl, tok);
    coap_add_token(pdu, tl, tok);
    if (path)
        coap_add_option(pdu, COAP_OPTION_URI_PATH, strlen(path), (const uint8_t *)path);
    coap_send(s, pdu);
}

#endif
