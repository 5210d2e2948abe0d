/* devices_file.c - the devices file of wot-fleet (docs/CONTRACTS.md §3b):
 *   index,name,listen,resources,slots,queue,response,piggyback_max_us[,OPTIONAL...]
 * (header required; the optional columns, each at most once, in any order after the eight:
 * impair,impair_ge,impair_seed). Blank lines and lines starting with '#' are skipped; CRLF
 * accepted. A relative `resources` path is taken relative to the devices file's directory.
 * Each distinct resource file is read once (resources.c, the parser wot-device uses) however
 * many devices name it. What the engine does not do is refused here, naming the line: a
 * /.well-known/core listing above one datagram. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"

#define HEADER "index,name,listen,resources,slots,queue,response,piggyback_max_us"
#define NFIELDS 8
#define WKC_MAX 1024            /* /.well-known/core body without block-wise transfer */

/* the optional columns after the eight (fleet/impair.c) */
enum { OPT_IMPAIR, OPT_IMPAIR_GE, OPT_IMPAIR_SEED, NOPT };
static const char *const OPTIONAL[NOPT] = {"impair", "impair_ge", "impair_seed"};
#define MAX_FIELDS (NFIELDS + NOPT)

/* IPv4:PORT, port 1..65535 */
static int parse_listen(const char *s, struct sockaddr_in *a) {
    const char *c = strrchr(s, ':');
    char host[INET_ADDRSTRLEN];
    if (!c || (size_t)(c - s) >= sizeof host || c == s)
        return -1;
    memcpy(host, s, (size_t)(c - s));
    host[c - s] = '\0';
    unsigned long long port;
    memset(a, 0, sizeof *a);
    if (inet_pton(AF_INET, host, &a->sin_addr) != 1 || csv_parse_uint(c + 1, 65535, &port) ||
        port == 0)
        return -1;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    return 0;
}

/* ---- distinct resource files: an open-addressing table of resolved paths ---- */

struct file_table {
    uint32_t *slot;   /* file index + 1, 0 = empty */
    size_t mask;
    struct fl_res_file *v;
    uint32_t n, cap;
};

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return h;
}

/* The /.well-known/core body, as libcoap lists a device's resources: </a>,</b/c>,... */
static int make_wkc(struct fl_res_file *rf) {
    size_t len = 0;
    for (size_t i = 0; i < rf->rs.n; i++)
        len += strlen(rf->rs.v[i].path) + 4;
    rf->wkc = malloc(len + 1);
    if (!rf->wkc)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < rf->rs.n; i++)
        o += (size_t)sprintf(rf->wkc + o, "%s</%s>", i ? "," : "", rf->rs.v[i].path);
    rf->wkc_len = o;
    return 0;
}

/* Observe and block-wise bodies are served (observe.c, block.c); a /.well-known/core listing
 * larger than one datagram is not (wot-device's libcoap would send it block-wise). */
static int check_supported(const char *file, long ln, const struct fl_res_file *rf) {
    char what[512];
    if (rf->wkc_len > WKC_MAX) {
        snprintf(what, sizeof what, "the /.well-known/core listing of %s is %zu bytes "
                 "(block-wise)", rf->path, rf->wkc_len);
        return csv_fail(file, ln, what, "at most 1024 bytes of resource paths");
    }
    return 0;
}

static int file_get(struct file_table *t, const char *path, const char *devfile, long ln,
                    uint32_t *out) {
    size_t h = (size_t)fnv1a(path) & t->mask;
    while (t->slot[h]) {
        if (strcmp(t->v[t->slot[h] - 1].path, path) == 0) {
            *out = t->slot[h] - 1;
            return 0;
        }
        h = (h + 1) & t->mask;
    }
    struct fl_res_file rf = {.path = strdup(path)};
    if (!rf.path)
        return csv_fail(devfile, ln, "out of memory", "a smaller devices file");
    if (resources_load(path, &rf.rs)) {  /* printed FILE:LINE of the resource file */
        free(rf.path);
        return csv_fail(devfile, ln, "bad resource file (above)", "a valid resource file (CONTRACTS §1)");
    }
    if (make_wkc(&rf) || check_supported(devfile, ln, &rf)) {
        resources_free(&rf.rs);
        free(rf.wkc);
        free(rf.path);
        return -1;
    }
    t->v[t->n] = rf;   /* capacity = number of device lines, enough */
    t->slot[h] = t->n + 1;
    *out = t->n++;
    return 0;
}

/* ---- duplicates of index and listen, found by sorting (key, line) pairs ---- */

struct keyline {
    uint64_t key;
    uint32_t line;
};

