/* sink.h - the notification sink (build/notify-sink; sink_*.c): the subscriber side of a
 * system under test that notifies. It listens for webhooks (HTTP POSTs the SUT sends it), holds
 * streaming subscriptions (one long HTTP response: chunked, Server-Sent Events, a raw stream) and
 * long-polls (a GET answered by one complete response, then sent again at once on the same
 * keep-alive connection, a new one when the server closed it), CoAP observations (RFC 7641 GET with Observe: 0 to a third-party server), and records every
 * update id it finds in them (sink_scan.h: the digits after --marker) with the instant the bytes
 * arrived: the kernel's receive stamp on CLOCK_MONOTONIC. The analysis joins the ids to the
 * updates the gateway emulator sent ({{seq}}: requests.csv's row) for update->notification
 * latency, notifications/s and updates never notified (wotbench/analysis/notify_sink.py). */
#ifndef GE_SINK_H
#define GE_SINK_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include "clock.h"
#include "sink_scan.h"

#define SINK_MAX_SUBS 64
#define SINK_HEAD_MAX 8192

enum { SUB_WEBHOOK = 0, SUB_STREAM, SUB_OBSERVE, SUB_WEBSOCKET, SUB_LONGPOLL };

typedef struct {
    int kind;
    char name[48];
    char spec[256];   /* ADDR:PORT to listen on, or the URL subscribed to */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char host[128], path[200]; /* a stream's Host and request target; an observation's path */
    int fd;           /* listener, stream connection or observation socket */
    int ready;        /* the stream's response head arrived with 2xx / the observation answered */
    int status;       /* a stream's HTTP status, an observation's first response code */
    uint64_t bytes, messages, ids, connections, errors;
    uint64_t polls;     /* a long-poll: the GETs sent (the first and every re-poll) */
    char req[512];      /* a long-poll: its GET, sent again after every answer */
    size_t reqlen;
    uint64_t head_seen; /* a stream: the bytes of its response head seen (ready at \r\n\r\n) */
    uint32_t win;       /* the last 4 bytes, to find \r\n\r\n */
    char first[16];     /* a stream's status line, its start */
    sink_scan_t scan;   /* a stream's or an observation's scanner (webhooks: per connection) */
} sink_sub_t;

typedef struct {
    uint32_t sub;
    uint8_t kernel; /* t is the kernel's receive stamp (else when the read returned) */
    uint64_t id;
    int64_t t;      /* CLOCK_MONOTONIC ns */
} sink_note_t;

typedef struct {
    const char *out_dir, *marker, *ready_file, *accept;
    int64_t duration_ns;
    size_t cap;        /* --max-notifications */
    sink_sub_t sub[SINK_MAX_SUBS];
    int nsubs;
    sink_note_t *note; /* reserved, touched as it fills */
    size_t n, over_capacity;
    clock_map_t map;
    int64_t start_mono, end_mono;
    int epfd;
} sink_t;

/* sink_io.c: sockets and the loop. 0 ok, 1 environment (said), 2 bad input (said) */
int sink_open(sink_t *S);   /* listeners bound, streams and observations registered */
int sink_run(sink_t *S);    /* until --duration-ms or SIGINT/SIGTERM */
void sink_note(sink_t *S, uint32_t sub, uint64_t id, int64_t t, int kernel);
/* sink_ws.c: a WebSocket subscription on the connected sub[si].fd (handshake now); 0 / 1 */
int sink_ws_open(sink_t *S, uint32_t si, const char *port);
void sink_ws_read(sink_t *S, uint32_t si);
void sink_ws_pending(sink_t *S, uint32_t si);

#endif
