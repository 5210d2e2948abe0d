/* coapx.h - CoAP exchanges over datagrams, shared by the UDP and the DTLS transport (coapx.c):
 * matching responses to requests (token, source, socket, MID), empty ACK/RST, Observe messages,
 * block-wise follow-ups and the RFC 7252 retransmission schedule. The transport supplies the
 * wire: how a request's datagram or a 4-byte empty message leaves (sendto, or SSL_write). */
#ifndef GE_COAPX_H
#define GE_COAPX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "ge.h"
#include "transport.h"

struct coap_wire {
    /* request idx's current datagram (a retransmission or a block follow-up): 1 sent (*t =
     * mono ns right before its sendto), 0 no way to send it, -1 failed (errno) */
    int (*send_req)(void *ctx, uint32_t idx, int64_t *t);
    /* an empty ACK/RST m[4] to endpoint ep (address `to`) from socket index sock */
    void (*send_empty)(void *ctx, int sock, int ep, const uint8_t m[4],
                       const struct sockaddr_storage *to, socklen_t tolen);
    /* the one request of socket index sock (per-request DTLS slots), else -1; NULL = none */
    int64_t (*req_of_sock)(void *ctx, int sock);
};

typedef struct coapx coapx_t;

/* before the loop: the response PDU, the retransmission heap; NULL with errno set */
coapx_t *coapx_new(loop_t *L, ge_t *g, const struct coap_wire *wire, void *ctx);
void coapx_free(coapx_t *X);
/* a CoAP message (plaintext) from endpoint ep on socket index sock (dgram_fn's arguments) */
void coapx_datagram(coapx_t *X, int sock, int ep, const uint8_t *d, size_t len,
                    const struct sockaddr_storage *src, socklen_t srclen, int64_t t, int64_t kt);
/* request idx's CoAP message left at t for the first time: start its retransmission schedule
 * (CON with --retransmit) */
void coapx_sent(coapx_t *X, uint32_t idx, int64_t t);
void coapx_timers(coapx_t *X, int64_t now);   /* retransmissions that are due */
int64_t coapx_next_due(const coapx_t *X);     /* the next one, INT64_MAX none */

#endif
