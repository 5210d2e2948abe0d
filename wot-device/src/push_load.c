/* push_load.c - reads the push schedule (docs/CONTRACTS.md §3 "Push") and encodes every
 * datagram it can before the run (push.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "push.h"
#include "push_int.h"

struct push_state P;
static int enabled;

#define HEADER "phase,op,at_us,method,type,target,path,content_format,payload_hex"
#define HEADER_RTX HEADER ",retransmit"   /* the same with a 10th column: 0|1 per row */
#define NFIELDS 10

static int bad(const char *file, long line, const char *what) {
    fprintf(stderr, "%s:%ld: %s\n", file, line, what);
    return -1;
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out) {
    char *end;
    errno = 0;
    if (!*s || *s == '-')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno || v > max)
        return -1;
    *out = v;
    return 0;
}

static int target_index(const char *t) {
    for (int i = 0; i < P.n_targets; i++)
        if (!strcmp(P.target_text[i], t))
            return i;
    if (P.n_targets == PUSH_MAX_TARGETS || strlen(t) >= sizeof P.target_text[0])
        return -2;
    char host[64];
    const char *port;
    struct push_target *pt = &P.targets[P.n_targets];
    memset(pt, 0, sizeof *pt);
    if (t[0] == '[') {
        const char *e = strchr(t, ']');
        if (!e || e[1] != ':' || (size_t)(e - t - 1) >= sizeof host)
            return -1;
        memcpy(host, t + 1, (size_t)(e - t - 1));
        host[e - t - 1] = '\0';
        port = e + 2;
    } else {
        const char *c = strrchr(t, ':');
        if (!c || (size_t)(c - t) >= sizeof host)
            return -1;
        memcpy(host, t, (size_t)(c - t));
        host[c - t] = '\0';
        port = c + 1;
    }
    uint64_t p;
    if (parse_u64(port, 65535, &p) || p == 0)
        return -1;
    struct sockaddr_in *s4 = (struct sockaddr_in *)&pt->sa;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&pt->sa;
    if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)p);
        pt->len = sizeof *s4;
    } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)p);
        pt->len = sizeof *s6;
    } else {
        return -1;
    }
    strcpy(P.target_text[P.n_targets], t);
    return P.n_targets++;
}

static int op_index(const char *op) {
    for (int i = 0; i < P.n_ops; i++)
        if (!strcmp(P.ops[i], op))
            return i;
    if (P.n_ops == PUSH_MAX_OPS)
        return -1;
    P.ops[P.n_ops] = strdup(op);
    return P.ops[P.n_ops] ? P.n_ops++ : -1;
}

static int valid_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 40)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '_'))
            return 0;
    return 1;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* One data line into P.rows[P.n]; returns NULL or what is wrong. */
static const char *parse_row(char *f[NFIELDS], int nf, int *last_phase, uint64_t *last_at) {
    struct push_row *r = &P.rows[P.n];
    memset(r, 0, sizeof *r);
    static const char *const PH[] = {"setup", "test", "teardown"};
    int ph = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(f[0], PH[i]))
            ph = i;
    if (ph < 0)
        return "bad phase, expected setup|test|teardown";
    if (ph < *last_phase)
        return "phase out of order, expected the setup rows, then the test rows, then the "
               "teardown rows";
    if (ph != *last_phase)
        *last_at = 0;
    *last_phase = ph;
    r->phase = (uint8_t)ph;
    if (!valid_name(f[1]))
        return "bad op, expected a name of 1..40 letters, digits, '-' or '_'";
    int op = op_index(f[1]);
    if (op < 0)
        return "too many distinct ops, expected at most 64";
    r->op = (uint8_t)op;
    if (parse_u64(f[2], 1ULL << 42, &r->at_ns))
        return "bad at_us, expected an integer >= 0 (µs from the start)";
    if (ph == PH_TEST && r->at_ns < *last_at)
        return "at_us decreases, expected the test rows in time order";
    *last_at = r->at_ns;
    r->at_ns *= 1000ULL;
    static const char *const M[] = {"", "GET", "POST", "PUT", "DELETE"};
    for (int i = 1; i < 5; i++)
        if (!strcmp(f[3], M[i]))
            r->method = (uint8_t)i;
    if (!r->method)
        return "bad method, expected GET|POST|PUT|DELETE";
    if (strcmp(f[4], "con") && strcmp(f[4], "non"))
        return "bad type, expected con|non";
    r->con = f[4][0] == 'c';
    if (nf == NFIELDS) {
        if (strcmp(f[9], "0") && strcmp(f[9], "1"))
            return "bad retransmit, expected 0|1";
        r->retransmit = f[9][0] == '1';
        if (r->retransmit && (!r->con || ph != PH_TEST))
            return "retransmit 1 on a NON or a setup/teardown row, expected it only on test CON "
                   "rows (setup and teardown CON rows are always retransmitted)";
    }
    int t = target_index(f[5]);
    if (t == -2)
        return "too many distinct targets, expected at most 64";
    if (t < 0)
        return "bad target, expected IPv4:PORT or [IPv6]:PORT";
    r->target = (uint8_t)t;
    if (f[6][0] == '/' || strlen(f[6]) > 255)
        return "bad path, expected a URI path without the leading '/' (at most 255 bytes)";
    if (!strncmp(f[6], PUSH_LOCATION, strlen(PUSH_LOCATION)) && ph == PH_SETUP)
        return "@location in a setup row, expected it in test or teardown rows (the location "
               "comes from a setup answer)";
    r->path = strdup(f[6]);
    uint64_t cf;
    r->content_format = -1;
    if (f[7][0]) {
        if (parse_u64(f[7], 65535, &cf))
            return "bad content_format, expected empty or an integer 0..65535";
        r->content_format = (int32_t)cf;
    }
    size_t hl = strlen(f[8]);
    if (hl % 2 || hl / 2 > PUSH_MAX_PAYLOAD)
        return "bad payload_hex, expected an even number of hex digits, at most 1024 bytes";
    r->payload_len = (uint32_t)(hl / 2);
    r->payload = r->payload_len ? malloc(r->payload_len) : NULL;
    if (!r->path || (r->payload_len && !r->payload))
        return "out of memory";
    for (size_t i = 0; i < r->payload_len; i++) {
        int hi = hexval(f[8][2 * i]), lo = hexval(f[8][2 * i + 1]);
        if (hi < 0 || lo < 0)
            return "bad payload_hex, expected hex digits";
        r->payload[i] = (uint8_t)(hi << 4 | lo);
    }
    return NULL;
}

