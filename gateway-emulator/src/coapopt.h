/* coapopt.h - CoAP option encoding shared by trace.c and proxy.c (coapopt.c). */
#ifndef GE_COAPOPT_H
#define GE_COAPOPT_H

#include <stddef.h>
#include <stdint.h>

/* append option `num` (after option *last) to buf[*len..cap); 0 ok, -1 does not fit */
int put_opt(uint8_t *buf, size_t cap, size_t *len, uint16_t *last, uint16_t num,
            const uint8_t *val, size_t vlen);
/* the segments coap_split_path/coap_split_query wrote, each as option `num`; 0 ok, -1 */
int put_segments(uint8_t *buf, size_t cap, size_t *len, uint16_t *last, uint16_t num,
                 const uint8_t *segs, size_t seglen);

#endif
