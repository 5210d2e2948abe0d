/* service.h - service-time emulation (sleep: wall-clock wait; busy: fixed CPU work). */
#ifndef WOT_SERVICE_H
#define WOT_SERVICE_H
#include <stdint.h>
#include "clock.h" /* common/clock.h: mono_ns() */
#include "resources.h"

/* Sleep with an absolute CLOCK_MONOTONIC deadline up to SERVICE_SPIN_NS before it, then spin. */
#define SERVICE_SPIN_NS 200000ULL

/* Call once in each worker thread: 1 ns timer slack. */
void service_thread_init(void);
/* Emulates one service of duration ns in the given mode; start is the CLOCK_MONOTONIC
 * instant the service began (used as the base for sleep mode). */
void service_run(enum svc_mode mode, uint64_t ns, uint64_t start);

#endif
