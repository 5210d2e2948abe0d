/* push_int.h - what the fleet push_*.c files share (fleet_push.h is the interface). */
#ifndef WOT_FLEET_PUSH_INT_H
#define WOT_FLEET_PUSH_INT_H
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "fleet_push.h"

#define FLP_MAX_TARGETS 64
#define FLP_MAX_OPS 64
#define FLP_MAX_PAYLOAD 1024       /* one datagram: no block-wise transfer for pushes */
#define FLP_MAX_DGRAM 1280         /* a request: header, token, 255-byte path, options, payload */
#define FLP_TKL 8
#define FLP_LOCATION "@location"   /* a path that is the Location of the device's setup answer */
#define FLP_LOC_MAX 520            /* "path?query", each part at most 255 bytes */

enum flp_phase { FLP_SETUP = 0, FLP_TEST, FLP_TEARDOWN };
enum flp_outcome { FLO_NONE = 0, FLO_OK, FLO_ERROR, FLO_TIMEOUT, FLO_RESET, FLO_UNSENT };
enum flp_flag { FLF_CON = 1, FLF_RETRANSMIT = 2, FLF_LOCATION = 4, FLF_READY = 8, FLF_ACKED = 16 };
enum flp_state { FLS_IDLE = 0, FLS_SETUP, FLS_WAIT, FLS_TEST, FLS_TEARDOWN, FLS_DONE };

/* One schedule row. The datagram is encoded at load into P->dg (message ID and token zero),
 * except an @location row's: P->dg then holds its template (flp_template) and the loop encodes
 * it into its own arena once the device's setup answer named the location (FLF_READY). */
struct flp_row {
    uint64_t at_ns;        /* test: offset from the start */
    uint64_t due_ns;       /* absolute: when it became due (test: start + at_ns) */
    uint64_t sent_ns, recv_ns, recv_k_ns;   /* absolute, 0 = none */
    uint64_t retx_ns;      /* a retransmitted CON: its next retransmission (RFC 7252 §4.2) */
    uint32_t dg_off;       /* in P->dg: the datagram, or an @location row's template */
    uint32_t ldg_off;      /* in the loop's location arena: an @location row's datagram */
    uint16_t dg_len, mid;
    uint8_t code, outcome, phase, method, flags, target, op, retx;
};

/* A pushing device: its rows are P->rows[first .. first + n) (setup, test, teardown). */
struct flp_dev {
    struct fl_device *d;
    uint32_t first, n, n_setup, n_test;
    uint32_t next, oldest;     /* relative: next row to send, lowest row maybe open */
    uint32_t heap_pos;         /* in its loop's heap, FL_NIL = not there */
    uint64_t wake;             /* its next instant (0 = none) */
    uint64_t teardown_end;
    uint32_t salt_hi, salt_lo; /* token = salt_hi | salt_lo ^ row: answers find their row */
    uint32_t loc_off;          /* the location text in the loop's arena */
    uint16_t loc_len, mid;
    uint8_t state, setup_ok, have_location, stopping;
};

/* The engine's push state (main thread builds it; each loop owns its devices' part). */
struct fl_push {
    struct flp_row *rows;
    size_t nrows;
    uint8_t *dg;
    size_t dg_cap, dg_used;
    struct flp_dev *devs;      /* in device-table order, so each loop's are contiguous */
    uint32_t ndevs;
    struct sockaddr_in targets[FLP_MAX_TARGETS];
    int ntargets;
    char *ops[FLP_MAX_OPS];
    int nops;
    uint64_t timeout_ns;
    uint64_t setup_begin_ns;   /* push-go seen (main) */
    /* main -> loops, read with acquire */
    int go, stop;
    uint64_t start_ns;         /* push-start's value, 0 until read */
    size_t setup_rows;         /* every device's setup rows */
};

/* One loop's pushing devices. */
struct fl_push_loop {
    struct fl_push *P;
    struct flp_dev *devs;
    uint32_t ndevs;
    uint32_t *heap;            /* indices into devs, min-heap on wake */
    uint32_t hn;
    uint8_t *loc;              /* @location datagrams and location texts (reserved) */
    size_t loc_cap, loc_used;
    int seen_go, seen_stop;
    uint64_t base_ns;          /* the test start once seen */
    uint32_t setup_left, active;   /* devices still in their setup / not done */
    int setup_done, done;      /* loop -> main, written with release */
    uint64_t late_acks, send_errors, retransmissions, loc_overflow;
};

/* push_wire.c: the CoAP bytes of a push request and what is read of an answer */
size_t flp_encode(uint8_t *out, size_t cap, int con, uint8_t method, const char *path,
                  int32_t content_format, const uint8_t *payload, size_t plen);
/* the request URI "a/b?x=1&y=2" of an encoded datagram (for the log) */
void flp_uri_of(const uint8_t *dg, size_t n, char *out, size_t cap);
/* Location-Path / Location-Query of a response as "a/b?x=1"; its length, 0 = none */
size_t flp_location_of(const uint8_t *dg, size_t n, char *out, size_t cap);
/* "@location?x" with the location "reg/1" -> "reg/1?x" (a location query joins with &) */
void flp_join_location(const char *loc, size_t loc_len, const char *suffix, char *out,
                       size_t cap);

/* An @location row's template in P->dg: the suffix after "@location", its content format
 * and payload, read back by flp_template_get. */
struct flp_template {
    const char *suffix;
    int32_t content_format;
    const uint8_t *payload;
    uint16_t plen;
};
size_t flp_template_put(uint8_t *out, size_t cap, const char *suffix, int32_t cf,
                        const uint8_t *payload, size_t plen);
void flp_template_get(const uint8_t *in, struct flp_template *t);

/* push_run.c */
uint64_t flp_base_ns(const struct fl_push *P);
/* push_out.c: every device's setup rows (main thread, once every loop has finished them) */
int flp_write_setup(const struct fleet *f);
void flp_row_path(const struct fl_push_loop *pl, const struct flp_dev *pd,
                  const struct flp_row *r, char *out, size_t cap);

#endif
