/* fleet_coap_target.c - libFuzzer target: wot-fleet's datagram parser (fleet/coap_wire.c).
 * Any bytes: fl_coap_parse returns 0 or -1 and leaves a NUL-terminated path within
 * FL_PATH_MAX; an accepted message's fields match its header; a reply built from it fits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/fleet/coap_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct fl_msg m;
    int rc = fl_coap_parse(data, size, &m);
    if (rc != 0 && rc != -1)
        abort();
    if (rc == -1)
        return 0;
    if (size < 4 || m.tkl > 8 || m.type != ((data[0] >> 4) & 3) || m.code != data[1] ||
        m.mid != (uint16_t)(data[2] << 8 | data[3]) || m.token != data + 4)
        abort();
    if (memchr(m.path, '\0', sizeof m.path) == NULL)
        abort();
    uint8_t out[64 + FL_PATH_MAX];
    size_t n = fl_coap_build(out, sizeof out, FL_ACK, FL_CONTENT, m.mid, m.token, m.tkl, 0, NULL, 8);
    struct fl_msg back;
    if (!n || fl_coap_parse(out, n, &back) != 0 || back.mid != m.mid || back.tkl != m.tkl ||
        memcmp(back.token, m.token, m.tkl) != 0)
        abort(); /* the engine's own reply must parse back */
    return 0;
}
