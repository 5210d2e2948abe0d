/* dgram.h - reading datagrams for the datagram transports (UDP, DTLS): recvmmsg() batches with
 * kernel receive stamps, and the endpoint a datagram came from (dgram.c). */
#ifndef GE_DGRAM_H
#define GE_DGRAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "clock.h" /* common/clock.h */
#include "ge.h"

#define DGRAM_MAX 4096 /* receive buffer per datagram */

typedef struct dgram_rx dgram_rx_t;

/* one datagram from a known endpoint `ep` on socket index `sock`: t = when the loop read it,
 * kt = the kernel's receive stamp in CLOCK_MONOTONIC (0 = none) */
typedef void (*dgram_fn)(void *ctx, int sock, int ep, const uint8_t *d, size_t len,
                         const struct sockaddr_storage *src, socklen_t srclen, int64_t t,
                         int64_t kt);

/* before the loop: buffers and the endpoint hash; NULL with errno set */
dgram_rx_t *dgram_rx_new(const ge_t *g, const clock_map_t *cmap);
void dgram_rx_free(dgram_rx_t *rx);
/* read everything queued on g->socks[sock] in batches, each datagram from a known endpoint to
 * fn (others are dropped); returns datagrams read */
int dgram_drain(dgram_rx_t *rx, int sock, dgram_fn fn, void *ctx);

#endif
