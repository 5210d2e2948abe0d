/* push_int.h - what the push_*.c files share (push.h is the interface). */
#ifndef WOT_PUSH_INT_H
#define WOT_PUSH_INT_H
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define PUSH_MAX_TARGETS 64
#define PUSH_MAX_OPS 64
#define PUSH_MAX_PAYLOAD 1024      /* one datagram: no block-wise transfer for pushes */
#define PUSH_MAX_DGRAM 1280
#define PUSH_TKL 8
#define PUSH_LOCATION "@location"  /* a path that is the Location of the first setup answer */

enum push_phase { PH_SETUP = 0, PH_TEST, PH_TEARDOWN };
enum push_outcome { OUT_NONE = 0, OUT_OK, OUT_ERROR, OUT_TIMEOUT, OUT_RESET, OUT_UNSENT };

struct push_target {
    struct sockaddr_storage sa;
    socklen_t len;
};

struct push_row {
    uint64_t at_ns;        /* test: offset from the start; setup/teardown: 0 */
    uint64_t due_ns;       /* absolute due instant, set when the row is armed */
    uint64_t sent_ns, recv_ns, recv_k_ns;  /* absolute, 0 = none */
    uint64_t retx_ns;      /* a retransmitted CON: the next retransmission (RFC 7252 §4.2) */
    char *path;            /* as in the schedule (may start with @location) */
    uint8_t *payload;
    uint32_t payload_len;
    uint32_t dg_off, dg_len;   /* the encoded datagram in push.dg (0 length: not yet built) */
    int32_t content_format;    /* -1 = none */
    uint16_t mid;
    uint8_t code, outcome, phase, method, con, acked, target, op, retx;
    uint8_t retransmit;    /* test CON: retransmitted too (schedule column `retransmit` 1) */
};

struct push_state {
    struct push_row *rows;
    size_t n, n_setup, n_test;           /* rows: setup, then test (by time), then teardown */
    uint8_t *dg;                          /* encoded datagrams */
    size_t dg_cap, dg_used;
    struct push_target targets[PUSH_MAX_TARGETS];
    char target_text[PUSH_MAX_TARGETS][64];
    int n_targets;
    char *ops[PUSH_MAX_OPS];
    int n_ops;
    unsigned id;
    uint64_t timeout_ns;
    /* Location of the first setup answer that carried one: raw Location-Path/-Query values */
    char location[520];    /* "path?query", each part at most 255 bytes */
    int have_location;
    /* test rows with `retransmit`: a min-heap of row indices on retx_ns, sized at load (one
     * entry per such row at most), so a send or retransmission never allocates */
    uint32_t *rtx_heap;
    size_t rtx_n, rtx_cap;
};

extern struct push_state P;

/* push_rtx.c: the heap of test rows awaiting a retransmission, earliest retx_ns first */
void push_rtx_push(uint32_t row);
int push_rtx_top(uint32_t *row);   /* 0 when empty */
void push_rtx_pop(void);

/* push_coap.c: encodes row r into P.dg (uses P.location for @location paths); 0 / -1 */
int push_encode(struct push_row *r);
/* the rendered path of a row (the location substituted), for the log */
void push_row_path(const struct push_row *r, char *out, size_t cap);
/* parses a received datagram's header; returns 0 when it is a CoAP message */
struct push_msg {
    uint8_t type, tkl, code;
    uint16_t mid;
    const uint8_t *token;
    const uint8_t *opts;   /* options and payload */
    size_t opts_len;
};
int push_parse(const uint8_t *d, size_t len, struct push_msg *m);
/* copies a response's Location-Path/Location-Query into P.location ("a/b?x=1&y=2") */
void push_take_location(const struct push_msg *m);

#endif
