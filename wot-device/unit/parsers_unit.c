/* parsers_unit.c - wot-device's parsers in process, table-driven: the resource file
 * (resources.c), the request path of a datagram through libcoap and the device's handlers
 * (coapio.c, via device_inproc.c) and wot-fleet's datagram parser (fleet/coap_wire.c). Good
 * inputs with what they parse or answer to, bad inputs with their exact error. Run by
 * tests/c/test_parsers_inprocess.py. */
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <coap3/coap.h>

#include "../src/fleet/coap_wire.h"
#include "../src/notify_interval.h"
#include "../src/resources.h"
#include "device_inproc.h"
#include "unit_check.h"

/* ---------------- resource file ---------------- */

static int res_read(const char *text, struct resource_set *rs, char *err, size_t cap) {
    FILE *fp = fmemopen((void *)text, strlen(text), "r");
    uc_capture_begin();
    int rc = resources_read(fp, "r.csv", rs);
    uc_capture_end(err, cap);
    fclose(fp);
    return rc;
}

#define H "path,service_time_us,mode,payload_bytes\n"
#define HO H "notify_dist,notify_mean_us,notify_jitter_us,notify_service_us,notify_type,max_age_s\n"
#define H_BODY "path,service_time_us,mode,payload_bytes,body\n"
#define HOBS "path,service_time_us,mode,payload_bytes,notify_dist,notify_mean_us,notify_jitter_us," \
             "notify_service_us,notify_type,max_age_s\n"

