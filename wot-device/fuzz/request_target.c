/* request_target.c - libFuzzer target: wot-device's request path. Each input is one datagram
 * sent to an in-process device (unit/device_inproc.c: libcoap's parser, then the device's
 * handlers in coapio.c, observe.c and block.c on four resources: piggy-backed, block-wise,
 * separate and observable); it must be answered or dropped, never crash or trip a sanitizer.
 * Run with -close_fd_mask=2. */
#include <stdint.h>
#include <stdlib.h>

#include "../unit/device_inproc.h"

#define RESOURCES                                                                               \
    "path,service_time_us,mode,payload_bytes,notify_dist,notify_mean_us,notify_jitter_us,"       \
    "notify_service_us,notify_type,max_age_s\n"                                                  \
    "r0,0,sleep,8,none,0,0,0,non,0\nbig,0,sleep,3000,none,0,0,0,non,0\n"                         \
    "slow,1,sleep,2,none,0,0,0,non,0\nobs,0,sleep,4,exponential,1000000,0,0,con,60\n"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    if (inproc_start(RESOURCES, RESP_AUTO))
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static uint8_t out[2048];
    if (size > 1400) /* one datagram of the GE's size class */
        return 0;
    inproc_exchange(data, size, out, sizeof out, 0);
    return 0;
}
