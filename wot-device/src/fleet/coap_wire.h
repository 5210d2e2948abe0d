/* coap_wire.h - the CoAP messages of wot-fleet (RFC 7252 §3), parsed and built in place.
 *
 * Why not libcoap's PDU API: libcoap 4.3.1's public headers offer no parser for a datagram
 * (coap_pdu_parse is internal) and no way to get a PDU's bytes without a session, and
 * coap_pdu_init allocates. The options, the only non-trivial part of the format, are read and
 * written with libcoap's public coap_opt_parse / coap_opt_encode; the 4-byte header and the
 * token are done here. No allocation: the caller's buffers only. */
#ifndef WOT_FLEET_COAP_WIRE_H
#define WOT_FLEET_COAP_WIRE_H
#include <stddef.h>
#include <stdint.h>

enum { FL_CON = 0, FL_NON = 1, FL_ACK = 2, FL_RST = 3 };
#define FL_CODE(c, d) ((uint8_t)(((c) << 5) | (d)))
#define FL_GET 1
#define FL_DELETE 4
#define FL_CONTENT FL_CODE(2, 5)
#define FL_CHANGED FL_CODE(2, 4)
#define FL_DELETED FL_CODE(2, 2)
#define FL_BAD_OPTION FL_CODE(4, 2)
#define FL_NOT_FOUND FL_CODE(4, 4)
#define FL_METHOD_NOT_ALLOWED FL_CODE(4, 5)
#define FL_UNAVAILABLE FL_CODE(5, 3)
#define FL_PATH_MAX 255
#define FL_CONTINUE FL_CODE(2, 31)
#define FL_BAD_REQUEST FL_CODE(4, 0)
#define FL_OPT_OBSERVE 6
#define FL_OPT_ETAG 4
#define FL_OPT_CONTENT_FORMAT 12
#define FL_OPT_MAX_AGE 14
#define FL_OPT_BLOCK2 23
#define FL_OPT_BLOCK1 27
#define FL_OPT_SIZE2 28

struct fl_msg {
    uint8_t type, code, tkl;
    uint16_t mid;
    const uint8_t *token;
    char path[FL_PATH_MAX + 1];   /* Uri-Path segments joined by '/' (no leading slash) */
    uint8_t path_too_long;
    uint16_t bad_option;          /* a critical option the engine does not handle, 0 = none */
    uint8_t observe;              /* an Observe option was present (fleet/observe.c) */
    /* Observe value, Block1/Block2 values (RFC 7641, RFC 7959) and a hash of the Uri-Query
     * options (an observer's identity with its path, as libcoap's cache key) */
    uint8_t has_block1, has_block2;
    uint32_t observe_val, block1, block2, query_hash;
};

/* One option of a message to build (RFC 7252 §3.1), at most 4 value bytes. */
struct fl_opt {
    uint16_t num;
    uint8_t len, v[4];
};

/* Parses a datagram. 0 = a well-formed message; -1 = a message format error (the caller
 * drops it and counts it as malformed, as wot-device/libcoap do). */
int fl_coap_parse(const uint8_t *d, size_t n, struct fl_msg *m);

/* Builds a message into out (capacity cap); the payload is `nx` bytes of 'x' (the emulated
 * representation) or, when body != NULL, body[0..nx). content_format < 0: none.
 * Returns its length, 0 when it does not fit. */
size_t fl_coap_build(uint8_t *out, size_t cap, uint8_t type, uint8_t code, uint16_t mid,
                     const uint8_t *token, uint8_t tkl, int content_format, const char *body,
                     size_t nx);

/* An option with an unsigned value in the fewest bytes (0 -> empty). */
struct fl_opt fl_opt_uint(uint16_t num, uint32_t value);

/* fl_coap_build with options (opts[0..nopts) in ascending number order) and `nx` bytes of
 * 'x' as the payload. Returns its length, 0 when it does not fit. */
size_t fl_coap_build_opts(uint8_t *out, size_t cap, uint8_t type, uint8_t code, uint16_t mid,
                          const uint8_t *token, uint8_t tkl, const struct fl_opt *opts,
                          int nopts, size_t nx);
/* the same with `body` (nx bytes; NULL: 'x') as the payload */
size_t fl_coap_build_opts_body(uint8_t *out, size_t cap, uint8_t type, uint8_t code,
                               uint16_t mid, const uint8_t *token, uint8_t tkl,
                               const struct fl_opt *opts, int nopts, const char *body,
                               size_t nx);

#endif
