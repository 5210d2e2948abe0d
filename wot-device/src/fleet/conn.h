/* conn.h - connected devices of wot-fleet (docs/CONNECTED.md, CONTRACTS §3c): devices that
 * hold a long-lived TCP connection to an edge server, WebSocket (RFC 6455 client; framing,
 * masking, ping/pong and close by wslay) or an HTTP/1.1 chunked subscription (plus one
 * keep-alive connection that POSTs the device's upstream messages). Per device: attach,
 * heartbeat, open-loop upstream events, and a reply of a configured size to every message
 * that arrives on the connection, after the device's service time. Every disconnect is
 * counted and attributed (server closed, reset, testbed).
 *
 * They run on their own epoll loops (conn_loop.c), one thread per --conn-loops, beside the
 * CoAP loops of loop.c; the two share nothing but the process. Timers are a min-heap per loop
 * behind one absolute timerfd; pending replies are records of a pool reserved at start. */
#ifndef WOT_FLEET_CONN_H
#define WOT_FLEET_CONN_H
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "http_chunked.h"
#include "msg_frame.h"
#include "ws_handshake.h"
#include "clock.h"
#include "tcpstamp.h"

#define FL_CN_NIL UINT32_MAX
#define CN_ID_MAX 40              /* longest RPC id copied from a message into its reply */
#define CN_REPLY_MAX 65536
#define CN_ATTACH_HEADERS_MAX 2048  /* attach header lines, decoded */
#define CN_ATTACH_BODY_MAX 8192     /* attach message, decoded */

/* CN_STREAM: the study's attach, one POST whose chunked request body carries everything the
 * device sends and whose chunked response body everything it receives (conn_stream.c) */
enum cn_proto { CN_WEBSOCKET = 0, CN_CHUNKED = 1, CN_STREAM = 2 };
enum cn_kind { CK_WS = 0, CK_SUB = 1, CK_PUB = 2 };
enum cn_state { CS_DOWN = 0, CS_CONNECTING, CS_HEAD, CS_OPEN };
/* who ended a connection (conn-summary.json "disconnects") */
enum cn_cause { CC_SERVER_CLOSED = 0, CC_RESET, CC_TESTBED, CC_PROTOCOL, CC_N };
enum cn_timer { CT_CONNECT = 0, CT_HEARTBEAT, CT_EVENT, CT_REPLY };
/* where a reply carries the RPC's id back (--reply-id): in its body (every device), in a header
 * of a chunked device's reply POST, or in that POST's target (reply_path's "{id}") */
enum cn_reply_id { CR_BODY = 0, CR_HEADER, CR_PATH };

/* counters of one device (conn-devices.csv) */
struct cn_counters {
    uint64_t attaches, connect_failures[CC_N], disconnects[CC_N];
    uint64_t msgs_in, rpcs_in, no_id, replies, replies_lost, events, heartbeats, pongs;
    uint64_t posts_rejected, bytes_in, bytes_out;
};

struct cn_device;

/* one TCP connection of a device */
struct cn_conn {
    int fd;
    uint8_t kind, state;
    uint32_t events;              /* what epoll watches for it now */
    struct cn_device *dev;
    char *hbuf;                   /* response head while it arrives (malloc'd, then freed) */
    uint16_t hlen;
    uint32_t inflight;            /* CK_PUB: POSTs whose response has not come */
    uint32_t body_left;           /* CK_PUB: response body bytes still to skip */
    char *obuf;                   /* CK_SUB/CK_PUB: bytes the socket did not take yet */
    uint32_t olen, ooff, ocap;
};

