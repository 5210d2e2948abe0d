/* http.h - the http:// transport's shared state (http_*.c): requests rendered before the start,
 * per-target connection pools, the response parser. See README "HTTP". */
#ifndef GE_HTTP_H
#define GE_HTTP_H

#include <stdint.h>
#include <stdio.h>

#include "ge.h"
#include "transport.h"
#include "template_vars.h"

#define HTTP_HEAD_MAX 4096 /* a response's status line + headers; a chunk-size line or trailer */
#define HTTP_RBUF 65536    /* one read; body bytes are counted, never kept */

/* ---- http_parse.c: one response, fed in pieces as they arrive ---- */
enum { HP_HEAD = 0, HP_BODY, HP_CHUNK_SIZE, HP_CHUNK_DATA, HP_CHUNK_CRLF, HP_TRAILER, HP_EOF_BODY,
       HP_DONE, HP_ERR };

typedef struct {
    uint8_t state;
    uint8_t close;   /* the server closes the connection after this response */
    uint16_t status; /* 100..599 */
    uint16_t hlen;   /* bytes held in head[] */
    uint64_t remaining; /* of the Content-Length body or of the current chunk */
    uint64_t body;      /* body bytes seen */
    char head[HTTP_HEAD_MAX];
} http_parser_t;

void http_parser_reset(http_parser_t *p);
/* feeds n bytes; returns how many it used (fewer than n once the response is complete: the
 * rest belongs to nothing we asked for). state HP_DONE: complete; HP_ERR: malformed. */
size_t http_parse_feed(http_parser_t *p, const uint8_t *d, size_t n);
void http_parse_eof(http_parser_t *p); /* the peer closed: completes a close-delimited body */

/* ---- http_tmpl.c: --http-header and --http-body-template with placeholders ---- */
typedef struct {
    uint32_t index, device;
    const char *method, *path;
    uint64_t payload; /* the trace's payload_bytes */
    struct tv_list_s *slots; /* per-request values' slots are noted here (NULL: not) ... */
    size_t base;             /* ... at this offset + the template's own */
} http_vars_t;
typedef struct http_tmpl_s http_tmpl_t;
/* compiles text; on a bad placeholder prints "WHERE:LINE:COL: ..." (where = a file or an
 * option) and returns NULL */
http_tmpl_t *http_tmpl_compile(const char *text, const char *where);
/* renders into out (NULL: measure only); returns the length */
size_t http_tmpl_render(const http_tmpl_t *t, const http_vars_t *v, char *out);
void http_tmpl_free(http_tmpl_t *t);
int http_tmpl_dynamic(const http_tmpl_t *t); /* it has a per-request value (template_vars.h) */
char *http_read_file(const char *path); /* a template file's text (malloc'd), or NULL */

/* ---- connections ---- */
enum { CS_CLOSED = 0, CS_CONNECTING, CS_BUSY, CS_FREE };

typedef struct {
    int fd;
    uint16_t ep;
    uint8_t state;
    uint8_t want_out; /* EPOLLOUT interest is set */
    uint8_t own;      /* it writes its own copy (per-request values filled in), not the arena's */
    uint32_t cur;     /* the request it carries (CS_CONNECTING, CS_BUSY) */
    uint32_t tmpl;    /* whose rendered bytes it writes: cur (open loop), the trace line (closed) */
    uint64_t woff;    /* bytes of cur's request written */
    uint32_t served;  /* responses on this connection since it opened */
    int64_t last_kt;  /* kernel stamp (mono) of the last bytes read: a close-delimited body's end */
    http_parser_t p;
} hconn_t;

typedef struct {
    uint32_t *q; /* its requests that waited for a connection, FIFO (each queued at most once) */
    uint32_t qhead, qtail;
    uint32_t *idle; /* deque of its connections not carrying a request: open ones in front */
    uint32_t ihead, icount, iconns;
    uint32_t first_conn; /* its connections are c[first_conn .. first_conn + iconns) */
    uint8_t pump;        /* queued on the pump list */
} hep_t;

typedef struct {
    uint64_t connects, connect_failures, refused, resets, closed_by_server, protocol_errors;
    uint64_t queued, bytes_in, by_class[6]; /* responses by status class (1xx..5xx) */
} http_counts_t;

struct http_s {
    ge_t *g;
    loop_t *L;
    uint64_t *off; /* trace line i's bytes: g->arena + off[i], len[i] */
    uint32_t *len;
    tv_slot_t *slots;   /* per-request values' slots (template_vars.h); NULL: none */
    size_t *slot_first; /* request (trace line) i's slots: slots[slot_first[i]] .. + slot_n[i] */
    uint16_t *slot_n;
    uint32_t copy_len;  /* the longest request with slots: each connection's copy is this long */
    uint8_t *copies;    /* nconns x copy_len, allocated at attach */
    hconn_t *c;
    size_t nconns;
    hep_t *eps;
    uint32_t *pump; /* endpoints whose queue waits for the timers() pass */
    size_t npump;
    http_counts_t n;
    int stamp_pin; /* holds the kernel's receive stamps on between connections (rxstamp_pin.h) */
    uint8_t rbuf[HTTP_RBUF];
};
typedef struct http_s http_t;

/* http_prep.c (main thread): options, rendering, pools; prestart opens keep-alive pools */
int http_render_requests(ge_t *g); /* g->http with every trace line rendered; 0 / 1 / 2 (said) */
int http_prepare(ge_t *g);  /* 0 / 1 env / 2 bad input (said) */
int http_prestart(ge_t *g); /* 0 / 1 */
int http_open_socket(http_t *H, hconn_t *c); /* non-blocking connect started; 0 or -1 errno */

/* http_transport.c: what the open and the closed loop share */
void *http_attach(loop_t *L, ge_t *g);
void http_detach(void *ts);
void http_summary(const ge_t *g, FILE *f);
int http_write_outputs(const ge_t *g);

/* http_conn.c (loop thread) */
/* request idx starts on connection c with trace line tmpl's bytes: 1 sent at *t (the caller
 * marks it sent), 0 could not (local failure: error, not sent), 2 sent and already ended
 * (refused at once) */
int http_start_on(http_t *H, hconn_t *c, uint32_t idx, uint32_t tmpl, int64_t *t);
void http_close_conn(hconn_t *c); /* closes its fd (it leaves the epoll set with it) */
int http_send(void *ts, uint32_t idx, int64_t *t);
void http_on_event(void *ts, uint32_t tag, uint32_t events);
void http_timers(void *ts, int64_t now);
int64_t http_next_deadline(const void *ts);
int http_on_finish(void *ts, uint32_t idx, int outcome, int64_t now);

#endif
