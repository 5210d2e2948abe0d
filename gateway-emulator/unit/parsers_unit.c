/* parsers_unit.c - the GE's two parsers in process, table-driven: the trace reader (trace.c)
 * and the HTTP/1.1 response parser (http_parse.c). Good inputs with the values they parse to,
 * bad inputs with their exact error (the trace reader's FILE:LINE message; the HTTP parser's
 * HP_ERR and the byte at which it stopped). Run by tests/c/test_parsers_inprocess.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/ge.h"
#include "../src/http.h"
#include "unit_check.h"

/* ---------------- trace reader ---------------- */

enum { OPT_NONE = 0, OPT_BLOCK = 1, OPT_DTLS = 2, OPT_HTTP_CONNS = 4, OPT_BODY_TMPL = 8 };

static int load(const char *text, int opts, ge_t *g, char *err, size_t cap) {
    memset(g, 0, sizeof *g);
    if (opts & OPT_BLOCK)
        g->block_size = 1024;
    if (opts & OPT_DTLS)
        g->dtls_opt.identity = "id";
    if (opts & OPT_HTTP_CONNS)
        g->http_opt.conns = 4;
    if (opts & OPT_BODY_TMPL)
        g->http_opt.body_file = "b.txt";
    FILE *fp = fmemopen((void *)text, strlen(text), "r");
    if (!fp) {
        perror("fmemopen");
        exit(2);
    }
    uc_capture_begin();
    int rc = trace_read(g, fp, "t.csv");
    uc_capture_end(err, cap);
    fclose(fp);
    return rc;
}

#define BODY_HDR "device_id,send_time_us,method,uri,payload_bytes,body\n"

typedef struct {
    const char *name, *text;
    int opts;
    size_t n, nuris, neps;
    int scheme;
    /* the last request */
    uint32_t device;
    int64_t sched_ns;
    int method;
    uint16_t dgram_len, sock;
    const char *last_path; /* its URI's output path */
} trace_good_t;

static const trace_good_t TRACE_GOOD[] = {
    {"header and two lines",
     "device_id,send_time_us,method,uri\n0,0,GET,coap://127.0.0.1:5683/r0\n"
     "7,1500,PUT,coap://127.0.0.1/a/b,10\n",
     OPT_NONE, 2, 2, 1, SCHEME_COAP, 7, 1500000, M_PUT, 10, 0, "a/b"},
    {"comments, blank lines, CRLF and spaces around fields",
     "# a comment\n\n  3 , 5 ,POST, coap://127.0.0.1/r0?x=1 , 0 \r\n", OPT_NONE, 1, 1, 1,
     SCHEME_COAP, 3, 5000, M_POST, 0, 0, "r0?x=1"},
    {"client column", "0,0,GET,coap://127.0.0.1/r0,,3\n1,2,PUT,coap://[::1]/r1,4,0\n", OPT_NONE,
     2, 2, 2, SCHEME_COAP, 1, 2000, M_PUT, 4, 0, "r1"},
    {"OBSERVE then CANCEL",
     "4,0,OBSERVE,coap://127.0.0.1/t\n4,10,CANCEL,coap://127.0.0.1/t\n", OPT_NONE, 2, 1, 1,
     SCHEME_COAP, 4, 10000, M_CANCEL, 0, 0, "t"},
    {"http:// with PATCH and a body", "0,0,PATCH,http://127.0.0.1:8080/x?y=1,2048\n", OPT_NONE,
     1, 1, 1, SCHEME_HTTP, 0, 0, M_PATCH, 0, 0, "x?y=1"},
    {"a body above one datagram with --block-size", "0,0,POST,coap://127.0.0.1/big,5000\n",
     OPT_BLOCK, 1, 1, 1, SCHEME_COAP, 0, 0, M_POST, 0, 0, "big"},
    {"coaps:// with DTLS credentials", "0,0,DELETE,coaps://127.0.0.1/r0\n", OPT_DTLS, 1, 1, 1,
     SCHEME_COAPS, 0, 0, M_DELETE, 0, 0, "r0"},
    {"a body column (coap://)", BODY_HDR "0,0,PUT,coap://127.0.0.1/p,13,{\"a\":1%2C\"b\":2}\n"
     "1,5,GET,coap://127.0.0.1/p,,\n2,9,POST,coap://127.0.0.1/q,4,\n", OPT_NONE, 3, 2, 1,
     SCHEME_COAP, 2, 9000, M_POST, 4, 0, "q"},
    {"a body column with a client column (coap://)",
     "device_id,send_time_us,method,uri,payload_bytes,client,body\n0,0,PUT,coap://127.0.0.1/p,2,3,ok\n",
     OPT_NONE, 1, 1, 1, SCHEME_COAP, 0, 0, M_PUT, 2, 3, "p"},
    {"a body column (http://)", BODY_HDR "0,0,PUT,http://127.0.0.1:8081/things/t1,8,%7B%22id%22:1}\n",
     OPT_NONE, 1, 1, 1, SCHEME_HTTP, 0, 0, M_PUT, 8, 0, "things/t1"},
};