static int cmp_keyline(const void *a, const void *b) {
    const struct keyline *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

static int check_unique(const char *file, struct keyline *k, uint32_t n, const char *what,
                        const char *expected) {
    qsort(k, n, sizeof *k, cmp_keyline);
    for (uint32_t i = 1; i < n; i++)
        if (k[i].key == k[i - 1].key) {
            char w[128];
            snprintf(w, sizeof w, "%s already used on line %u", what, k[i - 1].line);
            return csv_fail(file, k[i].line, w, expected);
        }
    return 0;
}

/* ---- the file ---- */

static const char *dir_of(const char *file, char *buf, size_t cap) {
    const char *slash = strrchr(file, '/');
    if (!slash)
        return ".";
    size_t n = (size_t)(slash - file);
    if (n == 0)
        return "/";
    if (n >= cap)
        return NULL;
    memcpy(buf, file, n);
    buf[n] = '\0';
    return buf;
}

static long count_lines(FILE *fp) {
    long n = 0;
    int c;
    while ((c = getc(fp)) != EOF)
        n += c == '\n';
    rewind(fp);
    return n + 1;
}

/* The header: the eight columns, then optional ones; col[k] = field of OPTIONAL[k] or -1.
 * Returns the number of fields a line has, -1 after the message. */
static int read_header(const char *file, long ln, char *line, int col[NOPT]) {
    for (int k = 0; k < NOPT; k++)
        col[k] = -1;
    if (strcmp(line, HEADER) == 0)
        return NFIELDS;
    if (strncmp(line, HEADER ",", strlen(HEADER) + 1) != 0)
        return csv_fail(file, ln, "missing or wrong header", "'" HEADER "'");
    char *f[MAX_FIELDS + 1];
    int n = csv_split(line + strlen(HEADER) + 1, f, MAX_FIELDS + 1);
    for (int i = 0; i < n && i <= NOPT; i++) {
        int k = 0;
        while (k < NOPT && strcmp(f[i], OPTIONAL[k]))
            k++;
        if (i == NOPT || k == NOPT || col[k] >= 0) {
            char what[256];
            snprintf(what, sizeof what, "column '%.120s' after piggyback_max_us", i < n ? f[i] : "");
            return csv_fail(file, ln, what, "'" HEADER "' then each of impair, impair_ge, "
                            "impair_seed at most once (push rows come with --push; no DTLS)");
        }
        col[k] = NFIELDS + i;
    }
    return NFIELDS + n;
}

int fl_devices_load(const char *file, struct fleet *f) {
    FILE *fp = fopen(file, "r");
    if (!fp) {
        fprintf(stderr, "%s:0: cannot open: %s, expected a readable devices file\n", file,
                strerror(errno));
        return -1;
    }
    char dirbuf[4096];
    const char *dir = dir_of(file, dirbuf, sizeof dirbuf);
    long maxn = count_lines(fp);
    struct file_table t = {0};
    size_t tsz = 16;
    while (tsz < (size_t)maxn * 2)
        tsz <<= 1;
    t.slot = calloc(tsz, sizeof *t.slot);
    t.mask = tsz - 1;
    t.v = calloc((size_t)maxn, sizeof *t.v);
    f->dev = calloc((size_t)maxn, sizeof *f->dev);
    struct keyline *kidx = calloc((size_t)maxn, sizeof *kidx);
    struct keyline *kaddr = calloc((size_t)maxn, sizeof *kaddr);
    /* names and listen specs of all devices in one block: at most the file's size */
    fseek(fp, 0, SEEK_END);
    long fsize = ftell(fp);
    rewind(fp);
    f->strings = malloc((size_t)fsize + 2);
    char *line = NULL;
    size_t lcap = 0, sused = 0;
    long ln = 0;
    int rc = 0, seen_header = 0, nfields = NFIELDS, col[NOPT];
    if (!t.slot || !t.v || !f->dev || !kidx || !kaddr || !f->strings || !dir) {
        rc = csv_fail(file, 0, "out of memory or path too long", "a smaller devices file");
        goto out;
    }
    int got;
    while (rc == 0 && (got = csv_next_line(fp, file, &line, &lcap, &ln)) != 0) {
        if (got < 0) {
            rc = -1;
            break;
        }
        if (!seen_header) {
            if ((nfields = read_header(file, ln, line, col)) < 0) {
                rc = -1;
                break;
            }
            if (col[OPT_IMPAIR] >= 0 || col[OPT_IMPAIR_GE] >= 0 || col[OPT_IMPAIR_SEED] >= 0) {
                f->imp_spec_of = calloc((size_t)maxn, sizeof *f->imp_spec_of);
                f->imp_seed_of = calloc((size_t)maxn, sizeof *f->imp_seed_of);
                if (!f->imp_spec_of || !f->imp_seed_of) {
                    rc = csv_fail(file, ln, "out of memory", "a smaller devices file");
                    break;
                }
            }
            seen_header = 1;
            continue;
        }
        char *fld[MAX_FIELDS];
        int nf = csv_split(line, fld, MAX_FIELDS);
        if (nf != nfields) {
            char what[64];
            snprintf(what, sizeof what, "%d fields", nf);
            snprintf(what + strlen(what), sizeof what - strlen(what), ", expected %d", nfields);
            rc = csv_fail(file, ln, what, "as many fields as the header has");
            break;
        }
        struct fl_device *d = &f->dev[f->ndev];
        unsigned long long idx, slots, queue, pb;
        if (csv_parse_uint(fld[0], 0xFFFFFFFEULL, &idx)) {
            rc = csv_fail(file, ln, "bad index", "an integer 0..4294967294");
            break;
        }
        if (fld[1][0] == '\0') {
            rc = csv_fail(file, ln, "empty name", "a device name");
            break;
        }
        if (parse_listen(fld[2], &d->addr)) {
            rc = csv_fail(file, ln, "bad listen", "IPv4:PORT, e.g. 127.0.3.7:5683");
            break;
        }
        if (fld[3][0] == '\0') {
            rc = csv_fail(file, ln, "empty resources", "the path of a resource file");
            break;
        }
        if (csv_parse_uint(fld[4], 1024, &slots) || slots == 0) {
            rc = csv_fail(file, ln, "bad slots", "an integer 1..1024");
            break;
        }
        if (csv_parse_uint(fld[5], 1 << 20, &queue) || queue == 0) {
            rc = csv_fail(file, ln, "bad queue", "an integer 1..1048576");
            break;
        }
        if (!strcmp(fld[6], "auto"))
            d->response = FL_RESP_AUTO;
        else if (!strcmp(fld[6], "piggyback"))
            d->response = FL_RESP_PIGGYBACK;
        else if (!strcmp(fld[6], "separate"))
            d->response = FL_RESP_SEPARATE;
        else {
            rc = csv_fail(file, ln, "bad response", "auto, piggyback or separate");
            break;
        }
        if (csv_parse_uint(fld[7], 3600000000ULL, &pb)) {
            rc = csv_fail(file, ln, "bad piggyback_max_us", "an integer 0..3600000000");
            break;
        }
        char rpath[4096];
        if ((fld[3][0] == '/' ? snprintf(rpath, sizeof rpath, "%s", fld[3])
                              : snprintf(rpath, sizeof rpath, "%s/%s", dir, fld[3])) >=
            (int)sizeof rpath) {
            rc = csv_fail(file, ln, "resources path too long", "a path under 4096 bytes");
            break;
        }
        uint32_t fi = 0;
        if ((rc = file_get(&t, rpath, file, ln, &fi)))
            break;
        if (f->imp_spec_of &&
            (rc = fl_imp_parse_row(f, f->ndev, col[OPT_IMPAIR] >= 0 ? fld[col[OPT_IMPAIR]] : "",
                                   col[OPT_IMPAIR_GE] >= 0 ? fld[col[OPT_IMPAIR_GE]] : "",
                                   col[OPT_IMPAIR_SEED] >= 0 ? fld[col[OPT_IMPAIR_SEED]] : "",
                                   file, ln)))
            break;
        d->index = (uint32_t)idx;
        d->line = (uint32_t)ln;
        d->slots = (uint16_t)slots;
        d->queue_cap = (uint32_t)queue;
        d->piggyback_max_ns = pb * 1000ULL;
        d->rf = &t.v[fi];  /* t.v is not reallocated: its capacity is the line count */
        d->fd = -1;
        d->name = f->strings + sused;
        sused += (size_t)sprintf(f->strings + sused, "%s", fld[1]) + 1;
        d->listen = f->strings + sused;
        sused += (size_t)sprintf(f->strings + sused, "%s", fld[2]) + 1;
        kidx[f->ndev] = (struct keyline){idx, (uint32_t)ln};
        kaddr[f->ndev] = (struct keyline){(uint64_t)ntohl(d->addr.sin_addr.s_addr) << 16 |
                                              ntohs(d->addr.sin_port), (uint32_t)ln};
        f->ndev++;
    }
    if (rc == 0 && !seen_header)
        rc = csv_fail(file, ln, "empty file", "the header '" HEADER "'");
    else if (rc == 0 && f->ndev == 0)
        rc = csv_fail(file, ln, "no devices", "at least one device line");
    if (rc == 0)
        rc = check_unique(file, kidx, f->ndev, "index", "a distinct index per device");
    if (rc == 0)
        rc = check_unique(file, kaddr, f->ndev, "listen address:port",
                          "a distinct IPv4:PORT per device (each device its own endpoint)");
out:
    free(line);
    fclose(fp);
    free(t.slot);
    free(kidx);
    free(kaddr);
    f->files = t.v;
    f->nfiles = t.n;
    if (rc)
        fl_devices_free(f);
    return rc;
}

void fl_devices_free(struct fleet *f) {
    for (uint32_t i = 0; f->files && i < f->nfiles; i++) {
        resources_free(&f->files[i].rs);
        free(f->files[i].wkc);
        free(f->files[i].path);
    }
    free(f->files);
    free(f->dev);
    free(f->strings);
    fl_imp_specs_free(f);
    f->files = NULL;
    f->dev = NULL;
    f->strings = NULL;
    f->ndev = f->nfiles = 0;
}
