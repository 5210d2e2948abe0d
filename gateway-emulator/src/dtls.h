/* dtls.h - DTLS 1.2 PSK client sessions of the GE (coaps://; see README "DTLS").
 *
 * The GE keeps its own sockets and its send loop. Every session is an OpenSSL SSL object whose
 * BIO writes straight to the GE's UDP socket (sendto to the session's endpoint) and reads the one
 * datagram the loop hands it, so record boundaries are datagram boundaries and nothing is
 * copied through a memory BIO. Sessions: one per (socket, endpoint) pair handshaken before the
 * start (--dtls-sessions reuse), or one per request from a pool of slots with their own source
 * ports (per-request: a handshake storm on the schedule). */
#ifndef GE_DTLS_H
#define GE_DTLS_H

#include <stddef.h>
#include <stdint.h>

#include "ge.h"

enum { DTLS_REUSE = 0, DTLS_PER_REQUEST = 1 };

/* dtls_input() results besides a plaintext length > 0 */
enum { DTLS_NONE = 0, DTLS_READY = -2, DTLS_FAILED = -3 };

/* CLI: validate the options and read the key file; 0 ok, 2 bad input (message printed) */
int dtls_options(ge_t *g);
/* after net_prepare/observe_prepare: OpenSSL context, sessions or slots (with their sockets
 * appended to g->socks); 0 ok, 1 environment failure, 2 bad input */
int dtls_prepare(ge_t *g);
/* before the start: reuse -> handshake every session (bounded), per-request -> one handshake
 * per endpoint as readiness check when g->warmup_ns; writes warmup.json when g->warmup_ns.
 * 0 ok, 1 environment failure (cannot write warmup.json) */
int dtls_open_sessions(ge_t *g);

/* ---- send loop (no allocation of ours; OpenSSL's own is measured, README) ---- */
/* the session a datagram on socket `sock` from endpoint `ep` belongs to, or -1 */
int dtls_session_of(const ge_t *g, int sock, int ep);
/* feed one received datagram (d != NULL) or fetch the next record of it (d == NULL): a
 * plaintext length > 0 (in out), DTLS_NONE, DTLS_READY (handshake done: send the waiting
 * request, dtls_waiting()) or DTLS_FAILED (handshake failed: finish the waiting request) */
int dtls_input(ge_t *g, int s, const uint8_t *d, size_t len, uint8_t *out, size_t cap,
               int64_t now);
/* per-request: the request waiting for / using session s, or -1 */
int64_t dtls_waiting(const ge_t *g, int s);
/* encrypt and send request idx's datagram (first copy, retransmission or block follow-up):
 * 1 sent (*t = mono ns right before its sendto), 0 no usable session (request -> error),
 * -1 sendto failed (errno) */
int dtls_send_req(ge_t *g, uint32_t idx, int64_t *t);
/* per-request: start request idx's session (ClientHello); 1 started (*t as above), 0 no free
 * slot (request -> error), -1 sendto failed */
int dtls_start_req(ge_t *g, uint32_t idx, int64_t *t);
/* a short plaintext (empty ACK / RST) to endpoint ep over the session of socket sock */
void dtls_send_plain(ge_t *g, int sock, int ep, const uint8_t *m, size_t len);
/* the loop finishes request idx with `outcome`: releases a per-request session (close_notify)
 * and returns the outcome to record (error when its handshake never completed) */
int dtls_on_finish(ge_t *g, uint32_t idx, int outcome, int64_t now);
/* DTLS handshake retransmission timers; cheap when nothing is due */
void dtls_timers(ge_t *g, int64_t now);
int64_t dtls_next_timer(const ge_t *g); /* when dtls_timers() next has work, INT64_MAX none */
/* the request index of per-request slot socket `sock` (empty ACK / RST matching), else -1 */
int64_t dtls_req_of_sock(const ge_t *g, int sock);

/* ---- outputs ---- */
int64_t dtls_app_sent_ns(const ge_t *g, uint32_t idx); /* requests.csv sent_ns in per-request */
int dtls_write(const ge_t *g); /* handshakes.csv; 0 ok, 1 failure */
void dtls_summary(const ge_t *g, void *file); /* the "dtls" member of summary.json (FILE *) */

#endif