typedef struct {
    const char *name, *text;
    int opts;
    const char *err;
} trace_bad_t;

static const trace_bad_t TRACE_BAD[] = {
    {"empty file", "", OPT_NONE,
     "t.csv:0: no requests in the trace, expected at least one request line"},
    {"header only", "device_id,send_time_us,method,uri\n", OPT_NONE,
     "t.csv:1: no requests in the trace, expected at least one request line"},
    {"three fields", "0,0,GET\n", OPT_NONE,
     "t.csv:1: 3 fields, expected 4 to 6: device_id,send_time_us,method,uri[,payload_bytes"
     "[,client]]"},
    {"seven fields", "0,0,GET,coap://127.0.0.1/r0,0,0,0\n", OPT_NONE,
     "t.csv:1: 7 fields, expected 4 to 6: device_id,send_time_us,method,uri[,payload_bytes"
     "[,client]]"},
    {"client column on one line only", "0,0,GET,coap://127.0.0.1/r0,,1\n0,0,GET,coap://127.0.0.1/r0\n",
     OPT_NONE, "t.csv:2: 4 fields, expected 6 (with a client column) like the trace's first request"},
    {"device_id not a number", "x,0,GET,coap://127.0.0.1/r0\n", OPT_NONE,
     "t.csv:1: bad device_id 'x', expected an integer >= 0"},
    {"device_id above 2^32-1", "4294967296,0,GET,coap://127.0.0.1/r0\n", OPT_NONE,
     "t.csv:1: bad device_id '4294967296', expected an integer >= 0"},
    {"negative send time", "0,-1,GET,coap://127.0.0.1/r0\n", OPT_NONE,
     "t.csv:1: bad send_time_us '-1', expected an integer >= 0 (microseconds)"},
    {"decreasing send times", "0,10,GET,coap://127.0.0.1/r0\n0,9,GET,coap://127.0.0.1/r0\n",
     OPT_NONE,
     "t.csv:2: send_time_us 9 is before the previous line's 10, expected non-decreasing times"},
    {"unknown method", "0,0,FETCH,coap://127.0.0.1/r0\n", OPT_NONE,
     "t.csv:1: bad method 'FETCH', expected GET, PUT, POST, DELETE, OBSERVE or CANCEL (coap://) "
     "or GET, PUT, POST, DELETE or PATCH (http://)"},
    {"payload with GET", "0,0,GET,coap://127.0.0.1/r0,5\n", OPT_NONE,
     "t.csv:1: payload_bytes 5 with GET, expected a payload only with PUT, POST or PATCH"},
    {"payload above one datagram", "0,0,PUT,coap://127.0.0.1/r0,1025\n", OPT_NONE,
     "t.csv:1: bad payload_bytes '1025', expected an integer 0..1024 (larger bodies need "
     "--block-size)"},
    {"PATCH over coap://", "0,0,PATCH,coap://127.0.0.1/r0\n", OPT_NONE,
     "t.csv:1: method PATCH with a coap://127.0.0.1/r0 uri, expected GET, PUT, POST, DELETE, "
     "OBSERVE or CANCEL (PATCH is sent over http:// only)"},
    {"OBSERVE over http://", "0,0,OBSERVE,http://127.0.0.1/r0\n", OPT_NONE,
     "t.csv:1: method OBSERVE with an http:// uri, expected GET, PUT, POST, DELETE or PATCH "
     "(Observe is CoAP only)"},
    {"https://", "0,0,GET,https://127.0.0.1/r0\n", OPT_NONE,
     "t.csv:1: https:// uri 'https://127.0.0.1/r0': TLS is not supported, expected http:// (or "
     "coap://, coaps://)"},
    {"unknown scheme", "0,0,GET,ftp://127.0.0.1/r0\n", OPT_NONE,
     "t.csv:1: bad uri 'ftp://127.0.0.1/r0', expected coap://host[:port]/path[?query] (or "
     "coaps://, http://)"},
    {"two schemes", "0,0,GET,coap://127.0.0.1/r0\n0,1,GET,http://127.0.0.1/r0\n", OPT_NONE,
     "t.csv:2: uri 'http://127.0.0.1/r0' mixes http:// with the coap:// URIs from line 1, "
     "expected one scheme per trace"},
    {"coaps:// without credentials", "0,0,GET,coaps://127.0.0.1/r0\n", OPT_NONE,
     "t.csv:1: coaps:// uri 'coaps://127.0.0.1/r0' without DTLS credentials, expected "
     "--dtls-psk-identity and --dtls-psk-key-file"},
    {"coap:// with --http-connections", "0,0,GET,coap://127.0.0.1/r0\n", OPT_HTTP_CONNS,
     "t.csv:1: coap:// uri 'coap://127.0.0.1/r0' with --http-* options, expected http:// URIs "
     "(or no --http-* option)"},
    {"http:// port 0", "0,0,GET,http://127.0.0.1:0/r0\n", OPT_NONE,
     "t.csv:1: bad port in uri 'http://127.0.0.1:0/r0', expected a port 1..65535"},
    {"http:// with a fragment", "0,0,GET,http://127.0.0.1/r0#f\n", OPT_NONE,
     "t.csv:1: bad uri 'http://127.0.0.1/r0#f', expected http://host[:port]/path[?query] (no "
     "fragment)"},
    {"CANCEL without OBSERVE", "0,0,CANCEL,coap://127.0.0.1/t\n", OPT_NONE,
     "t.csv:1: CANCEL without an open OBSERVE of the same device_id and uri, expected an earlier "
     "OBSERVE line with the identical uri (CANCEL ends the oldest open one)"},
    {"client column with OBSERVE", "0,0,OBSERVE,coap://127.0.0.1/t,,0\n", OPT_NONE,
     "t.csv:1: method OBSERVE with a client column, expected GET, PUT, POST or DELETE"},
    {"a body with GET", BODY_HDR "0,0,GET,coap://127.0.0.1/a,,x\n", OPT_NONE,
     "t.csv:2: a body with GET, expected a body only with PUT, POST or PATCH"},
    {"a bad escape in a body", BODY_HDR "0,0,PUT,coap://127.0.0.1/a,1,%G1\n", OPT_NONE,
     "t.csv:2: bad %-escape in body, expected %XX with two hex digits"},
    {"a body shorter than payload_bytes", BODY_HDR "0,0,PUT,http://127.0.0.1/a,3,%41b\n", OPT_NONE,
     "t.csv:2: body of 2 bytes with payload_bytes 3, expected a body of exactly payload_bytes "
     "bytes (decoded)"},
    {"a body without payload_bytes", BODY_HDR "0,0,PUT,coap://127.0.0.1/a,,ab\n", OPT_NONE,
     "t.csv:2: body of 2 bytes with payload_bytes (none) 0, expected a body of exactly "
     "payload_bytes bytes (decoded)"},
    {"too few fields with a body column", BODY_HDR "0,0,GET\n", OPT_NONE,
     "t.csv:2: 3 fields, expected 5 to 7: device_id,send_time_us,method,uri[,payload_bytes"
     "[,client]],body (the header names a body column)"},
    {"a body column and --http-body-template", BODY_HDR "0,0,PUT,coap://127.0.0.1/a,1,x\n",
     OPT_BODY_TMPL, "t.csv:1: a body column with --http-body-template, expected one of them (each "
     "request's own body, or one template for all)"},
};

