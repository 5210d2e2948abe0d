/* push_load.c - reads the engine's push schedule (docs/CONTRACTS.md §3b "Push"):
 *   device,phase,op,at_us,method,type,target,path,content_format,payload_hex,retransmit
 * wot-device's schedule (§3 "Push") with the device's index first; one device's rows together,
 * setup, then test (at_us non-decreasing), then teardown. Every datagram is encoded here; the
 * per-device state and each loop's heap and location arena are reserved before the loops run. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>

#include "push_int.h"

#define HEADER "device,phase,op,at_us,method,type,target,path,content_format,payload_hex,retransmit"
#define NFIELDS 11
#define MAX_AT_US (1ULL << 42)

struct index_pos {
    uint32_t index, pos;
};

static int cmp_index(const void *a, const void *b) {
    uint32_t x = ((const struct index_pos *)a)->index, y = ((const struct index_pos *)b)->index;
    return (x > y) - (x < y);
}

static int cmp_dev_pos(const void *a, const void *b) {
    const struct flp_dev *x = a, *y = b;
    return (x->d > y->d) - (x->d < y->d);
}

static int target_of(struct fl_push *P, const char *t) {
    const char *c = strrchr(t, ':');
    char host[INET_ADDRSTRLEN];
    if (!c || c == t || (size_t)(c - t) >= sizeof host)
        return -1;
    memcpy(host, t, (size_t)(c - t));
    host[c - t] = '\0';
    unsigned long long port;
    struct sockaddr_in a = {.sin_family = AF_INET};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1 || csv_parse_uint(c + 1, 65535, &port) ||
        port == 0)
        return -1;
    a.sin_port = htons((uint16_t)port);
    for (int i = 0; i < P->ntargets; i++)
        if (P->targets[i].sin_addr.s_addr == a.sin_addr.s_addr && P->targets[i].sin_port == a.sin_port)
            return i;
    if (P->ntargets == FLP_MAX_TARGETS)
        return -2;
    P->targets[P->ntargets] = a;
    return P->ntargets++;
}

static int op_of(struct fl_push *P, const char *op) {
    size_t n = strlen(op);
    if (n == 0 || n > 40 || strspn(op, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                       "0123456789-_") != n)
        return -1;
    for (int i = 0; i < P->nops; i++)
        if (!strcmp(P->ops[i], op))
            return i;
    if (P->nops == FLP_MAX_OPS)
        return -2;
    P->ops[P->nops] = strdup(op);
    return P->ops[P->nops] ? P->nops++ : -2;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* what the parse of one line needs besides the row */
struct cursor {
    struct fl_push *P;
    struct flp_dev *cur;       /* the device whose rows are being read */
    int last_phase;
    uint64_t last_at;
};

static int grow_dg(struct fl_push *P, size_t need) {
    if (P->dg_used + need <= P->dg_cap)
        return 0;
    size_t cap = P->dg_cap ? P->dg_cap : 1 << 20;
    while (cap < P->dg_used + need)
        cap *= 2;
    uint8_t *p = realloc(P->dg, cap);
    if (!p)
        return -1;
    P->dg = p;
    P->dg_cap = cap;
    return 0;
}