struct cn_device {
    uint32_t index, line;
    uint8_t proto;
    struct sockaddr_in server, source;  /* source.sin_addr 0: the kernel's choice */
    const char *name, *host, *path, *reply_path;
    const char *attach_headers;   /* whole header lines of the attach request, NULL = none */
    const char *attach_body;      /* the first message once attached, NULL = none */
    uint32_t attach_body_len;
    uint32_t heartbeat_ms, event_ms, service_us, reply_bytes, reconnect_ms;
    uint32_t gen;                 /* +1 per disconnect: timers and replies of an old session */
    uint32_t loop_pos;            /* index in its loop's block */
    uint64_t attached_ns;         /* when the current session opened, 0 = not attached */
    uint8_t ever_attached;
    uint8_t hc_busy;              /* its chunked decoder is running (conn_http.c feed) */
    uint8_t dlen;                 /* chunked/chunked-post: the message delimiter's length, 0 =
                                     none (one chunk is one message) */
    char delim[MF_DELIM_MAX];     /* ends every message down and every chunk up (msg_frame.h) */
    struct cn_conn sub, pub;      /* sub: the WebSocket or the chunked GET; pub: chunked POSTs */
    void *ws;                     /* wslay_event_context_ptr of a WebSocket session */
    struct hc_decoder *hc;        /* chunked decoder of a chunked session; with a delimiter,
                                     the first member of a struct cn_rx (conn_http.c) */
    char key[WS_KEY_LEN + 1];
    uint64_t event_seq;
    uint8_t events_on;            /* its event schedule runs (from its first attach to the
                                     end, whatever its connection: conn_events.c) */
    struct cn_counters c;
};

/* a pending reply: the message arrived, its service is running (a timer) */
struct cn_job {
    uint32_t dev, gen, next;
    uint8_t idlen;
    char id[CN_ID_MAX];
    uint8_t kstamp;               /* arrival_ns is the kernel's receive stamp (else read_ns) */
    uint64_t arrival_ns, due_ns, read_ns;
};

/* one row of conn-log-<loop>.csv */
struct cn_log_row {
    uint64_t arrival_ns, due_ns, end_ns, sent_ns, read_ns;
    uint32_t device;
    uint8_t outcome, idlen;      /* enum cn_outcome */
    uint8_t kstamp;
    char id[CN_ID_MAX];
};
enum cn_outcome { CO_SENT = 0, CO_LOST_DISCONNECT, CO_SEND_ERROR };

/* one upstream event (events-log-<loop>.csv, conn_events.c): every event whose due time came
 * ends in exactly one outcome */
struct cn_ev_row {
    uint64_t due_ns, sent_ns, seq;
    uint32_t device;
    uint8_t outcome;              /* enum cn_ev_outcome */
};
enum cn_ev_outcome {
    CE_SENT = 0,                  /* written whole by its write: sent_ns when that returned */
    CE_QUEUED,                    /* the socket took part or none: the rest waits in the
                                     device's send backlog (wslay's queue, the POST backlog) */
    CE_UNSENT_DOWN,               /* due while the device was not attached: not sent */
    CE_BACKLOG_FULL,              /* the backlog would pass its bound: not sent, the session
                                     ends (a protocol disconnect) */
    CE_SEND_ERROR,                /* the write failed (the session ended) */
    CE_N
};
/* what the last device_send did with the bytes (conn_http.c, conn_ws.c set it) */
enum cn_tx { TX_WHOLE = 0, TX_QUEUED, TX_FULL, TX_FAILED };
#define CN_EV_HIST 96             /* send-lag buckets, 4 per octave from 1.024 us (~34 s) */

/* a loop's events: rows reserved at start; beyond them only the counts and the histogram */
struct cn_events {
    struct cn_ev_row *row;
    size_t cap, n;
    uint64_t unlogged, out[CE_N], bytes, lag_max_ns;
    uint64_t hist[CN_EV_HIST];    /* sent events by send lag (sent - due) */
};

struct cn_heap_ent {
    uint64_t at;
    uint32_t dev, gen_or_job;
    uint8_t kind;
};