static void trace_tests(void) {
    char err[2048];
    ge_t g;
    for (size_t i = 0; i < sizeof TRACE_GOOD / sizeof *TRACE_GOOD; i++) {
        const trace_good_t *c = &TRACE_GOOD[i];
        int rc = load(c->text, c->opts, &g, err, sizeof err);
        UC_CHECK(c->name, rc == 0 && !*err, "rc %d, stderr '%s'", rc, err);
        if (rc == 0) {
            const req_t *r = &g.reqs[g.n - 1];
            UC_CHECK(c->name, g.n == c->n && g.nuris == c->nuris && g.neps == c->neps &&
                                  g.scheme == c->scheme,
                     "n %zu uris %zu eps %zu scheme %d", (size_t)g.n, g.nuris, g.neps, g.scheme);
            UC_CHECK(c->name, r->device == c->device && r->sched_ns == c->sched_ns &&
                                  r->method == c->method && r->dgram_len == c->dgram_len &&
                                  r->sock == c->sock,
                     "last request: device %u sched_ns %lld method %d dgram_len %u sock %u",
                     r->device, (long long)r->sched_ns, r->method, r->dgram_len, r->sock);
            UC_CHECK(c->name, strcmp(g.uris[r->path_id].path, c->last_path) == 0,
                     "path '%s', expected '%s'", g.uris[r->path_id].path, c->last_path);
        }
        trace_free(&g);
    }
    /* the values only some cases have */
    load("0,0,GET,coap://127.0.0.1/r0,,3\n1,2,PUT,coap://[::1]/r1,4,0\n", 0, &g, err, sizeof err);
    UC_CHECK("client column: clients", g.trace_clients == 4 && g.reqs[0].sock == 3,
             "trace_clients %u sock %u", g.trace_clients, g.n ? g.reqs[0].sock : 0);
    trace_free(&g);
    load("0,0,PATCH,http://127.0.0.1:8080/x?y=1,2048\n", 0, &g, err, sizeof err);
    UC_CHECK("http://: authority and body", g.n == 1 && g.uris[0].authority &&
                 strcmp(g.uris[0].authority, "127.0.0.1:8080") == 0 && g.reqs[0].dgram_off == 2048,
             "authority %s body %u", g.n ? g.uris[0].authority : "-", g.n ? g.reqs[0].dgram_off : 0);
    trace_free(&g);
    /* the body column: each request's own bytes, decoded once; an empty field is filler */
    load(BODY_HDR "0,0,PUT,coap://127.0.0.1/p,13,{\"a\":1%2C\"b\":2}\n1,5,GET,coap://127.0.0.1/p,,\n"
         "2,9,POST,coap://127.0.0.1/q,4,\n3,9,POST,coap://127.0.0.1/q,3,%25%0A%2c\n", 0, &g, err,
         sizeof err);
    UC_CHECK("body column: bytes", g.n == 4 && trace_body(&g, 0) &&
                 memcmp(trace_body(&g, 0), "{\"a\":1,\"b\":2}", 13) == 0 && !trace_body(&g, 1) &&
                 !trace_body(&g, 2) && trace_body(&g, 3) && memcmp(trace_body(&g, 3), "%\n,", 3) == 0,
             "n %zu, stderr '%s'", (size_t)g.n, err);
    trace_body_release(&g);
    UC_CHECK("body column: released", !trace_body(&g, 0) && !g.tbody.bytes, "still held");
    trace_free(&g);
    load("device_id,send_time_us,method,uri\n0,0,PUT,coap://127.0.0.1/p,4\n", 0, &g, err, sizeof err);
    UC_CHECK("no body column: filler", g.n == 1 && !trace_body(&g, 0), "a body without the column");
    trace_free(&g);
    { /* a CoAP body above the block size is refused (one datagram); an HTTP one is not */
        static char big[2200];
        int k = snprintf(big, sizeof big, BODY_HDR "0,0,PUT,coap://127.0.0.1/a,1025,");
        memset(big + k, 'y', 1025);
        strcpy(big + k + 1025, "\n");
        int rc = load(big, OPT_BLOCK, &g, err, sizeof err);
        UC_CHECK("a CoAP body above one block", rc == 2 && strcmp(err, "t.csv:2: a body of 1025 "
                 "bytes with a CoAP uri, expected at most 1024 (a body from the trace is sent in "
                 "one datagram, not block-wise)") == 0, "rc %d, stderr '%s'", rc, err);
        trace_free(&g);
    }
    for (size_t i = 0; i < sizeof TRACE_BAD / sizeof *TRACE_BAD; i++) {
        const trace_bad_t *c = &TRACE_BAD[i];
        const char *text = c->text;
        int rc = load(text, c->opts, &g, err, sizeof err);
        UC_CHECK(c->name, rc == 2 && strcmp(err, c->err) == 0,
                 "rc %d, stderr\n  '%s'\n expected\n  '%s'", rc, err, c->err);
        trace_free(&g);
    }
    /* a NUL byte inside a line (the text's length given, not found by strlen) */
    static const char NUL_TEXT[] = "0,0,GET,coap://127.0.0.1/r0\n0,0,G\0T,coap://127.0.0.1/r0\n";
    memset(&g, 0, sizeof g);
    FILE *fp = fmemopen((void *)NUL_TEXT, sizeof NUL_TEXT - 1, "r");
    uc_capture_begin();
    int rc = trace_read(&g, fp, "t.csv");
    uc_capture_end(err, sizeof err);
    fclose(fp);
    UC_CHECK("NUL byte", rc == 2 && strcmp(err, "t.csv:2: NUL byte in line, expected text") == 0,
             "rc %d, stderr '%s'", rc, err);
    trace_free(&g);
}

