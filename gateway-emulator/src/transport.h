/* transport.h - the seam between the send loop (loop.c) and the wire.
 *
 * Like wrk2's `struct sock` table, one `struct transport` is chosen ONCE for the run's target
 * from its URI scheme (transport_select: coap:// -> transport_udp, coaps:// -> transport_dtls)
 * and kept in ge_t.tp; the loop calls only through it, so loop.c has no protocol branches.
 *
 * Division of work:
 *  - the loop (protocol-free) owns the schedule (request i is due at sched_ns, index order), the
 *    one epoll set and the wait (busy / hybrid), the overall --timeout-ms deadline counted from
 *    each request's first transmission (send order), outcomes and progress.bin, the clock map
 *    for kernel receive stamps, and the interrupt accounting;
 *  - a transport owns its file descriptors (it registers them with loop_watch(), with a tag of
 *    its choice handed back to on_event(); EPOLLOUT interest is allowed, loop_rewatch() changes
 *    it), its protocol state and its own timers (the loop sleeps until the earliest of its
 *    deadline and next_deadline(), then calls timers()). It reports back through the loop
 *    services below: loop_finish() ends a request, and a due request whose send() returns 1
 *    is marked sent at *t.
 *  - UDP and DTLS share the CoAP message layer over datagrams (coapx.h: response matching,
 *    empty ACK/RST, RFC 7252 retransmission, Observe and block-wise follow-ups) and the
 *    recvmmsg() batch reader (dgram.h); they differ only in how bytes leave and arrive.
 *
 * Meant to accept, without changes to the loop's core:
 *  - HTTP/1.1 over TCP (done: http_*.c): attach() opens its connection pool and watches each connection for
 *    EPOLLIN (partial reads kept per connection) and, while a write is pending, EPOLLOUT;
 *    send() writes into a free connection (or queues the request, see below); it parses
 *    responses itself and calls loop_finish(); keep-alive/connect timers are its timers().
 *  - closed-loop virtual clients (done: clients.c over UDP, http_clients.c over TCP, both paced
 *    by pace.c), each with its own socket (>= 10,000 fds):
 *    prepare() opens them all, attach() watches them (epoll scales with ready fds, not with
 *    watched ones), per-client state preallocated, no allocation per request; a client issues
 *    its next request from on_event()/timers() through loop_new_request(), and running() keeps
 *    the loop going while the clients still issue.
 *  A request that cannot leave at its instant (HTTP: every connection of its target busy) is
 *  taken over by the transport (send() returns 2), which marks it sent (loop_mark_sent) or
 *  finishes it later; its timeout then counts from its scheduled instant
 *  (timeout_from_schedule), so the loop's timeout cursor stays in index order.
 *
 * Hot-path rules for every op called on the loop thread: no allocation of ours, no logging,
 * times from CLOCK_MONOTONIC in ns (common/clock.h). */
#ifndef GE_TRANSPORT_H
#define GE_TRANSPORT_H

#include <stdint.h>
#include <stdio.h>

#include "clock.h" /* common/clock.h: clock_map_t */
#include "ge.h"

typedef struct loop_s loop_t;


struct transport {
    const char *name;
    int epoll_only; /* its fds need epoll's EPOLLOUT/EPOLLERR reports: never read them directly */
    /* --timeout-ms counts from the scheduled send (HTTP, as wrk2: a request queued for a
     * connection is charged its wait), else from the first transmission */
    int timeout_from_schedule;
    /* ---- main thread, before the loop (may allocate, print, write files) ---- */
    int (*prepare)(ge_t *g);  /* after net_prepare/observe_prepare: state, extra sockets; 0/1/2 */
    int (*prestart)(ge_t *g); /* readiness before the start instant (warm-up, handshakes); 0/1 */
    /* loop setup: preallocate, register fds with loop_watch(); the state handed to every op
     * below, or NULL with errno set */
    void *(*attach)(loop_t *L, ge_t *g);
    /* ---- loop thread ---- */
    /* first transmission of due request idx: 1 sent (*t = mono ns right before its first
     * byte left), 0 cannot be sent (-> error, not sent), -1 failed with errno (EAGAIN/ENOBUFS/
     * EINTR: the loop reads what arrived and tries again, briefly), 2 taken over: the transport
     * queued it (HTTP: no free connection) and marks it sent / finishes it itself later */
    int (*send)(void *ts, uint32_t idx, int64_t *t);
    void (*on_event)(void *ts, uint32_t tag, uint32_t events); /* a watched fd is ready */
    void (*timers)(void *ts, int64_t now);                     /* its own timers that are due */
    int64_t (*next_deadline)(const void *ts); /* when timers() next has work; INT64_MAX none */
    /* the loop ends request idx with `outcome`: release what it held; returns the outcome to
     * record. NULL = nothing to do (UDP), so the plain path pays no call. */
    int (*on_finish)(void *ts, uint32_t idx, int outcome, int64_t now);
    void (*detach)(void *ts); /* after the loop: free the loop-time state */
    /* a transport that paces requests itself (closed loop, clients.c): 1 while it still issues
     * them (with loop_new_request/loop_mark_sent, from on_event()/timers()), 0 once it stopped;
     * NULL = the trace's schedule only */
    int (*running)(const void *ts);
    /* ---- after the loop (output.c) ---- */
    int64_t (*sent_ns)(const ge_t *g, uint32_t idx); /* requests.csv sent_ns; INT64_MIN none */
    void (*summary)(const ge_t *g, FILE *f);  /* its members of summary.json (may write none) */
    int (*write_outputs)(const ge_t *g);      /* its own files; 0 ok, 1 failure (said) */
};

extern const struct transport transport_udp;  /* udp.c */
extern const struct transport transport_dtls; /* dtls_transport.c */
extern const struct transport transport_closed; /* clients.c: closed-loop clients */
extern const struct transport transport_http; /* http_transport.c: HTTP/1.1 over TCP */
extern const struct transport transport_http_closed; /* http_clients.c: closed loop over HTTP */

/* transport.c: the table lookup by the trace's scheme, then its prepare(); sets g->tp.
 * 0 ok, 1 environment failure, 2 bad input (message printed) */
int transport_select(ge_t *g);

/* ---- loop services for transports (loop.c) ---- */
/* watch fd for `events` (EPOLLIN/EPOLLOUT); on_event() gets `tag`; 0 ok, -1 errno */
int loop_watch(loop_t *L, int fd, uint32_t events, uint32_t tag);
int loop_rewatch(loop_t *L, int fd, uint32_t events, uint32_t tag); /* change the interest */
void loop_finish(loop_t *L, req_t *r, int outcome); /* final outcome of a request */
size_t loop_due_count(const loop_t *L); /* requests 0..n-1 have had their send turn */
/* transport-paced requests (closed loop): the next record of g->reqs (capacity g->cap; index
 * order = send order, so the timeout cursor stays valid), zeroed and counted outstanding; NULL
 * when the table is full. The caller sends it and calls loop_mark_sent (or loop_finish). */
req_t *loop_new_request(loop_t *L);
void loop_mark_sent(loop_t *L, req_t *r, int64_t t); /* it left at t (mono ns) */
const clock_map_t *loop_clock_map(const loop_t *L); /* kernel REALTIME stamps -> MONOTONIC */

#endif
