/* template_vars.c - per-request values in HTTP templates (template_vars.h). Widths: {{seq}} 10
 * decimal digits (a uint32 record index), {{client}} 5 (at most 60,000 clients), {{rand}} 16
 * hex digits, {{time_ms}} 13 and {{time_ns}} 19 decimal digits (Unix epoch, valid until 2286),
 * each zero-padded so that a value never changes the request's length. */
#include <stdlib.h>
#include <string.h>

#include "template_vars.h"

static const char *const NAME[TV_KINDS] = {"", "seq", "client", "rand", "time_ms", "time_ns"};
static const unsigned WIDTH[TV_KINDS] = {0, 10, 5, 16, 13, 19};

int tv_kind(const char *name, size_t len) {
    for (int k = 1; k < TV_KINDS; k++)
        if (len == strlen(NAME[k]) && !strncmp(name, NAME[k], len))
            return k;
    return TV_NONE;
}

unsigned tv_width(int kind) { return kind > 0 && kind < TV_KINDS ? WIDTH[kind] : 0; }

const char *tv_names(void) { return "{{seq}} {{client}} {{rand}} {{time_ms}} {{time_ns}}"; }

int tv_note(tv_list_t *l, uint32_t off, int kind) {
    if (l->n == SIZE_MAX) /* an earlier note failed */
        return -1;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        tv_slot_t *s = realloc(l->slot, cap * sizeof *s);
        if (!s)
            return -1;
        l->slot = s;
        l->cap = cap;
    }
    l->slot[l->n++] = (tv_slot_t){off, (uint8_t)kind};
    return 0;
}

uint64_t tv_rand(uint64_t seed, uint32_t seq) {
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * ((uint64_t)seq + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* the low `width` decimal digits of x, right-aligned (zero-padded) */
static void put_dec(uint8_t *p, unsigned width, uint64_t x) {
    for (unsigned i = width; i-- > 0; x /= 10)
        p[i] = (uint8_t)('0' + x % 10);
}

static void put_hex(uint8_t *p, unsigned width, uint64_t x) {
    static const char HEX[] = "0123456789abcdef";
    for (unsigned i = width; i-- > 0; x >>= 4)
        p[i] = (uint8_t)HEX[x & 15];
}

void tv_fill(uint8_t *buf, const tv_slot_t *s, size_t n, const tv_values_t *v) {
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = buf + s[i].off;
        switch (s[i].kind) {
        case TV_SEQ: put_dec(p, WIDTH[TV_SEQ], v->seq); break;
        case TV_CLIENT: put_dec(p, WIDTH[TV_CLIENT], v->client); break;
        case TV_RAND: put_hex(p, WIDTH[TV_RAND], tv_rand(v->seed, v->seq)); break;
        case TV_TIME_MS: put_dec(p, WIDTH[TV_TIME_MS], (uint64_t)(v->wall_ns / 1000000)); break;
        case TV_TIME_NS: put_dec(p, WIDTH[TV_TIME_NS], (uint64_t)v->wall_ns); break;
        default: break;
        }
    }
}
