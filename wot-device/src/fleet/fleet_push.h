/* fleet_push.h - device-initiated requests in wot-fleet (docs/CONTRACTS.md §3b "Push"): the
 * engine's devices are CoAP clients too, replaying the schedule the harness rendered
 * (`--push FILE`, one file for every pushing device of the engine, a `device` column first),
 * with wot-device --push's phases and outcomes (§3 "Push"):
 *   setup    one request after another per device once the harness creates DIR/push-go;
 *            DIR/push-setup.csv (every device's setup rows) once every device has finished;
 *   test     open loop at start + at_us, start = the CLOCK_MONOTONIC ns in DIR/push-start;
 *            each send is a timer of the device's loop (a min-heap of the pushing devices,
 *            keyed on each one's next instant, behind the loop's one timerfd);
 *   teardown one after another per device after SIGTERM, within 10 s.
 * A device sends from its own endpoint socket (the one the GE's requests reach), so the
 * server sees each device's address and port and answers there; the loop hands answers,
 * empty ACKs and RSTs of the device's own requests to this module. State exists only for
 * pushing devices and is reserved at start (rows, datagrams, heaps); a send patches a message
 * ID and a token into a pre-encoded datagram: no allocation, no file I/O on the loop. */
#ifndef WOT_FLEET_PUSH_H
#define WOT_FLEET_PUSH_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "coap_wire.h"
#include "fleet.h"

/* main thread, before the loops: parses FILE (devices already loaded). 0, or -1 after
 * printing "FILE:LINE: what, expected what" (exit 2). */
int fl_push_load(struct fleet *f, const char *file, uint64_t timeout_ns);
/* after fl_loop_init(l): l->push and the loop's pushing devices' d->push; 0 / -1 */
int fl_push_attach(struct fleet *f, struct fl_loop *l);

/* loop thread */
uint64_t fl_push_next(const struct fl_loop *l);          /* earliest push instant, 0 = none */
void fl_push_on_timers(struct fl_loop *l, uint64_t now);
void fl_push_on_ctl(struct fl_loop *l);                  /* push-go, push-start, stop seen */
/* an empty ACK/RST on device d's socket: 1 when it was for one of d's own requests */
int fl_push_on_empty(struct fl_loop *l, struct fl_device *d, const struct fl_msg *m,
                     const struct sockaddr_in *peer, uint64_t arrival, uint64_t arrival_k);
/* a response (code class 2..5) on device d's socket: the answer to one of d's requests */
void fl_push_on_response(struct fl_loop *l, struct fl_device *d, const uint8_t *dg, size_t n,
                         const struct fl_msg *m, const struct sockaddr_in *peer,
                         uint64_t arrival, uint64_t arrival_k);

/* main thread: instead of waiting for the signal. Watches DIR for push-go / push-start,
 * writes push-setup.csv when every device has finished its setup, and on SIGTERM/SIGINT
 * lets the loops run the teardown (a second signal or its budget ends it). 0 / -1. */
int fl_push_supervise(struct fleet *f, int sfd);
/* at exit, loops stopped: DIR/fleet-push.csv (0 / -1) and fleet-summary.json's "push" */
int fl_push_write(const struct fleet *f);
void fl_push_json(FILE *out, const struct fleet *f);
void fl_push_free(struct fleet *f);

#endif
