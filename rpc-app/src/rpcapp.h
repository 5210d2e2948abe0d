/* rpcapp.h - wot-rpcapp: the application side of connected devices (docs/CONNECTED.md,
 * CONTRACTS §3d). N applications in one process. Closed loop (default): each application
 * thinks a uniform [think_min, think_max] time, sends one RPC to a uniformly chosen device id
 * through the server under test (an HTTP/1.1 request on the application's keep-alive
 * connection), waits for the reply or the timeout, again. Open loop (--rate): the process
 * schedules RPCs at a rate (Poisson or constant inter-arrival), each given to a uniformly
 * chosen application, which sends it at once (pipelined on its connection) unless it already
 * has --window RPCs outstanding (unanswered, or whose request the server has not answered):
 * then the RPC is not sent and ends as "overflow". Replies come back on K WebSocket
 * subscriptions of the process
 * (the server relays each device's replies to one of K reply channels) and are matched to
 * their request by its id "<app>-<seq>", found after the reply marker. The RPC carries the id
 * where the config puts it: the body template's or the path's "{id}", or a header. Every RPC
 * ends in exactly one outcome: ok, timeout, rejected (the server refused the request), or lost
 * (the application's connection ended before the reply, or was not up when an open-loop RPC
 * was due, or its request's write failed: then it was never sent, no send_ns), overflow
 * (open loop, above).
 * Transport (--transport): http (above), or websocket: each application holds ONE WebSocket to
 * --ws-path and sends each RPC as one masked text frame (--frame, "{device}" and "{id}"
 * filled); what the server sends back on it is one in-order ack per RPC frame (as an HTTP
 * response per request: app_ws.c). Replies still come on the K subscriptions. */
#ifndef WOT_RPCAPP_H
#define WOT_RPCAPP_H
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "clock.h"
#include "http_chunked.h"
#include "tcpstamp.h"
#include "ws_handshake.h"

enum ra_outcome { RO_PENDING = 0, RO_OK, RO_TIMEOUT, RO_REJECTED, RO_LOST, RO_OVERFLOW, RO_N };
enum ra_arrival { ARR_POISSON = 0, ARR_CONSTANT };
#define RA_MAX_WINDOW 1024
#define RA_MAX_RANGES 64
enum ra_state { AS_DOWN = 0, AS_CONNECTING, AS_THINK, AS_WAIT };
enum ra_transport { TR_HTTP = 0, TR_WEBSOCKET };
enum ra_ack { ACK_OK = 0, ACK_UNHEARD, ACK_REJECTED };   /* websocket: what an ack says */
#define RA_FRAME_MAX 4096        /* an RPC frame's payload, the template filled */
#define RA_ACK_KEEP 256          /* an ack's first bytes, where its texts are looked for */

struct ra_row {                  /* one RPC (rpc-log.csv) */
    uint64_t sched_ns, send_ns, reply_ns;   /* send_ns 0: never sent (overflow, lost) */
    uint64_t reply_read_ns;      /* ok: when the read that completed the reply returned;
                                    reply_ns is that read's kernel stamp when kstamp */
    uint8_t kstamp;
    uint32_t app, seq, device;
    uint16_t status;             /* HTTP status of the POST, 0 = none yet */
    uint8_t outcome;
};

struct ra_app {
    int fd;
    uint8_t state;
    uint32_t events, seq;
    uint32_t heap_pos;           /* in the timer heap, UINT32_MAX = not armed */
    uint64_t wake_ns;            /* end of think time, or the oldest pending RPC's timeout */
    uint64_t due_ns;             /* closed loop: its next RPC's scheduled time */
    uint32_t *pend;              /* rows of its RPCs not ended yet, in send order (<= window) */
    uint32_t *resp;              /* ring: rows whose HTTP response has not come (<= window) */
    uint16_t npend, nresp, resp_head;
    uint32_t body_left;          /* POST response body bytes to skip */
    uint16_t hlen;
    uint16_t hoff;               /* websocket: frames that came with the 101, not yet read */
    uint8_t upgrading;           /* websocket: the Upgrade went out, its 101 not checked yet */
    uint8_t eof;                 /* websocket: the read saw the end (or an error) */
    uint8_t inmsg;               /* websocket: a data message (an ack) is being read */
    uint8_t clen;                /* websocket: bytes of the control frame being read */
    uint16_t klen;               /* websocket: bytes kept of that message */
    uint64_t fgot;               /* websocket: payload bytes of the frame being read */
    void *wf;                    /* websocket: wslay frame context reading what the server
                                    sends (its acks, pings, close) */
    char key[WS_KEY_LEN + 1];
    char keep[RA_ACK_KEEP];      /* websocket: the first bytes of the message being read */
    char ctl[125];               /* websocket: a control frame's payload (a ping's, echoed) */
    char head[512];
};