static void resources_tests(void) {
    char err[1024];
    struct resource_set rs;
    int rc = res_read("# c\r\n" H "r0,250,sleep,8\r\n\na/b,0,busy,1048576\n", &rs, err, sizeof err);
    UC_CHECK("resources: two lines", rc == 0 && rs.n == 2 && !strcmp(rs.v[1].path, "a/b") &&
                                         rs.v[0].service_ns == 250000 && rs.v[0].mode == MODE_SLEEP &&
                                         rs.v[1].mode == MODE_BUSY && rs.v[1].payload_bytes == 1048576,
             "rc %d n %zu err '%s'", rc, rs.n, err);
    resources_free(&rs);
    rc = res_read(HOBS "t,0,sleep,4,uniform,1000,500,10,con,60\n", &rs, err, sizeof err);
    UC_CHECK("resources: observable", rc == 0 && rs.n == 1 && rs.v[0].notify_dist == NOTIFY_UNIFORM &&
                                          rs.v[0].notify_mean_ns == 1000000 &&
                                          rs.v[0].notify_jitter_ns == 500000 && rs.v[0].notify_con &&
                                          rs.v[0].max_age_s == 60,
             "rc %d err '%s'", rc, err);
    resources_free(&rs);
    /* the body column: %-decoded once, exactly payload_bytes long; empty = filler (NULL) */
    rc = res_read(H_BODY "w,0,sleep,7,{%22a%22%2C%25}\nr,0,sleep,3,\n", &rs, err, sizeof err);
    UC_CHECK("resources: body", rc == 0 && rs.n == 2 && rs.v[0].body &&
                                    !memcmp(rs.v[0].body, "{\"a\",%}", 7) && !rs.v[1].body,
             "rc %d err '%s'", rc, err);
    resources_free(&rs);
    static const struct { const char *name, *text, *err; } BAD[] = {
        {"empty file", "", "r.csv:0: empty file, expected the header '" "path,service_time_us,mode,payload_bytes'"},
        {"no header", "r0,0,sleep,8\n", "r.csv:1: missing or wrong header, expected 'path,service_time_us,"
         "mode,payload_bytes' or 'path,service_time_us,mode,payload_bytes,notify_dist,notify_mean_us,"
         "notify_jitter_us,notify_service_us,notify_type,max_age_s', either with ',body' at the end"},
        {"header only", H, "r.csv:1: no resources, expected at least one resource line"},
        {"three fields", H "r0,0,sleep\n", "r.csv:2: 3 fields, expected 4 fields path,service_time_us,mode,payload_bytes"},
        {"leading slash", H "/r0,0,sleep,8\n", "r.csv:2: path starts with '/', expected a path without "
         "leading '/' made of printable characters, e.g. r0 or a/b"},
        {"empty segment", H "a//b,0,sleep,8\n", "r.csv:2: empty path segment, expected a path without "
         "leading '/' made of printable characters, e.g. r0 or a/b"},
        {"reserved path", H ".well-known/core,0,sleep,8\n", "r.csv:2: path '.well-known/core' is reserved, "
         "expected a path without leading '/' made of printable characters, e.g. r0 or a/b"},
        {"duplicate path", H "r0,0,sleep,8\nr0,1,sleep,8\n", "r.csv:3: duplicate path, expected each path once"},
        {"service time sign", H "r0,-1,sleep,8\n", "r.csv:2: bad service_time_us, expected an integer 0..3600000000"},
        {"service time too long", H "r0,3600000001,sleep,8\n", "r.csv:2: bad service_time_us, expected an integer 0..3600000000"},
        {"mode", H "r0,0,nap,8\n", "r.csv:2: bad mode, expected sleep or busy"},
        {"payload above 1 MiB", H "r0,0,sleep,1048577\n", "r.csv:2: bad payload_bytes, expected an integer 0..1048576"},
        {"jitter above the mean", HOBS "t,0,sleep,4,uniform,10,11,0,con,60\n", "r.csv:2: notify_jitter_us "
         "above notify_mean_us, expected a uniform half-width <= the mean (intervals must stay >= 0)"},
        {"body shorter than payload_bytes", H_BODY "w,0,sleep,4,abc\n", "r.csv:2: body of 3 bytes "
         "with payload_bytes 4, expected a body of exactly payload_bytes bytes (decoded)"},
        {"body with a cut escape", H_BODY "w,0,sleep,2,a%4\n", "r.csv:2: bad %-escape in body, "
         "expected %XX with two hex digits"},
        {"body without its column", H_BODY "w,0,sleep,2\n", "r.csv:2: 4 fields, expected 5 fields "
         "path,service_time_us,mode,payload_bytes,body"},
        {"observable payload above 1024", HOBS "t,0,sleep,1025,deterministic,10,0,0,non,0\n",
         "r.csv:2: payload_bytes above 1024 on an observable resource, expected at most 1024 "
         "(notifications are not sent block-wise)"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        rc = res_read(BAD[i].text, &rs, err, sizeof err);
        UC_CHECK(BAD[i].name, rc == -1 && !strcmp(err, BAD[i].err) && rs.n == 0 && !rs.v,
                 "rc %d stderr\n  '%s'\n expected\n  '%s'", rc, err, BAD[i].err);
    }
}

/* ---------------- the first notification of a process (notify_interval.c) ---------------- */

/* the mean time to the first notification over n starts, in units of the mean interval */
static double first_mean(enum notify_dist d, double jitter) {
    struct resource r = {.notify_dist = d, .notify_mean_ns = 1000000, .notify_jitter_ns =
                         (uint64_t)(jitter * 1000000)};
    uint64_t rng = 12345;
    double sum = 0;
    for (int i = 0; i < 200000; i++)
        sum += (double)notify_first_ns(&r, &rng);
    return sum / 200000 / 1e6;
}

static void notify_first_tests(void) {
    /* the stationary residual's mean E[X^2] / 2E[X]: exponential 1, deterministic 1/2,
     * uniform on [0, 2] 2/3, normal (mean 1, sd 0.5) (1 + 0.25) / 2 */
    double e = first_mean(NOTIFY_EXP, 0), d = first_mean(NOTIFY_DET, 0);
    double u = first_mean(NOTIFY_UNIFORM, 1), n = first_mean(NOTIFY_NORMAL, 0.5);
    UC_CHECK("notify_first: stationary residuals", fabs(e - 1) < 0.02 && fabs(d - 0.5) < 0.01 &&
                                                       fabs(u - 2.0 / 3) < 0.015 &&
                                                       fabs(n - 0.625) < 0.015,
             "exp %.4f det %.4f uniform %.4f normal %.4f", e, d, u, n);
}

/* ---------------- wot-fleet's datagram parser ---------------- */

typedef struct {
    const char *name;
    uint8_t d[300];
    size_t n;
    int rc;
    uint8_t type, code, tkl;
    uint16_t mid;
    const char *path;
    uint8_t too_long, observe;
    uint16_t bad_option;
} fl_case_t;

/* header: ver 1, type, tkl | code | mid; options: delta << 4 | length */
static const fl_case_t FL[] = {
    {"CON GET r0, 4-byte token", {0x44, 0x01, 0x12, 0x34, 1, 2, 3, 4, 0xB2, 'r', '0'}, 11, 0,
     FL_CON, FL_GET, 4, 0x1234, "r0", 0, 0, 0},
    {"NON PUT a/b with payload", {0x50, 0x03, 0, 7, 0xB1, 'a', 0x01, 'b', 0xFF, 'x'}, 10, 0,
     FL_NON, 3, 0, 7, "a/b", 0, 0, 0},
    {"empty CON (ping)", {0x40, 0x00, 0, 1}, 4, 0, FL_CON, 0, 0, 1, "", 0, 0, 0},
    {"Observe and Uri-Query", {0x40, 0x01, 0, 2, 0x60, 0x51, 'r', 0x44, 'a', '=', 'b', 'c'}, 12, 0,
     FL_CON, FL_GET, 0, 2, "r", 0, 1, 0},
    {"Block2 is served (fleet/block.c)", {0x40, 0x01, 0, 3, 0xB1, 'r', 0xC1, 0x00}, 8, 0, FL_CON,
     FL_GET, 0, 3, "r", 0, 0, 0},
    {"a Block2 of 4 bytes is a bad option", {0x40, 0x01, 0, 3, 0xB1, 'r', 0xC4, 0, 0, 0, 1}, 11,
     0, FL_CON, FL_GET, 0, 3, "r", 0, 0, 23},
    {"unknown critical option 9", {0x40, 0x01, 0, 4, 0x90}, 5, 0, FL_CON, FL_GET, 0, 4, "", 0, 0, 9},
    {"unknown elective option 2 is ignored", {0x40, 0x01, 0, 5, 0x20}, 5, 0, FL_CON, FL_GET, 0, 5,
     "", 0, 0, 0},
    {"extended delta (13) and length (13)", {0x40, 0x01, 0, 6, 0xD0, 12, 0xDD, 0x00, 0x01,
     'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n'}, 23, 0, FL_CON, FL_GET,
     0, 6, "", 0, 0, 25},
    /* message format errors: -1 */
    {"three bytes", {0x40, 0x01, 0}, 3, -1, 0, 0, 0, 0, "", 0, 0, 0},
    {"version 2", {0x80, 0x01, 0, 1}, 4, -1, 0, 0, 0, 0, "", 0, 0, 0},
    {"token length 9", {0x49, 0x01, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 13, -1, 0, 0, 0, 0, "", 0, 0, 0},
    {"token longer than the datagram", {0x48, 0x01, 0, 1, 1, 2}, 6, -1, 0, 0, 0, 0, "", 0, 0, 0},
    {"empty message with a token", {0x41, 0x00, 0, 1, 9}, 5, -1, 0, 0, 0, 0, "", 0, 0, 0},
    {"payload marker without payload", {0x40, 0x01, 0, 1, 0xFF}, 5, -1, 0, 0, 0, 0, "", 0, 0, 0},
    {"option delta 15", {0x40, 0x01, 0, 1, 0xF1, 'a'}, 6, -1, 0, 0, 0, 0, "", 0, 0, 0},
    {"option longer than the datagram", {0x40, 0x01, 0, 1, 0xB5, 'a'}, 6, -1, 0, 0, 0, 0, "", 0, 0, 0},
};

static void fleet_tests(void) {
    for (size_t i = 0; i < sizeof FL / sizeof *FL; i++) {
        const fl_case_t *c = &FL[i];
        struct fl_msg m;
        int rc = fl_coap_parse(c->d, c->n, &m);
        UC_CHECK(c->name, rc == c->rc, "rc %d, expected %d", rc, c->rc);
        if (rc == 0 && c->rc == 0)
            UC_CHECK(c->name, m.type == c->type && m.code == c->code && m.tkl == c->tkl &&
                                  m.mid == c->mid && !strcmp(m.path, c->path) &&
                                  m.path_too_long == c->too_long && m.observe == c->observe &&
                                  m.bad_option == c->bad_option,
                     "type %u code %u tkl %u mid %u path '%s' too_long %u observe %u bad_option %u",
                     m.type, m.code, m.tkl, m.mid, m.path, m.path_too_long, m.observe, m.bad_option);
    }
    /* Block1/Block2 and Observe values (fleet/block.c, observe.c) */
    static const uint8_t blk[] = {0x40, 0x03, 0, 7, 0x61, 0x01, 0x51, 'r', 0xC2, 0x01, 0x26,
                                  0x41, 0x0E};
    struct fl_msg b;
    int brc = fl_coap_parse(blk, sizeof blk, &b);
    UC_CHECK("Observe 1, Block2 0x126, Block1 0x0E", brc == 0 && b.observe && b.observe_val == 1 &&
             b.has_block2 && b.block2 == 0x126 && b.has_block1 && b.block1 == 0x0E &&
             !b.bad_option, "rc %d observe %u/%u block2 %u/%u block1 %u/%u bad %u", brc,
             b.observe, b.observe_val, b.has_block2, b.block2, b.has_block1, b.block1,
             b.bad_option);
    /* a path over FL_PATH_MAX: flagged, the part that fits kept */
    /* three Uri-Path options of 100 bytes (length 13 + extended byte 87) */
    uint8_t e[600] = {0x40, 0x01, 0, 9};
    size_t k = 4;
    for (int s = 0; s < 3; s++) {
        e[k++] = (uint8_t)((s == 0 ? 11 : 0) << 4 | 13);
        e[k++] = 100 - 13;
        memset(e + k, 'a' + s, 100);
        k += 100;
    }
    struct fl_msg m;
    int rc = fl_coap_parse(e, k, &m);
    UC_CHECK("path over 255 bytes", rc == 0 && m.path_too_long == 1 && strlen(m.path) == 201,
             "rc %d too_long %u len %zu", rc, m.path_too_long, strlen(m.path));
}

/* ---------------- wot-device's request path ---------------- */

/* an answer's payload length and which of Observe (6) and Block2 (23) it carries */
typedef struct {
    size_t payload;
    int observe, block2, ok;
} answer_t;

static answer_t read_answer(const uint8_t *d, size_t n) {
    answer_t a = {0, 0, 0, 0};
    if (n < 4 || 4 + (size_t)(d[0] & 15) > n)
        return a;
    size_t i = 4 + (d[0] & 15);
    unsigned num = 0;
    while (i < n && d[i] != 0xFF) {
        coap_option_t o;
        size_t used = coap_opt_parse(d + i, n - i, &o);
        if (!used)
            return a;
        num += o.delta;
        a.observe |= num == 6;
        a.block2 |= num == 23;
        i += used;
    }
    a.payload = i < n ? n - i - 1 : 0;
    a.ok = 1;
    return a;
}

static void request_tests(void) {
    if (inproc_start(HOBS "r0,0,sleep,8,none,0,0,0,non,0\nbig,0,sleep,3000,none,0,0,0,non,0\n"
                     "slow,1000,sleep,2,none,0,0,0,non,0\nobs,0,sleep,4,deterministic,1000000,0,0,non,60\n",
                     RESP_AUTO)) {
        UC_CHECK("request path: start", 0, "the in-process device did not start");
        return;
    }
    static const struct {
        const char *name;
        uint8_t d[32];
        size_t n;
        uint8_t type, code; /* of the answer */
        size_t payload;     /* its payload bytes */
        int observe, block2; /* it carries Observe, Block2 */
    } REQ[] = {
        {"CON GET r0: piggy-backed 2.05", {0x41, 0x01, 0, 1, 7, 0xB2, 'r', '0'}, 8, FL_ACK, FL_CONTENT,
         8, 0, 0},
        {"NON PUT r0: 2.04", {0x51, 0x03, 0, 2, 8, 0xB2, 'r', '0', 0xFF, 'x'}, 10, FL_NON, FL_CHANGED,
         0, 0, 0},
        {"CON DELETE r0: 2.02", {0x41, 0x04, 0, 3, 9, 0xB2, 'r', '0'}, 8, FL_ACK, FL_DELETED, 0, 0, 0},
        {"CON GET nope: 4.04", {0x41, 0x01, 0, 4, 10, 0xB4, 'n', 'o', 'p', 'e'}, 10, FL_ACK,
         FL_NOT_FOUND, 0, 0, 0},
        {"CON GET big with Block2 0/SZX 6: the first 1024 bytes, with Block2",
         {0x41, 0x01, 0, 5, 11, 0xB3, 'b', 'i', 'g', 0xC1, 0x06}, 11, FL_ACK, FL_CONTENT, 1024, 0, 1},
        {"CON GET big with Block2 2/SZX 6: the last 952 bytes",
         {0x41, 0x01, 0, 11, 14, 0xB3, 'b', 'i', 'g', 0xC1, 0x26}, 11, FL_ACK, FL_CONTENT, 952, 0, 1},
        {"NON GET slow: a separate NON 2.05", {0x51, 0x01, 0, 6, 12, 0xB4, 's', 'l', 'o', 'w'}, 10,
         FL_NON, FL_CONTENT, 2, 0, 0},
        {"CON GET obs with Observe 0: registered, 2.05 with Observe",
         {0x41, 0x01, 0, 7, 13, 0x60, 0x53, 'o', 'b', 's'}, 10, FL_ACK, FL_CONTENT, 4, 1, 0},
        /* message format errors in a CON: rejected with RST (RFC 7252 4.2), counted malformed */
        {"token length 9: RST", {0x49, 0x01, 0, 9}, 4, FL_RST, 0, 0, 0, 0},
        {"option delta 15: RST", {0x40, 0x01, 0, 10, 0xF1, 'a'}, 6, FL_RST, 0, 0, 0, 0},
    };
    uint8_t out[2048];
    for (size_t i = 0; i < sizeof REQ / sizeof *REQ; i++) {
        size_t n = inproc_exchange(REQ[i].d, REQ[i].n, out, sizeof out, 200);
        answer_t a = read_answer(out, n);
        UC_CHECK(REQ[i].name, a.ok && ((out[0] >> 4) & 3) == REQ[i].type && out[1] == REQ[i].code &&
                                  a.payload == REQ[i].payload && a.observe == REQ[i].observe &&
                                  a.block2 == REQ[i].block2,
                 "answer of %zu bytes: type %u code %u.%02u payload %zu observe %d block2 %d", n,
                 n ? (out[0] >> 4) & 3 : 0, n > 1 ? out[1] >> 5 : 0, n > 1 ? out[1] & 31 : 0,
                 a.payload, a.observe, a.block2);
    }
    /* CoAP ping (empty CON): libcoap 4.3.1 answers with RST at most once per session per 1/4 s
     * and not in the first 1/4 s after coap_startup (session->last_tx_rst starts at 0) */
    static const uint8_t PING1[] = {0x40, 0x00, 0, 20}, PING2[] = {0x40, 0x00, 0, 21};
    poll(NULL, 0, 300);
    size_t n = inproc_exchange(PING1, sizeof PING1, out, sizeof out, 200);
    UC_CHECK("CON ping: RST", n == 4 && ((out[0] >> 4) & 3) == FL_RST && out[1] == 0 &&
                                  out[3] == 20, "answer of %zu bytes", n);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    n = inproc_exchange(PING2, sizeof PING2, out, sizeof out, 50);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    if (ms < 200) /* a host stalled for 1/4 s would make the second ping legitimately answered */
        UC_CHECK("a second ping within 1/4 s: no RST (libcoap's limit)", n == 0,
                 "answer of %zu bytes", n);
    else
        printf("note: the second ping took %ld ms, its check is not made\n", ms);
    const struct counters *c = inproc_counters();
    /* an Observe registration is not a request (observe.c); the two format errors are malformed */
    UC_CHECK("request path: counters", c->requests == 6 && c->not_found == 1 &&
                                           c->piggybacked == 4 && c->malformed == 2,
             "requests %llu not_found %llu piggybacked %llu malformed %llu",
             (unsigned long long)c->requests, (unsigned long long)c->not_found,
             (unsigned long long)c->piggybacked, (unsigned long long)c->malformed);
    inproc_stop();
}

int main(void) {
    resources_tests();
    notify_first_tests();
    fleet_tests();
    request_tests();
    return uc_report("wot-device parsers_unit");
}