/* ---------------- HTTP/1.1 response parser ---------------- */

typedef struct {
    const char *name, *text;
    int eof;          /* the peer closes after the text */
    uint8_t state;    /* after the text (and the close) */
    size_t used;      /* bytes http_parse_feed consumed */
    uint16_t status;
    uint64_t body;
    uint8_t close;
} http_case_t;

#define ALL ((size_t)-1)
static const http_case_t HTTP_CASES[] = {
    {"Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 0, HP_DONE, ALL, 200, 5, 0},
    {"bytes after the response are not used", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiHTTP/1.1",
     0, HP_DONE, 40, 200, 2, 0},
    {"Content-Length 0", "HTTP/1.1 404 Not Found\r\ncontent-length:0\r\n\r\n", 0, HP_DONE, ALL, 404, 0, 0},
    {"chunked, extension and trailer",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5;x=y\r\nhello\r\nA\r\n0123456789\r\n"
     "0\r\nX-T: 1\r\n\r\n", 0, HP_DONE, ALL, 200, 15, 0},
    {"chunked wins over Content-Length",
     "HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
     0, HP_DONE, ALL, 200, 1, 0},
    {"close-delimited body", "HTTP/1.1 200 OK\r\n\r\nabc", 1, HP_DONE, ALL, 200, 3, 1},
    {"HTTP/1.0 closes unless keep-alive", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", 0,
     HP_DONE, ALL, 200, 1, 1},
    {"HTTP/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx",
     0, HP_DONE, ALL, 200, 1, 0},
    {"Connection: close", "HTTP/1.1 503 x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", 0,
     HP_DONE, ALL, 503, 0, 1},
    {"the first of a repeated Content-Length",
     "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 7\r\n\r\nx", 0, HP_DONE, ALL, 200, 1, 0},
    {"100 Continue, then the response",
     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok", 0, HP_DONE,
     ALL, 201, 2, 0},
    {"204 has no body", "HTTP/1.1 204 No Content\r\n\r\n", 0, HP_DONE, ALL, 204, 0, 0},
    {"304 has no body", "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", 0, HP_DONE, ALL,
     304, 0, 0},
    {"incomplete head", "HTTP/1.1 200 OK\r\nContent-Le", 0, HP_HEAD, ALL, 0, 0, 0},
    {"incomplete Content-Length body", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", 0,
     HP_BODY, ALL, 200, 3, 0},
    /* malformed: HP_ERR at the byte where the parser stopped */
    {"not HTTP/1.x", "HTTP/2.0 200 OK\r\n\r\n", 0, HP_ERR, ALL, 0, 0, 0},
    {"status 600", "HTTP/1.1 600 x\r\n\r\n", 0, HP_ERR, ALL, 0, 0, 0},
    {"status with a letter", "HTTP/1.1 2x0 OK\r\n\r\n", 0, HP_ERR, ALL, 0, 0, 0},
    {"short status line", "HTTP/1.1\r\n\r\n", 0, HP_ERR, ALL, 0, 0, 0},
    {"Content-Length not a number", "HTTP/1.1 200 OK\r\nContent-Length: 1a\r\n\r\nx", 0, HP_ERR,
     39, 200, 0, 0},
    {"Content-Length above 2^64", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
     0, HP_ERR, ALL, 200, 0, 0},
    {"chunk size not hex", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, HP_ERR,
     ALL, 200, 0, 0},
    {"chunk size above 2^60", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     "10000000000000000\r\n", 0, HP_ERR, 66, 200, 0, 0},
    {"chunk data without CRLF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n", 0,
     HP_ERR, 54, 200, 1, 0},
    {"closed inside a Content-Length body", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", 1,
     HP_ERR, ALL, 200, 3, 0},
    {"closed before the head ended", "HTTP/1.1 200 OK\r\n", 1, HP_ERR, ALL, 0, 0, 0},
};

static void http_run(const http_case_t *c, size_t piece, http_parser_t *p, size_t *used) {
    size_t n = strlen(c->text);
    http_parser_reset(p);
    *used = 0;
    while (*used < n && p->state != HP_DONE && p->state != HP_ERR) {
        size_t k = n - *used < piece ? n - *used : piece;
        size_t u = http_parse_feed(p, (const uint8_t *)c->text + *used, k);
        *used += u;
        if (u < k)
            break;
    }
    if (c->eof && p->state != HP_DONE && p->state != HP_ERR)
        http_parse_eof(p);
}

static void http_tests(void) {
    static http_parser_t p;
    /* whole, one byte at a time and in 7-byte pieces: the same result */
    static const size_t PIECES[] = {(size_t)-1, 1, 7};
    for (size_t i = 0; i < sizeof HTTP_CASES / sizeof *HTTP_CASES; i++) {
        const http_case_t *c = &HTTP_CASES[i];
        size_t want_used = c->used == ALL ? strlen(c->text) : c->used;
        for (size_t k = 0; k < 3; k++) {
            size_t used;
            http_run(c, PIECES[k], &p, &used);
            char name[160];
            snprintf(name, sizeof name, "%s (pieces of %zd)", c->name, (ssize_t)PIECES[k]);
            UC_CHECK(name, p.state == c->state && used == want_used,
                     "state %d used %zu, expected state %d used %zu", p.state, used, c->state,
                     want_used);
            if (c->state != HP_ERR || c->status)
                UC_CHECK(name, p.status == c->status && p.body == c->body && p.close == c->close,
                         "status %u body %llu close %u, expected %u %llu %u", p.status,
                         (unsigned long long)p.body, p.close, c->status,
                         (unsigned long long)c->body, c->close);
        }
    }
    /* a head of HTTP_HEAD_MAX bytes without its end is malformed */
    static char big[HTTP_HEAD_MAX + 64];
    memset(big, 'a', sizeof big);
    memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
    http_parser_reset(&p);
    size_t used = http_parse_feed(&p, (const uint8_t *)big, sizeof big);
    UC_CHECK("head over HTTP_HEAD_MAX", p.state == HP_ERR && used == 0, "state %d used %zu",
             p.state, used);
}

int main(void) {
    trace_tests();
    http_tests();
    return uc_report("gateway-emulator parsers_unit");
}
