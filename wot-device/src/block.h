/* block.h - block-wise transfer (RFC 7959) through libcoap: large response bodies (Block2) and
 * request bodies (Block1) of any resource, up to RES_MAX_PAYLOAD bytes. */
#ifndef WOT_BLOCK_H
#define WOT_BLOCK_H
#include <coap3/coap.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "resources.h"

/* Allocates the payload bytes for the largest resource. 0 or -1. */
int block_init(coap_context_t *ctx, const struct resource_set *rs);
/* n bytes of payload ('x'), n <= the largest payload_bytes of the resource file */
const uint8_t *block_payload(size_t n);
/* The response body of res (payload_bytes of its body, or filler): one datagram when it fits
 * and the client asked for no block size, else the block the request asks for (block 0 of a
 * new transfer). */
void block_add_payload(coap_resource_t *r, coap_session_t *s, const coap_pdu_t *req,
                       const coap_string_t *query, coap_pdu_t *resp,
                       const struct resource *res);
/* A follow-up of a block-wise transfer (GET Block2 NUM > 0, Block1 with M = 1): answered at
 * once (the block, or 2.31 Continue); returns 1. 0 for anything else. */
int block_continue(const struct resource *res, const coap_pdu_t *req, coap_pdu_t *resp);
/* ", \"blockwise\": {...}" into device-summary.json */
void block_json(FILE *f);
/* The separate response to a Block1 request body echoes its last Block1 option. */
void block_echo_block1(const coap_pdu_t *req, coap_pdu_t *resp);
void block_free(void);

#endif
