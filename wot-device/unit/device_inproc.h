/* device_inproc.h - a wot-device request path in this process (unit tests, fuzz targets):
 * the device's resources and handlers (coapio_attach) on a libcoap context bound to
 * 127.0.0.1, a client socket, and one call that sends a datagram and lets the device handle
 * it, as its I/O loop would. */
#ifndef WOT_DEVICE_INPROC_H
#define WOT_DEVICE_INPROC_H
#include <stddef.h>
#include <stdint.h>

#include "../src/coapio.h"

/* resource file text -> a listening device; 0 ok, -1 (message printed) */
int inproc_start(const char *resources_csv, enum response_mode mode);
/* sends d[0..n) to the device, runs its request path and the completions of its workers
 * (waiting up to wait_ms for a separate response); the first answer lands in out (cap
 * bytes); returns its length, 0 = no answer */
size_t inproc_exchange(const uint8_t *d, size_t n, uint8_t *out, size_t cap, int wait_ms);
const struct counters *inproc_counters(void);
void inproc_stop(void);
#endif