/* One data line into row r; NULL or what is wrong (", expected ..." included). */
static const char *parse_row(struct cursor *c, char **fld, struct flp_row *r) {
    struct fl_push *P = c->P;
    static const char *const PH[] = {"setup", "test", "teardown"};
    int ph = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(fld[1], PH[i]))
            ph = i;
    if (ph < 0)
        return "bad phase, expected setup|test|teardown";
    if (ph < c->last_phase)
        return "phase out of order, expected the device's setup rows, then its test rows, then "
               "its teardown rows";
    if (ph != c->last_phase)
        c->last_at = 0;
    c->last_phase = ph;
    r->phase = (uint8_t)ph;
    int op = op_of(P, fld[2]);
    if (op == -1)
        return "bad op, expected a name of 1..40 letters, digits, '-' or '_'";
    if (op < 0)
        return "too many distinct ops, expected at most 64";
    r->op = (uint8_t)op;
    unsigned long long at;
    if (csv_parse_uint(fld[3], MAX_AT_US, &at))
        return "bad at_us, expected an integer >= 0 (µs from the start)";
    if (ph == FLP_TEST && at < c->last_at)
        return "at_us decreases, expected the device's test rows in time order";
    c->last_at = at;
    r->at_ns = at * 1000ULL;
    static const char *const M[] = {"", "GET", "POST", "PUT", "DELETE"};
    for (int i = 1; i < 5; i++)
        if (!strcmp(fld[4], M[i]))
            r->method = (uint8_t)i;
    if (!r->method)
        return "bad method, expected GET|POST|PUT|DELETE";
    if (strcmp(fld[5], "con") && strcmp(fld[5], "non"))
        return "bad type, expected con|non";
    r->flags = fld[5][0] == 'c' ? FLF_CON : 0;
    if (strcmp(fld[10], "0") && strcmp(fld[10], "1"))
        return "bad retransmit, expected 0|1";
    if (fld[10][0] == '1') {
        if (!(r->flags & FLF_CON) || ph != FLP_TEST)
            return "retransmit 1 on a NON or a setup/teardown row, expected it only on test CON "
                   "rows (setup and teardown CON rows are always retransmitted)";
        r->flags |= FLF_RETRANSMIT;
    }
    int t = target_of(P, fld[6]);
    if (t == -2)
        return "too many distinct targets, expected at most 64";
    if (t < 0)
        return "bad target, expected IPv4:PORT (the engine's devices are IPv4 endpoints)";
    r->target = (uint8_t)t;
    const char *path = fld[7];
    if (path[0] == '/' || strlen(path) > 255)
        return "bad path, expected a URI path without the leading '/' (at most 255 bytes)";
    int location = !strncmp(path, FLP_LOCATION, strlen(FLP_LOCATION));
    if (location && ph == FLP_SETUP)
        return "@location in a setup row, expected it in test or teardown rows (the location "
               "comes from a setup answer)";
    int32_t cf = -1;
    if (fld[8][0]) {
        unsigned long long v;
        if (csv_parse_uint(fld[8], 65535, &v))
            return "bad content_format, expected empty or an integer 0..65535";
        cf = (int32_t)v;
    }
    size_t hl = strlen(fld[9]);
    if (hl % 2 || hl / 2 > FLP_MAX_PAYLOAD)
        return "bad payload_hex, expected an even number of hex digits, at most 1024 bytes";
    uint8_t payload[FLP_MAX_PAYLOAD];
    for (size_t i = 0; i < hl / 2; i++) {
        int hi = hexval(fld[9][2 * i]), lo = hexval(fld[9][2 * i + 1]);
        if (hi < 0 || lo < 0)
            return "bad payload_hex, expected hex digits";
        payload[i] = (uint8_t)(hi << 4 | lo);
    }
    if (grow_dg(P, FLP_MAX_DGRAM + 8))
        return "out of memory, expected a smaller schedule";
    uint8_t *out = P->dg + P->dg_used;
    size_t len = location
        ? flp_template_put(out, FLP_MAX_DGRAM + 8, path + strlen(FLP_LOCATION), cf, payload, hl / 2)
        : flp_encode(out, FLP_MAX_DGRAM, r->flags & FLF_CON, r->method, path, cf, payload, hl / 2);
    if (len == 0)
        return "the request does not fit one datagram, expected a shorter path or body";
    r->dg_off = (uint32_t)P->dg_used;
    r->dg_len = location ? 0 : (uint16_t)len;
    r->flags |= location ? FLF_LOCATION : FLF_READY;
    P->dg_used += len;
    return NULL;
}