int push_load(const char *file, const char *id, const char *timeout_ms) {
    uint64_t v;
    P.timeout_ns = 10000ULL * 1000000ULL;
    if (!file) {
        if (id || timeout_ms) {
            fputs("wot-device: --push-id/--push-timeout-ms without --push FILE\n", stderr);
            return -1;
        }
        return 0;
    }
    if (id) {
        if (parse_u64(id, 0x7fffffff, &v)) {
            fprintf(stderr, "wot-device: bad --push-id '%s', expected an integer >= 0\n", id);
            return -1;
        }
        P.id = (unsigned)v;
    }
    if (timeout_ms) {
        if (parse_u64(timeout_ms, 3600000, &v) || v == 0) {
            fprintf(stderr, "wot-device: bad --push-timeout-ms '%s', expected 1..3600000\n",
                    timeout_ms);
            return -1;
        }
        P.timeout_ns = v * 1000000ULL;
    }
    FILE *f = fopen(file, "r");
    if (!f) {
        fprintf(stderr, "wot-device: --push '%s': cannot read it: %s\n", file, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0, rows_cap = 0;
    long ln = 0;
    int header = 0, want = 0, rc = 0, last_phase = 0;
    uint64_t last_at = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) >= 0) {
        ln++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0 || line[0] == '#')
            continue;
        if (!header) {
            want = !strcmp(line, HEADER) ? NFIELDS - 1 : !strcmp(line, HEADER_RTX) ? NFIELDS : 0;
            if (!want) {
                rc = bad(file, ln, "bad header, expected '" HEADER "[,retransmit]'");
                break;
            }
            header = 1;
            continue;
        }
        char *fl[NFIELDS];
        int nf = 0;
        for (char *p = line, *c; nf < want; p = c + 1) {
            fl[nf++] = p;
            if (!(c = strchr(p, ',')))
                break;
            *c = '\0';
        }
        if (nf != want || strchr(fl[want - 1], ',')) {
            rc = bad(file, ln, want == NFIELDS ? "expected 10 comma-separated fields ("
                     HEADER_RTX ")" : "expected 9 comma-separated fields (" HEADER ")");
            break;
        }
        if (P.n == rows_cap) {
            rows_cap = rows_cap ? 2 * rows_cap : 1024;
            struct push_row *nr = realloc(P.rows, rows_cap * sizeof *nr);
            if (!nr) {
                rc = bad(file, ln, "out of memory");
                break;
            }
            P.rows = nr;
        }
        const char *why = parse_row(fl, nf, &last_phase, &last_at);
        if (why) {
            P.n++;   /* freed with the others */
            rc = bad(file, ln, why);
            break;
        }
        P.n_setup += P.rows[P.n].phase == PH_SETUP;
        P.n_test += P.rows[P.n].phase == PH_TEST;
        P.rtx_cap += P.rows[P.n].retransmit;
        P.n++;
    }
    free(line);
    fclose(f);
    if (rc == 0 && !header)
        rc = bad(file, ln, "no header, expected '" HEADER "'");
    if (rc == 0) {
        P.dg_cap = P.n * 64 + 4096;
        for (size_t i = 0; i < P.n; i++)
            P.dg_cap += P.rows[i].payload_len + strlen(P.rows[i].path) + 16;
        P.dg = malloc(P.dg_cap);
        P.rtx_heap = P.rtx_cap ? malloc(P.rtx_cap * sizeof *P.rtx_heap) : NULL;
        if (!P.dg || (P.rtx_cap && !P.rtx_heap))
            rc = bad(file, ln, "out of memory for the datagrams");
    }
    for (size_t i = 0; rc == 0 && i < P.n; i++)
        if (strncmp(P.rows[i].path, PUSH_LOCATION, strlen(PUSH_LOCATION)) && push_encode(&P.rows[i]))
            rc = bad(file, 0, "a request does not fit one datagram");
    enabled = rc == 0;
    return rc;
}

int push_enabled(void) { return enabled; }

void push_free(void) {
    for (size_t i = 0; i < P.n; i++) {
        free(P.rows[i].path);
        free(P.rows[i].payload);
    }
    for (int i = 0; i < P.n_ops; i++)
        free(P.ops[i]);
    free(P.rows);
    free(P.dg);
    free(P.rtx_heap);
    memset(&P, 0, sizeof P);
    enabled = 0;
}
