/* pace.h - the closed loop's clients, whatever the wire (pace.c): when each of N virtual
 * clients issues its next request (think time after the previous outcome, --think), to which of
 * the trace's lines (--select), until --duration-ms; the trace's lines as templates and the
 * preallocated record table. Used by clients.c (CoAP over UDP) and http_clients.c (HTTP over
 * TCP), which own only their sockets and bytes. No allocation after pace_attach(). */
#ifndef GE_PACE_H
#define GE_PACE_H

#include <stdint.h>
#include <stdio.h>

#include "ge.h"
#include "transport.h"

#define PACE_NONE UINT32_MAX

typedef struct {
    uint16_t ep;
    uint32_t device, path_id;
    uint8_t method;
} pace_tmpl_t; /* a trace line: what a request to it records */

typedef struct {
    int64_t due;  /* absolute mono ns of its next request (while idle, in the heap) */
    uint32_t cur; /* its request in flight, PACE_NONE when idle */
    uint32_t next_tmpl;
    uint32_t issued; /* its requests so far (--requests-per-client) */
} pace_client_t;

typedef struct {
    ge_t *g;
    loop_t *L;
    pace_tmpl_t *tmpl;
    size_t ntmpl;
    pace_client_t *c;
    uint32_t *heap; /* idle clients, min-heap on due */
    size_t heap_n;
    uint64_t rng;
    int64_t end; /* absolute: no request issued at or after it */
    int running;
} pace_t;

/* main thread, in the transport's prepare(): the trace's lines become templates (copied; the
 * transport renders its bytes from the trace before), then g->reqs becomes the reserved table
 * of --max-requests records; 0 ok, 1 env failure (said) */
int pace_prepare(pace_t *P, ge_t *g);
/* the template client k issues first (round robin: k % ntmpl), to open its connection early */
uint32_t pace_first_tmpl(const pace_t *P, uint32_t k);
/* loop setup: clients' state, every client due at the start (after a think time); 0 / -1 */
int pace_attach(pace_t *P, loop_t *L);
void pace_detach(pace_t *P);

/* the transport's send: request r (a new record, common fields filled: sched_ns, device,
 * path_id, method, ep, sock = client) from client k to template tmpl; it marks it sent
 * (loop_mark_sent) or ends it (loop_finish) */
typedef void (*pace_send_fn)(void *ctx, uint32_t k, req_t *r, uint32_t tmpl);
/* every idle client whose think time is over issues its next request */
void pace_issue_due(pace_t *P, int64_t now, pace_send_fn send, void *ctx);
/* when pace_issue_due next has work (within d) */
int64_t pace_next_deadline(const pace_t *P, int64_t d);
/* the client's request idx ended (the transport's on_finish): it thinks from the outcome's
 * arrival (the response's kernel stamp when there is one), then goes again; 1 if idx was the
 * client's request in flight, 0 when the client has moved on already */
int pace_finished(pace_t *P, uint32_t idx, int outcome, int64_t now);
/* the client whose request idx is in flight, or PACE_NONE */
static inline uint32_t pace_client_of(const pace_t *P, uint32_t idx) {
    uint32_t k = P->g->reqs[idx].sock;
    return P->c[k].cur == idx ? k : PACE_NONE;
}

/* summary.json "closed_loop" */
void pace_summary(const ge_t *g, size_t ntmpl, FILE *f);
/* requests.csv sent_ns */
int64_t pace_sent_ns(const ge_t *g, uint32_t idx);

#endif