/* the device of a line (by its index in the devices file), its rows kept together */
static const char *device_of(struct cursor *c, const struct index_pos *map, uint32_t nmap,
                             struct fleet *f, const char *field, uint32_t row) {
    unsigned long long idx;
    if (csv_parse_uint(field, 0xFFFFFFFEULL, &idx))
        return "bad device, expected the index of a device of the devices file";
    if (c->cur && c->cur->d->index == idx)
        return NULL;
    struct index_pos key = {(uint32_t)idx, 0};
    const struct index_pos *hit = bsearch(&key, map, nmap, sizeof *map, cmp_index);
    if (!hit)
        return "unknown device, expected the index of a device of the devices file";
    struct fl_device *d = &f->dev[hit->pos];
    if (d->push != 0)     /* (0 while loading: no device has rows yet) */
        return "the device's rows are not together, expected all rows of a device in one run of lines";
    d->push = 1;
    struct fl_push *P = c->P;
    struct flp_dev *pd = &P->devs[P->ndevs++];
    *pd = (struct flp_dev){.d = d, .first = row, .heap_pos = FL_NIL};
    c->cur = pd;
    c->last_phase = FLP_SETUP;
    c->last_at = 0;
    return NULL;
}

static int reserve_state(struct fleet *f, struct fl_push *P) {
    struct flp_dev *nd = realloc(P->devs, (P->ndevs ? P->ndevs : 1) * sizeof *nd);
    if (nd)
        P->devs = nd;
    qsort(P->devs, P->ndevs, sizeof *P->devs, cmp_dev_pos);  /* device-table order */
    uint64_t seed[2];
    if (getrandom(seed, sizeof seed, 0) != sizeof seed)
        seed[0] = (uint64_t)mono_ns() * 0x9E3779B97F4A7C15ULL, seed[1] = seed[0] >> 17;
    uint64_t s = seed[0] | 1;
    for (uint32_t i = 0; i < P->ndevs; i++) {
        struct flp_dev *pd = &P->devs[i];
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        pd->salt_hi = (uint32_t)s;
        pd->salt_lo = (uint32_t)(s >> 32);
        pd->mid = (uint16_t)(s >> 24 ^ seed[1]);
        for (uint32_t k = 0; k < pd->n; k++) {
            const struct flp_row *r = &P->rows[pd->first + k];
            pd->n_setup += r->phase == FLP_SETUP;
            pd->n_test += r->phase == FLP_TEST;
        }
        P->setup_rows += pd->n_setup;
    }
    for (uint32_t i = 0; i < f->ndev; i++)
        f->dev[i].push = FL_NIL;    /* fl_push_attach sets the pushing ones per loop */
    return 0;
}

int fl_push_load(struct fleet *f, const char *file, uint64_t timeout_ns) {
    struct fl_push *P = calloc(1, sizeof *P);
    struct index_pos *map = calloc(f->ndev ? f->ndev : 1, sizeof *map);
    FILE *fp = fopen(file, "r");
    if (!P || !map || !fp) {
        fprintf(stderr, "%s:0: cannot read it: %s, expected the engine's push schedule\n", file,
                strerror(errno));
        free(P);
        free(map);
        if (fp)
            fclose(fp);
        return -1;
    }
    f->push = P;
    P->timeout_ns = timeout_ns;
    P->devs = calloc(f->ndev, sizeof *P->devs);
    for (uint32_t i = 0; i < f->ndev; i++) {
        map[i] = (struct index_pos){f->dev[i].index, i};
        f->dev[i].push = 0;
    }
    qsort(map, f->ndev, sizeof *map, cmp_index);
    struct cursor c = {.P = P};
    char *line = NULL;
    size_t lcap = 0, rows_cap = 0;
    long ln = 0;
    int rc = P->devs ? 0 : csv_fail(file, 0, "out of memory", "a smaller schedule");
    int header = 0, got;
    while (rc == 0 && (got = csv_next_line(fp, file, &line, &lcap, &ln)) != 0) {
        if (got < 0) {
            rc = -1;
            break;
        }
        if (!header) {
            if (strcmp(line, HEADER)) {
                rc = csv_fail(file, ln, "missing or wrong header", "'" HEADER "'");
                break;
            }
            header = 1;
            continue;
        }
        char *fld[NFIELDS];
        int nf = csv_split(line, fld, NFIELDS);
        if (nf != NFIELDS) {
            char what[64];
            snprintf(what, sizeof what, "%d fields", nf);
            rc = csv_fail(file, ln, what, "11 fields " HEADER);
            break;
        }
        if (P->nrows == rows_cap) {
            rows_cap = rows_cap ? 2 * rows_cap : 4096;
            struct flp_row *nr = realloc(P->rows, rows_cap * sizeof *nr);
            if (!nr) {
                rc = csv_fail(file, ln, "out of memory", "a smaller schedule");
                break;
            }
            P->rows = nr;
        }
        struct flp_row *r = &P->rows[P->nrows];
        memset(r, 0, sizeof *r);
        const char *why = device_of(&c, map, f->ndev, f, fld[0], (uint32_t)P->nrows);
        if (!why)
            why = parse_row(&c, fld, r);
        if (why) {
            char what[160];
            snprintf(what, sizeof what, "%s", why);
            char *exp = strstr(what, ", expected ");
            if (exp)
                *exp = '\0';
            rc = csv_fail(file, ln, what, exp ? strstr(why, ", expected ") + 11 : "a valid row");
            break;
        }
        c.cur->n++;
        P->nrows++;
    }
    if (rc == 0 && !header)
        rc = csv_fail(file, ln, "empty file", "the header '" HEADER "'");
    free(line);
    fclose(fp);
    free(map);
    if (rc == 0)
        rc = reserve_state(f, P);
    if (rc)
        fl_push_free(f);
    return rc;
}