struct ra_sub {                  /* one WebSocket reply subscription */
    int fd;
    uint8_t state;
    uint32_t events, k;
    void *ws;
    char key[WS_KEY_LEN + 1];
    uint16_t hlen;
    uint16_t hoff;                       /* open: frames that came with the 101, not yet read */
    char head[1024];
};

struct ra_config {
    struct sockaddr_in server;
    struct sockaddr_in source;           /* 0: the kernel's choice */
    char host[64];
    const char *rpc_path;                /* printf-style with one %u: the device id; "{id}" the
                                            RPC's id */
    const char *reply_path;              /* printf-style with at most one %u: the reply shard */
    const char *body;                    /* the RPC body; {id} is replaced by the id */
    const char *id_header;               /* NULL, or the header that carries the RPC's id */
    const char *reply_marker;            /* a reply's id follows this */
    const char *method;                  /* of an RPC: POST (default), PUT, or GET (no body) */
    char reply_headers[1024];            /* extra header lines of the subscriptions' Upgrade */
    const char *reply_subscribe;         /* NULL, or a message sent once a subscription is
                                            open, printf-style with at most one %u: the shard */
    const char *log_dir;
    uint32_t apps, shards, first_shard, dev_count;   /* subscriptions: shards first_shard.. */
    uint32_t nranges, range_first[RA_MAX_RANGES], range_count[RA_MAX_RANGES];  /* the devices
                                            it calls: dev_count ids in these ranges */
    uint32_t first_app, apps_total;      /* ids first_app..first_app+apps-1 of apps_total: the
                                            other processes' ids are another cell's (others) */
    uint32_t think_min_ms, think_max_ms, timeout_ms;
    double rate;                         /* open loop: RPCs/s of this process; 0 = closed loop */
    int arrival;                         /* open loop: enum ra_arrival */
    uint32_t window;                     /* open loop: outstanding RPCs per application */
    uint64_t start_ns, duration_ns, warmup_ns;
    size_t max_rows;
    int cpu;
    int transport;                       /* enum ra_transport */
    const char *ws_path;                 /* websocket: each application's Upgrade target */
    char ws_headers[1024];               /* websocket: extra header lines of its Upgrade */
    const char *frame;                   /* websocket: an RPC's text frame, {device} and {id}
                                            replaced */
    int acks;                            /* websocket: the server answers each frame (1) */
    const char *ack_unheard;             /* NULL, or text of an ack: nobody got it (202) */
    const char *ack_rejected;            /* NULL, or text of an ack: refused (rejected) */
};

struct ra_stats {
    uint64_t sent, outcome[RO_N], unmatched, others, late_replies, events_in, sub_disconnects;
    uint64_t app_disconnects, bytes_out, bytes_in, post_2xx, post_202, unsent_down,
        unsent_write;   /* lost, never sent: connection down when due / its write failed */
    uint64_t reply_kernel, reply_user;   /* ok replies stamped by the kernel / by the read */
    uint64_t no_kernel_stamps;           /* subscriptions whose socket refused the option */
};

int ra_run(const struct ra_config *cfg);

/* the bytes that came with an Upgrade's 101 after its head (head[*hoff..hlen)), handed to the
 * frame parser before the socket's next ones: how many were copied into buf (0: none left) */
static inline size_t ra_leftover(const char *head, uint16_t *hoff, uint16_t hlen, uint8_t *buf,
                                 size_t len) {
    size_t left = *hoff < hlen ? (size_t)(hlen - *hoff) : 0, k = left < len ? left : len;
    memcpy(buf, head + *hoff, k);
    *hoff = (uint16_t)(*hoff + k);
    return k;
}

/* app.c, for app_ws.c */
uint64_t ra_rnd(void);
int ra_watch(int fd, uint32_t *cur, uint32_t events, void *ptr);
void ra_ack(struct ra_app *a, int cls);       /* enum ra_ack: the oldest RPC not acked yet */

/* app_ws.c: an application's own WebSocket (--transport websocket) */
void aw_init(const struct ra_config *cfg, struct ra_stats *st);
int aw_event(struct ra_app *a, uint32_t ev);  /* -1: the application's connection ended */
size_t aw_frame(struct ra_app *a, char *out, size_t cap, const char *msg, size_t len);
void aw_free(struct ra_app *a);
extern volatile sig_atomic_t ra_stop;   /* set by SIGTERM/SIGINT: the run ends, files written */

#endif
