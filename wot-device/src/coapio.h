/* coapio.h - the CoAP I/O thread: the only thread that calls libcoap. */
#ifndef WOT_COAPIO_H
#define WOT_COAPIO_H
#include <stddef.h>
#include <stdint.h>
#include "devlog.h"
#include "resources.h"
#include "workq.h"

enum response_mode { RESP_AUTO = 0, RESP_PIGGYBACK, RESP_SEPARATE };

struct device {
    const struct resource_set *rs;
    struct workq *wq;
    struct devlog *log;
    struct counters c;
    const char *listen;         /* ADDR[:PORT] */
    const char *log_dir;        /* <log_dir>/ready is created once the endpoint listens */
    unsigned nstart;            /* NSTART for server sessions (separate CON responses) */
    enum response_mode response;
    uint64_t piggyback_max_ns;  /* auto: piggy-back resources with service_ns <= this */
};

/* Runs the CoAP server until SIGTERM/SIGINT (which must be blocked in all threads).
 * Returns 0 on a signal, 1 on an environment failure (message printed), 2 on a bad address. */
int coapio_run(struct device *d);

/* The request path without the loop, for the in-process tests and the fuzz target
 * (wot-device/unit, wot-device/fuzz): the device's resources, handlers and block-wise bodies
 * on a context the caller made and polls (coap_io_process). 0 ok, 1 out of memory. */
struct coap_context_t;
int coapio_attach(struct device *d, struct coap_context_t *ctx);

#endif