static void *reserve(size_t bytes) {
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int fl_push_attach(struct fleet *f, struct fl_loop *l) {
    struct fl_push *P = f->push;
    if (!P)
        return 0;
    struct fl_device *lo = l->dev, *hi = l->dev + l->ndev;
    uint32_t a = 0;
    while (a < P->ndevs && P->devs[a].d < lo)
        a++;
    uint32_t b = a;
    while (b < P->ndevs && P->devs[b].d < hi)
        b++;
    struct fl_push_loop *pl = calloc(1, sizeof *pl);
    if (!pl)
        return -1;
    l->push = pl;
    pl->P = P;
    pl->devs = P->devs + a;
    pl->ndevs = b - a;
    pl->heap = calloc(pl->ndevs ? pl->ndevs : 1, sizeof *pl->heap);
    /* the location arena: each device's location text and its @location datagrams, at most
     * FLP_LOC_MAX more bytes of options than the template each (untouched pages cost nothing) */
    size_t cap = 0;
    for (uint32_t i = 0; i < pl->ndevs; i++) {
        struct flp_dev *pd = &pl->devs[i];
        pd->d->push = i;
        cap += FLP_LOC_MAX;
        for (uint32_t k = 0; k < pd->n; k++)
            if (P->rows[pd->first + k].flags & FLF_LOCATION)
                cap += 3 * FLP_LOC_MAX + FLP_MAX_DGRAM + 16;
    }
    pl->loc_cap = cap;
    pl->loc = reserve(cap);
    pl->active = pl->ndevs;
    if (!pl->heap || !pl->loc) {
        fprintf(stderr, "wot-fleet: loop %d: cannot reserve the push state: %s\n", l->id,
                strerror(errno));
        return -1;
    }
    return 0;
}

void fl_push_free(struct fleet *f) {
    struct fl_push *P = f->push;
    for (int i = 0; f->loops && i < f->nloops; i++) {
        struct fl_push_loop *pl = f->loops[i].push;
        if (!pl)
            continue;
        free(pl->heap);
        if (pl->loc)
            munmap(pl->loc, pl->loc_cap ? pl->loc_cap : 1);
        free(pl);
        f->loops[i].push = NULL;
    }
    if (!P)
        return;
    for (int i = 0; i < P->nops; i++)
        free(P->ops[i]);
    free(P->rows);
    free(P->dg);
    free(P->devs);
    free(P);
    f->push = NULL;
}
