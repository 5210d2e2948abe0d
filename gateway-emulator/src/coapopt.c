/* coapopt.c - CoAP option encoding for the prepared datagrams (trace.c) and the proxy options
 * (proxy.c): a leaf, so neither of them needs the other. Load time only. */
#include <coap3/coap.h>

#include "coapopt.h"

/* append option number `num` (given the previous number *last) with libcoap's encoder */
int put_opt(uint8_t *buf, size_t cap, size_t *len, uint16_t *last, uint16_t num,
            const uint8_t *val, size_t vlen) {
    size_t w = coap_opt_encode((coap_opt_t *)(buf + *len), cap - *len, (uint16_t)(num - *last), val,
                               vlen);
    if (w == 0)
        return -1;
    *len += w;
    *last = num;
    return 0;
}

/* coap_split_path/query write segments as options with delta 0; re-encode with option number */
int put_segments(uint8_t *buf, size_t cap, size_t *len, uint16_t *last, uint16_t num,
                 const uint8_t *segs, size_t seglen) {
    size_t off = 0;
    while (off < seglen) {
        const coap_opt_t *o = (const coap_opt_t *)(segs + off);
        size_t sz = coap_opt_size(o);
        if (sz == 0)
            return -1;
        if (put_opt(buf, cap, len, last, num, coap_opt_value(o), coap_opt_length(o)) < 0)
            return -1;
        off += sz;
    }
    return 0;
}
