/* dtls_int.h - what the dtls_*.c files share (not for the rest of the GE; see dtls.h):
 * the session table, handshake records, and the functions one dtls_*.c file offers another.
 * Dependencies run one way: ossl <- session <- setup/prestart/out <- transport. */
#ifndef GE_DTLS_INT_H
#define GE_DTLS_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <openssl/ssl.h>

#include "dtls.h"
#include "ge.h"

#define TIMER_SCAN_NS (10LL * NS_PER_MS) /* DTLSv1_handle_timeout scan period */

enum { S_IDLE = 0, S_HANDSHAKE, S_UP, S_FAILED };
enum { H_OK = 1, H_FAILED, H_TIMEOUT };

/* dtls_input() results besides a plaintext length > 0 */
enum { DTLS_NONE = 0, DTLS_READY = -2, DTLS_FAILED = -3 };

typedef struct {
    SSL *ssl;
    const uint8_t *in; /* the datagram being fed (bio_read hands it over once) */
    size_t in_len;
    int64_t tx_ns; /* mono ns right before the last sendto */
    int tx_errno;  /* errno of a failed sendto since the caller cleared it */
    int sock;      /* index into g->socks */
    int32_t hs;    /* handshake record, -1 = not recorded */
    int32_t hpos;  /* position in the handshaking list, -1 = not in it */
    int64_t req;   /* per-request: the request using this slot, -1 = none */
    uint16_t ep;
    uint8_t state;
    uint8_t family;
} sess_t;

typedef struct {
    int64_t start, end; /* absolute mono ns (the start instant may move after the handshakes) */
    int64_t req;        /* per-request: trace index, else -1 */
    uint32_t session, device;
    uint16_t ep;
    uint8_t outcome;
} hsrec_t;

struct dtls_s {
    SSL_CTX *ctx;
    BIO_METHOD *meth;
    int mode;
    sess_t *sess;
    size_t nsess;
    size_t slot_base; /* per-request: g->socks index of slot 0 */
    uint32_t *ring; /* per-request: free slots, oldest released first (FIFO), so a source port
                     * is reused as late as possible after its session closed */
    size_t ring_head, ring_n;
    uint32_t *hsl; /* sessions in a handshake */
    size_t nhsl;
    int64_t next_scan;
    hsrec_t *hs;
    size_t nhs, hs_cap;
    int64_t *app_sent; /* per-request: first application record, relative; INT64_MIN none */
    uint64_t slots_exhausted, closed_by_peer;
    uint64_t allocs_start, allocs_end;
    int loop_marked;
    char failure[256]; /* the first reason a handshake or session failed */
    char cipher[64];
};

/* dtls_alloc.c: OpenSSL's allocations, counted (README "Allocation") */
void dtls_alloc_count_install(void); /* before OpenSSL's first allocation */
uint64_t dtls_allocs(void);

/* dtls_ossl.c: OpenSSL glue */
extern ge_t *dtls_g; /* the one GE instance, for OpenSSL's callbacks */
int dtls_ctx_setup(struct dtls_s *D); /* DTLS 1.2 PSK context + the BIO method; 0 / -1 */
void dtls_note_failure(struct dtls_s *D, const char *fmt, const char *a); /* the first one */
void dtls_note_ssl_error(struct dtls_s *D);                                /* OpenSSL's queue */

/* dtls_session.c: sessions and per-request slots */
int dtls_sess_begin(ge_t *g, uint32_t i, int rec, int64_t rq, uint32_t device); /* ClientHello */
void dtls_sess_close(ge_t *g, uint32_t i);
void dtls_hs_end(ge_t *g, sess_t *s, int outcome, int64_t now);
void dtls_slot_release(struct dtls_s *D, uint32_t i);
uint32_t dtls_slot_take(struct dtls_s *D); /* oldest free slot, UINT32_MAX none */
int dtls_session_of(const ge_t *g, int sock, int ep); /* session of (socket, endpoint), -1 */
/* feed one received datagram (d != NULL) or fetch the next record of it (d == NULL): a
 * plaintext length > 0 (in out), DTLS_NONE, DTLS_READY (handshake done: send the waiting
 * request, dtls_waiting()) or DTLS_FAILED (handshake failed: finish the waiting request) */
int dtls_input(ge_t *g, int s, const uint8_t *d, size_t len, uint8_t *out, size_t cap,
               int64_t now);
int64_t dtls_waiting(const ge_t *g, int s); /* per-request: its request, or -1 */
/* encrypt and send request idx's datagram: 1 sent (*t = mono ns right before its sendto),
 * 0 no usable session (request -> error), -1 sendto failed (errno) */
int dtls_send_req(ge_t *g, uint32_t idx, int64_t *t);
/* per-request: start request idx's session (ClientHello); 1 started (*t), 0 no free slot */
int dtls_start_req(ge_t *g, uint32_t idx, int64_t *t);
void dtls_send_plain(ge_t *g, int sock, int ep, const uint8_t *m, size_t len);
/* the loop finishes request idx: close a per-request session; the outcome to record (error
 * when its handshake never completed) */
int dtls_on_finish(ge_t *g, uint32_t idx, int outcome, int64_t now);
void dtls_timers(ge_t *g, int64_t now); /* handshake retransmissions; cheap when none due */
int64_t dtls_next_timer(const ge_t *g); /* INT64_MAX none */
int64_t dtls_req_of_sock(const ge_t *g, int sock); /* per-request slot's request, else -1 */

/* dtls_setup.c: context, sessions or slots (with their sockets appended to g->socks);
 * 0 ok, 1 environment failure, 2 bad input */
int dtls_prepare(ge_t *g);

/* dtls_prestart.c: before the start: reuse -> handshake every session (bounded),
 * per-request -> one handshake per endpoint as readiness check when g->warmup_ns; the result
 * goes to warmup.c. 0 ok, 1 environment failure */
int dtls_open_sessions(ge_t *g);

/* dtls_out.c */
int64_t dtls_app_sent_ns(const ge_t *g, uint32_t idx); /* requests.csv sent_ns */
int dtls_write(const ge_t *g);                       /* handshakes.csv; 0 ok, 1 failure */
void dtls_summary(const ge_t *g, FILE *f);           /* the "dtls" member of summary.json */

#endif
