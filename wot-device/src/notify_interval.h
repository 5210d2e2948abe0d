/* notify_interval.h - the intervals of an observable resource's notification process
 * (resource-file notify_dist/notify_mean_us/notify_jitter_us), drawn from a caller's random
 * state: wot-device's observe.c has one, each wot-fleet loop one (fleet/observe.c). */
#ifndef WOT_NOTIFY_INTERVAL_H
#define WOT_NOTIFY_INTERVAL_H
#include <stdint.h>

#include "resources.h"

/* uniform in (0, 1), xorshift64* on *rng (never 0) */
double notify_uniform01(uint64_t *rng);
/* the next interval, ns (at least 1) */
uint64_t notify_interval_ns(const struct resource *res, uint64_t *rng);
/* the time to a process's first notification when it starts, ns: the renewal process's
 * stationary residual (U x a length-biased interval), so a window after the start holds as
 * many notifications as the rate says; U x mean (the phase alone) overcounts an exponential
 * process by its whole first interval's bias (1.5x in a test as long as the mean) */
uint64_t notify_first_ns(const struct resource *res, uint64_t *rng);

#endif
