/* coap_tmpl.h - per-request values in CoAP request paths (coap_tmpl.c): a trace URI such as
 * coap://h/entities/e{{seq}} is encoded once with a fixed-width slot of zeros per value
 * (template_vars.h), and the slots' offsets into the encoded options are kept with the URI;
 * net.c fills the values known before the start into each request's datagram, the send fills
 * the clock's (udp.c), and the closed loop fills all of them into the client's copy
 * (clients.c). No allocation and no formatting of text at the send. */
#ifndef GE_COAP_TMPL_H
#define GE_COAP_TMPL_H

#include <stddef.h>
#include <stdint.h>

#include "template_vars.h"

#define COAP_TMPL_MAX 8 /* values in one URI */

typedef struct {
    size_t n;
    tv_slot_t slot[COAP_TMPL_MAX]; /* off: into the rendered URI string (coap_tmpl_render) */
    size_t path_off, path_len;    /* the template's path (after "host[:port]/", before '?') */
} coap_tmpl_t;

/* renders uri into out (cap bytes) with each {{value}} as its width of zeros; 0 no value in it,
 * 1 rendered (t filled), -1 refused (why set: an unknown name, a value outside the path, a
 * percent-escape in a templated path, too many values) */
int coap_tmpl_render(const char *uri, char *out, size_t cap, coap_tmpl_t *t, const char **why,
                     char *name, size_t namecap);
/* maps t's slots to offsets into opts (the encoded options: the k-th path segment is the k-th
 * Uri-Path option) and writes them to out (n of them); 0 ok, -1 not found */
int coap_tmpl_locate(const coap_tmpl_t *t, const char *rendered, const uint8_t *opts,
                     size_t optlen, tv_slot_t *out);


/* which slots coap_tmpl_fill writes: those known before the start (seq, client, rand), the
 * clock's (time_ms, time_ns), or all */
enum { TV_EARLY = 1, TV_CLOCK = 2, TV_ALL = 3 };
/* writes the values into a datagram (slots: offsets into its options, after the 12 bytes of
 * header and token) */
void coap_tmpl_fill(uint8_t *dgram, const tv_slot_t *s, size_t n, const tv_values_t *v,
                    int which);
int tv_is_clock(int kind);

#endif