struct cn_loop_stats {
    uint64_t wakeups, busy_ns, cpu_ns, heap_full, pool_full, log_dropped;
    uint64_t timer_late_max_ns;
    uint64_t rx_kernel, rx_user;  /* messages stamped by the kernel / by the read's time */
    uint64_t no_kernel_stamps;    /* sockets that refused SO_TIMESTAMPNS */
};

struct cn_loop {
    int id, ep, tfd, wfd, cpu;
    struct cn_device *dev;
    uint32_t ndev;
    struct cn_job *jobs;
    uint32_t jcap, jbump, jfree;
    struct cn_heap_ent *heap;
    uint32_t hn, hcap;
    uint64_t armed;
    struct cn_log_row *log;
    uint64_t *late;               /* timer lateness samples (replies), for percentiles */
    size_t log_cap, log_n, late_n;
    struct cn_loop_stats st;
    struct cn_events ev;
    uint8_t tx_state;             /* enum cn_tx of the last send */
    uint64_t rng;
    uint32_t attached_once;       /* devices of this loop that attached at least once */
    tcpstamp_t rs;                /* the stamps of the read being decoded (every message it
                                     completes carries them); read_ns 0 between events */
    clock_map_t cmap;             /* the kernel's REALTIME stamps -> MONOTONIC */
    volatile int stop;
    pthread_t thread;
    struct cn_set *set;
    uint8_t rx[16384];
    char tx[CN_REPLY_MAX + 512];
};

struct cn_set {
    struct cn_device *dev;
    uint32_t ndev;
    char *strings;
    struct cn_loop *loops;
    int nloops;
    int *cpus, ncpus;
    const char *file, *log_dir, *name;
    uint32_t attach_rate;         /* first connects per second per engine (staggered) */
    size_t log_capacity;
    uint64_t event_rows;          /* rows of events-log-*.csv over all loops (--event-rows) */
    char id_marker[32];           /* the RPC id follows this in a message: "id":" */
    uint8_t reply_id;             /* enum cn_reply_id */
    char id_header[64];           /* CR_HEADER: the reply POST's header that carries the id */
    const char *post_method;      /* a chunked device's upstream requests: POST (or PUT:
                                     webdis publishes a PUT's body) */
    volatile uint32_t attached_total;  /* devices that attached at least once (all loops) */
    int attached_marked;          /* DIR/attached written (by the first loop that saw it) */
    int stamp_pin, pinned;        /* rxstamp_pin.h: holds the kernel's stamping on for the run;
                                     pinned: cn_start opened it; pin_on: stamping was seen on */
    int pin_on;
};

/* conn_file.c: the connections file; "FILE:LINE: what, expected what" and -1 on bad input
 * (s->reply_id set before: a websocket row then needs CR_BODY, a chunked row's reply_path
 * "{id}" exactly with CR_PATH) */
int cn_load(const char *file, struct cn_set *s);
void cn_free(struct cn_set *s);

/* conn_loop.c */
int cn_start(struct cn_set *s);     /* opens the loops and starts their threads */
void cn_stop(struct cn_set *s);     /* stops and joins them (idempotent) */
void cn_release(struct cn_set *s);  /* closes every connection, frees the loops */
uint64_t cn_needed_fds(const struct cn_set *s);

/* conn_loop.c, for conn_ws.c / conn_http.c */
void cn_disconnect(struct cn_loop *l, struct cn_device *d, int cause);
void cn_on_message(struct cn_loop *l, struct cn_device *d, const char *msg, size_t len,
                   size_t total);
/* the session is open: timers, and the attach message when the device has one; 0, or -1 when
 * sending it ended the session */
int cn_on_attached(struct cn_loop *l, struct cn_device *d);
/* the characters of an RPC id after the marker (the application's ids are <app>-<seq>) */
static inline int cn_id_char(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           c == '-' || c == '_' || c == '.';
}
int cn_watch(struct cn_loop *l, struct cn_conn *c, uint32_t events);
int cn_cause_of_errno(int err);
/* recv on c: > 0 bytes (counted), 0 nothing now, -1 the session ended (EOF or error,
 * disconnected with its cause) */
