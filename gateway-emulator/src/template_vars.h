/* template_vars.h - per-request values in HTTP templates (template_vars.c): {{seq}} {{client}}
 * {{rand}} {{time_ms}} {{time_ns}}. Before the start a template renders each of them as a slot
 * of fixed width (zeros) and notes where it is; at the send the slots of the request's prepared
 * bytes are overwritten with the request's values in the connection's own copy. Fixed widths
 * keep Content-Length and every offset constant, so the hot path formats digits into a buffer
 * sized before the start: no allocation, no parsing. */
#ifndef GE_TEMPLATE_VARS_H
#define GE_TEMPLATE_VARS_H

#include <stddef.h>
#include <stdint.h>

enum { TV_NONE = 0, TV_SEQ, TV_CLIENT, TV_RAND, TV_TIME_MS, TV_TIME_NS, TV_KINDS };

typedef struct tv_slot_s {
    uint32_t off; /* from the first byte of the request */
    uint8_t kind; /* TV_* */
} tv_slot_t;

/* where a template rendering notes its slots (NULL: it only measures or renders zeros) */
typedef struct tv_list_s {
    tv_slot_t *slot;
    size_t n, cap;
} tv_list_t;

typedef struct {
    uint32_t seq;     /* the request's row of requests.csv (its record index) */
    uint32_t client;  /* closed loop: the client; open loop: the connection that carried it */
    uint64_t seed;    /* --seed: {{rand}} = a hash of (seed, seq) */
    int64_t wall_ns;  /* CLOCK_REALTIME at the send */
} tv_values_t;

int tv_kind(const char *name, size_t len); /* TV_NONE when it is not a per-request value */
unsigned tv_width(int kind);              /* digits written for it */
const char *tv_names(void);               /* "{{seq}} {{client}} ..." for messages */
/* appends a slot at off (the list grows before the start only); 0 ok, -1 no memory */
int tv_note(tv_list_t *l, uint32_t off, int kind);
/* overwrites the n slots of buf (a copy of the prepared request) with v */
void tv_fill(uint8_t *buf, const tv_slot_t *s, size_t n, const tv_values_t *v);
/* {{rand}}'s value: splitmix64 of seed and seq (deterministic per run seed) */
uint64_t tv_rand(uint64_t seed, uint32_t seq);

#endif
