/* impair.h - app-level network impairments (contract §3, issue 5): tc-netem semantics
 * emulated inside wot-device on the datagrams of its CoAP endpoint socket.
 *
 * The build links with -Wl,--wrap=sendmsg,--wrap=recvmsg,--wrap=epoll_ctl: libcoap's own
 * sendmsg()/recvmsg() calls on the endpoint socket pass through impair_wrap.c, which drops,
 * delays (a preallocated min-heap per direction), rate-limits, duplicates or corrupts each
 * datagram (impair_int.h lists the files). Single-threaded: only the I/O thread touches this
 * module after impair_parse(). */
#ifndef WOT_IMPAIR_H
#define WOT_IMPAIR_H
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Parses --impair SPEC, --impair-ge GE and --impair-seed N (each may be NULL). Returns 0
 * (impairment configured or none requested) or -1 after printing
 * "wot-device: --impair: <what is wrong>, expected <what>" (exit 2). */
int impair_parse(const char *spec, const char *ge, const char *seed);
/* 1 when an --impair spec was given. */
int impair_enabled(void);
/* Allocates the delay queues and seeds the random streams (after impair_parse). 0 / -1. */
int impair_init(void);
/* The endpoint socket to impair and libcoap's epoll data pointer for it (captured by the
 * epoll_ctl wrapper); -1 when it was not seen. */
int impair_set_endpoint(int fd);
void *impair_endpoint_ptr(void);
/* libcoap's epoll data pointer of any fd it registered (NULL when not seen). */
void *impair_epoll_ptr(int fd);
/* Earliest due time (CLOCK_MONOTONIC ns) of a held datagram, 0 when nothing is held. */
uint64_t impair_next_due(void);
/* Sends every held egress datagram that is due at now. */
void impair_flush_egress(uint64_t now);
/* Ingress replay: when a held request is due, makes it the next datagram the recvmsg wrapper
 * returns and returns 1; the caller then lets libcoap read the endpoint
 * (coap_io_do_epoll with EPOLLIN) and calls impair_ingress_end(). */
int impair_ingress_begin(uint64_t now);
void impair_ingress_end(void);
/* When the held datagram made current is not the endpoint's (the push client's): its bytes,
 * length, emulated arrival and source; the caller hands it to push. NULL for the endpoint's. */
const uint8_t *impair_ingress_other(size_t *len, uint64_t *arrival, const void **name,
                                    socklen_t *namelen);
/* The push client socket through the same channels (push_run.c): sendto that drops, delays,
 * duplicates or corrupts as the endpoint's sendmsg; and the ingress decision for a datagram
 * it received (1: deliver now, 0: dropped or held for impair_ingress_other). */
ssize_t impair_sendto(int fd, const void *d, size_t len, const struct sockaddr *to,
                      socklen_t tolen);
int impair_admit_in(int fd, uint8_t *d, size_t len, const struct sockaddr *from,
                    socklen_t fromlen, uint64_t arrived);
/* Writes `"impair": {...}` (or `"impair": null`) for device-summary.json. */
void impair_json(FILE *f);
void impair_free(void);

#endif