ssize_t cn_recv(struct cn_loop *l, struct cn_device *d, struct cn_conn *c, void *buf, size_t len);
/* reads more of d->sub's response head into its hbuf (capacity cap): the head's length once
 * complete, else 0 (also when the session ended: d->gen changed) */
size_t cn_read_head(struct cn_loop *l, struct cn_device *d, size_t cap);

/* conn_ws.c: a WebSocket session over d->sub */
int cn_ws_send_request(struct cn_loop *l, struct cn_device *d);
void cn_ws_on_event(struct cn_loop *l, struct cn_device *d, uint32_t ev);
int cn_ws_send(struct cn_loop *l, struct cn_device *d, const char *msg, size_t len, int ping);
void cn_ws_close(struct cn_device *d);

/* conn_http.c: the chunked subscription (d->sub) and the POST connection (d->pub) */
int cn_http_send_request(struct cn_loop *l, struct cn_device *d);
void cn_http_on_event(struct cn_loop *l, struct cn_conn *c, uint32_t ev);
/* a POST to reply_path; `id` (NULL: not a reply) fills reply_path's "{id}" ("none" otherwise)
 * and, with CR_HEADER, the id header */
int cn_http_post(struct cn_loop *l, struct cn_device *d, const char *body, size_t len,
                 const char *id);
void cn_http_close(struct cn_device *d);
/* conn_http.c, shared with conn_stream.c: iov[0..n) on c, what the socket does not take kept
 * in c's backlog (sent on EPOLLOUT; a connection still connecting is written once connected):
 * 0, or -1 when the session ended (disconnected with its cause); cn_http_flush sends what the
 * backlog holds, watching EPOLLOUT while some is left */
struct iovec;
int cn_http_put(struct cn_loop *l, struct cn_device *d, struct cn_conn *c, struct iovec *iov,
                int n);
void cn_http_flush(struct cn_loop *l, struct cn_device *d, struct cn_conn *c);

/* conn_stream.c: the held-open POST (d->sub); its request head (and the attach message as
 * the first chunk) once connected, and one chunk of the request body per message */
int cn_stream_send_request(struct cn_loop *l, struct cn_device *d);
int cn_stream_send(struct cn_loop *l, struct cn_device *d, const char *msg, size_t len);

/* conn_loop.c, for conn_events.c: l->tx[0..len) upstream (id: the RPC it answers, NULL for
 * an event or the attach message); the body `{"<key>":<value>,"device":N,"p":"xx..."}` */
int cn_device_send(struct cn_loop *l, struct cn_device *d, size_t len, const char *id);
size_t cn_build_body(struct cn_loop *l, struct cn_device *d, const char *key, const char *value,
                     int quoted);
uint64_t cn_exp_interval_ns(struct cn_loop *l, uint32_t mean_ms);
int cn_timer_add(struct cn_loop *l, uint64_t at, uint32_t dev, uint8_t kind, uint32_t x);

/* conn_events.c: the devices' upstream events on their open-loop schedule */
int cn_events_init(struct cn_loop *l);     /* its rows, its share of s->event_rows */
void cn_events_free(struct cn_loop *l);
/* the first event of a device at its first attach; the rest from each one's due time */
void cn_events_start(struct cn_loop *l, struct cn_device *d, uint64_t now);
/* a CT_EVENT timer came up (due: its scheduled time): sent, or its outcome, and the next */
void cn_event_due(struct cn_loop *l, struct cn_device *d, uint64_t due);
/* the lower bound (ns) of histogram bucket b */
uint64_t cn_ev_bucket_lo(unsigned b);

/* conn_output.c: conn-log-<loop>.csv, events-log-<loop>.csv, conn-devices.csv,
 * conn-summary.json */
int cn_write_outputs(const struct cn_set *s);

#endif
