/* ge.h - shared data structures of the gateway emulator. */
#ifndef GE_H
#define GE_H

#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/socket.h>

enum { M_GET = 1, M_POST = 2, M_PUT = 3, M_DELETE = 4,
       M_OBSERVE = 5, M_CANCEL = 6, /* trace methods; OBSERVE/CANCEL are GETs (observe.c) */
       M_PATCH = 7 };               /* http:// only (trace.c refuses it with coap://) */
enum { SCHEME_NONE = 0, SCHEME_COAP = 1, SCHEME_COAPS = 2, SCHEME_HTTP = 3 }; /* ge_t.scheme */
static inline int wire_code(int m) { return m >= 5 ? 1 : m; }
enum { O_NONE = 0, O_OK, O_ERROR, O_TIMEOUT, O_RESET, O_UNSENT, O_COUNT };
enum { WAIT_BUSY = 0, WAIT_HYBRID = 1 };
enum { ST_LOADING = 0, ST_WAITING, ST_SENDING, ST_DRAINING, ST_DONE };

/* request flags */
#define RF_SENT 0x01  /* first copy handed to the kernel */
#define RF_DONE 0x02  /* outcome final */
#define RF_ACKED 0x04 /* empty ACK seen: stop retransmitting, wait for the separate response */
#define RF_KSTAMP 0x08 /* rx_wait_ns is valid: the response carried a kernel receive stamp */
#define RF_INHEAP 0x10 /* in the retransmission heap (block.c reschedules lazily) */
#define RF_QUEUED 0x20 /* HTTP: waited for a free connection; queued_ns is valid */
#define RF_NEWCONN 0x40 /* HTTP: opened its own TCP connection (R includes the handshake) */

/* One trace request: prepared before the start, filled in by the loop. 72 bytes. */
typedef struct {
    int64_t sched_ns; /* relative to the start instant */
    int64_t sent_ns;  /* first transmission, relative; valid with RF_SENT */
    int64_t recv_ns;  /* response read by the loop (user space), relative; valid when code != 0 */
    union {
        int64_t rtx_due;   /* CoAP: absolute mono ns of the next retransmission (--retransmit) */
        int64_t queued_ns; /* HTTP: relative instant it began waiting for a connection */
    };
    uint32_t device;
    uint32_t path_id;   /* index into the interned path table */
    uint32_t dgram_off; /* datagram bytes in the arena */
    union {
        uint32_t pair; /* CoAP: (socket, endpoint) pair index */
        uint32_t conn; /* HTTP: its connection + 1 while it holds one, else 0 */
    };
    uint16_t dgram_len;
    union {
        uint16_t mid;    /* CoAP message ID */
        uint16_t status; /* HTTP status code (code then holds its class, 1..5) */
    };
    uint16_t ep;   /* endpoint index */
    uint16_t sock; /* socket index */
    uint8_t method;
    uint8_t code; /* CoAP response code byte, 0 = none */
    uint8_t outcome;
    uint8_t flags;
    uint8_t retrans;
    uint8_t pad;
    uint16_t rtx_t0_ms; /* initial retransmission timeout, ACK_TIMEOUT * [1, 1.5] */
    uint32_t rx_wait_ns; /* recv_ns - kernel receive stamp (saturated), with RF_KSTAMP */
} req_t;

typedef struct {
    struct sockaddr_storage addr;
    socklen_t addrlen;
} endpoint_t;

/* Per (socket, endpoint) pair: the requests using it, in order; MIDs are base + k. */
typedef struct {
    uint32_t first; /* offset into pair_reqs */
    uint32_t count;
    uint16_t mid_base;
    uint16_t pad;
} pair_t;

/* A distinct request URI: endpoint, path for the output, encoded CoAP options. */
typedef struct uri_s {
    char *path; /* path without leading '/', plus "?query" if any */
    uint8_t *opts;
    uint16_t optlen;
    uint16_t ep;
    uint8_t *obs_opts[2]; /* the options with Observe: 0 (OBSERVE) and Observe: 1 (CANCEL) */
    uint16_t obs_len[2];
    char *authority; /* http://: the Host header value (host[:port] as written), else NULL */
    struct tv_slot_s *tv; /* coap://: per-request values' slots in opts (coap_tmpl.h), or NULL */
    uint8_t ntv;
    uint8_t tv_clock; /* one of them is the clock's: filled at the send */
} uri_t;

typedef struct {
    /* options */
    const char *trace_path;
    const char *out_dir;
    const char *label;
    int64_t start_at; /* absolute mono ns, 0 = now + 100 ms */
    int wait;
    int64_t spin_ns;
    int non; /* 1 = NON requests */
    int64_t timeout_ns;
    int retransmit;
    int ports_per_device; /* 0 = auto */
    int cpu;              /* -1 = no pinning */
    int64_t warmup_ns;    /* 0 = no warm-up pings before the start */
    struct {
        const char *host; /* --proxy HOST:PORT: every request goes to this forward proxy */
        uint16_t port;
        int mode; /* PROXY_URI or PROXY_SCHEME */
    } proxy;
    size_t max_notifications; /* notification records preallocated (observe.c) */
    struct observe_s *obs;    /* NULL unless the trace has OBSERVE lines */
    int block_size;           /* --block-size: 0 = no block-wise transfer, else 16..1024 */
    struct block_s *blk;      /* block.c state (with --block-size) */
    struct {
        const char *identity; /* --dtls-psk-identity */
        const char *key_file; /* --dtls-psk-key-file */
        int mode;             /* --dtls-sessions: DTLS_REUSE / DTLS_PER_REQUEST (dtls.h) */
        int mode_set;
        uint8_t key[64]; /* PSK_MAX_KEY (common/psk.h) */
        size_t keylen;
    } dtls_opt;
    struct dtls_s *dtls; /* dtls_*.c state; NULL = plain UDP (coap://) */
    struct {
        int clients;         /* --clients N: closed-loop virtual clients (clients.c); 0 = open loop */
        int64_t duration_ns; /* --duration-ms: clients issue requests until start + this */
        int64_t warmup_ns, cooldown_ns; /* --mark-warmup-ms / --mark-cooldown-ms */
        int think;           /* THINK_* */
        int64_t think_a_ns, think_b_ns; /* const/exp: mean in a; uniform: [a, b] */
        int select;          /* SELECT_* */
        size_t max_requests; /* --max-requests: records preallocated (virtual memory) */
        int capacity_reached; /* the record table filled: the clients stopped early */
        int64_t stopped_ns;  /* when the clients stopped issuing, relative to the start */
        uint32_t per_client; /* --requests-per-client: a client stops after M requests; 0 = no budget */
        int64_t ramp_ns;     /* --ramp-ms: client k starts at k/N of it (after a think time) */
        uint32_t done_clients; /* clients that used their whole budget */
    } closed;
    struct {
        int conns;       /* --http-connections: per target (keep-alive pool, or at most that
                          * many concurrent connections with --http-connection-per-request) */
        int per_request; /* --http-connection-per-request: a new connection for each request */
        const char *headers[32]; /* --http-header 'Name: value' (templates, http_tmpl.c) */
        int nheaders;
        const char *body_file;   /* --http-body-template FILE (coap://: the PUT/POST payload) */
        uint64_t seed;           /* --seed: the run's seed, {{rand}} (template_vars.h) */
    } http_opt;
    struct coap_payload_s *cpl; /* coap:// with --http-body-template (coap_payload.c), or NULL */
    struct {
        char *bytes;  /* the trace's body column (trace.c), decoded: the bodies back to back */
        size_t used, cap;
        uint64_t *at; /* per request: 1 + its body's offset in bytes; 0: filler bytes 'x' */
    } tbody;          /* read at the load, copied into the requests before the start, freed */
    struct http_s *http; /* http_*.c state; NULL unless the trace is http:// */
    uint32_t trace_clients; /* open loop: the trace's `client` column names N source endpoints */
    const struct transport *tp; /* chosen once from `scheme` (transport.c) */
    int scheme;          /* trace URIs: SCHEME_* (one per trace) */
    long scheme_line;    /* the line that fixed it */

    /* trace */
    req_t *reqs;
    size_t n;
    uint8_t *arena; /* all datagrams */
    struct uri_s *uris; /* distinct URIs; req_t.path_id indexes this */
    size_t nuris;
    endpoint_t *eps;
    size_t neps;

    /* sockets and MID pairs */
    int *socks; /* nsocks fds */
    size_t nsocks;
    int ports_used; /* sockets per family actually used */
    size_t cap;     /* records in reqs (closed loop: the preallocated table); else n */
    pair_t *pairs;  /* nsocks_per_family * neps entries, index = ep * ppd + k */
    uint32_t *pair_reqs;
    uint64_t salt;

    /* run */
    int64_t start_mono;
    int64_t end_mono;
    int rx_stamps;     /* SO_TIMESTAMPNS accepted on every socket */
    int memory_locked; /* mlockall(MCL_CURRENT) succeeded before the start (loop.c) */
    int64_t map_bracket_ns; /* widest REALTIME->MONOTONIC bracket used (error <= half of it) */
    volatile uint64_t *progress; /* mmap'ed progress.bin, PG_WORDS words */
    const char *journal_path;    /* --journal: the request table in a shared mapping */
    void *journal;               /* its header; reqs follow it (journal.c) */
    int interrupted_by;          /* 0, SIGINT, SIGTERM */
    struct {
        int enabled, rounds;
        size_t answered;
        int64_t took_ns;
    } warmup; /* warmup.c: readiness pings before the start */
} ge_t;

/* journal.c: --journal FILE (after net_prepare: moves reqs into the mapping); 0 ok, 1 env */
int journal_open(ge_t *g, const char *path);
void journal_started(ge_t *g); /* records start_mono in the header */
/* stop.c */
extern volatile sig_atomic_t ge_stop_signal;
void stop_on_signals(void); /* SIGINT/SIGTERM set ge_stop_signal */

/* trace.c */
int trace_load(ge_t *g); /* 0 ok; prints FILE:LINE message and returns 2 on bad input */
/* the reader itself, on an open stream named `name` in messages (tests and fuzz targets) */
int trace_read(ge_t *g, FILE *fp, const char *name);
void trace_free(ge_t *g); /* what trace_read allocated (the GE itself exits instead) */
/* request i's body from the trace's body column (payload_bytes bytes), or NULL: filler bytes.
 * Valid until trace_body_release, which main.c calls once the requests are prepared. */
static inline const char *trace_body(const ge_t *g, size_t i) {
    return g->tbody.at && g->tbody.at[i] ? g->tbody.bytes + g->tbody.at[i] - 1 : NULL;
}
void trace_body_release(ge_t *g);

/* proxy.c (more in proxy.h): --proxy HOST:PORT [--proxy-mode uri|scheme] */
enum { PROXY_URI = 0, PROXY_SCHEME = 1 };
int proxy_parse(ge_t *g, char *arg); /* 0 ok, -1 not HOST:PORT */

/* net.c */
int net_prepare(ge_t *g); /* sockets, MIDs, tokens, datagrams; 0 ok, 1 env failure, 2 bad input */
void net_close(ge_t *g);
/* a non-blocking UDP socket bound to any address, SO_TIMESTAMPNS on (else *stamps_ok = 0) */
int net_open_socket(int family, int rcvbuf, int *stamps_ok);
size_t net_encode_request(uint8_t *buf, size_t cap, int non, int method, uint16_t mid,
                          const uint8_t token[8], const uint8_t *opts, size_t optlen,
                          size_t payload);
int addr_eq(const struct sockaddr_storage *a, const struct sockaddr_storage *b);
/* endpoint index by address (net.c): open addressing, at most half full; slot = endpoint + 1 */
typedef struct {
    uint32_t *slot;
    size_t mask;
} ep_index_t;
int ep_index_add(ep_index_t *ix, const ge_t *g, size_t e); /* g->eps[e] is new; -1 OOM */
int ep_index_build(const ge_t *g, ep_index_t *ix);          /* every endpoint; -1 OOM */
int ep_index_find(const ge_t *g, const ep_index_t *ix, const struct sockaddr_storage *a);
int net_find_ep(const ge_t *g, const struct sockaddr_storage *a); /* linear, pre-start only; -1 */
void token_for(const ge_t *g, uint32_t idx, uint8_t out[8]);

/* observe.c (RFC 7641 observations; see README "Observe") */
int observe_note(ge_t *g, uint32_t idx, int method, uint32_t uri, uint32_t dev, const char **why);
int observe_prepare(ge_t *g); /* after net_prepare: state + records; 0 ok, 1 env failure */
uint32_t observe_token_index(const ge_t *g, uint32_t idx); /* a CANCEL uses its OBSERVE's token */
/* a message carrying an OBSERVE's token: the request it finishes (or NULL) and, for a CON
 * message, the reply type (ACK, or RST after the cancel) */
req_t *observe_on_message(ge_t *g, uint32_t idx, int type, uint16_t mid, const void *pdu,
                          int64_t t, int64_t kt, int *reply);
int observe_write(const ge_t *g); /* notifications.csv + observe.json; 0 ok, 1 failure */
void observe_free(ge_t *g);

/* block.c (RFC 7959 block-wise transfer; see README "Block-wise transfer") */
int block_note_body(ge_t *g, uint32_t idx, uint64_t body); /* loading; 0 ok, -1 no memory */
int block_prepare(ge_t *g);                                 /* after trace_load; 0 / 1 */
void block_free(ge_t *g);
size_t block_first_payload(const ge_t *g, uint32_t idx, size_t small);
size_t block_opts(ge_t *g, uint32_t idx, const uint8_t *uopts, size_t ulen, uint8_t *out,
                  size_t cap);
int block_prepare_mids(ge_t *g, size_t npairs);
/* a response of request idx: 1 = it asks for the next block (the datagram is patched in
 * place), 0 = the final response, -1 = a late copy of an earlier block's response (ignore) */
int block_follow_up(ge_t *g, uint32_t idx, const void *pdu, int code);
/* a follow-up block in flight: its retransmission count (and due time), else -1 */
int block_rtx(ge_t *g, uint32_t idx, int64_t *due);
void block_rtx_set(ge_t *g, uint32_t idx, int64_t due, int sent);
int block_write(const ge_t *g); /* blockwise.csv; 0 ok, 1 failure */

/* warmup.c */
int warmup_run(ge_t *g); /* ping every endpoint until it answers or the warm-up ends; 1 env failure */
/* the readiness result (from the pings, or the DTLS handshakes): summary.json "warmup" and
 * <out>/warmup.json; 0 ok, 1 failure (said) */
int warmup_record(ge_t *g, const uint8_t *answered, int rounds, int64_t took_ns);

/* loop.c */
int loop_run(ge_t *g); /* runs the send loop; 0 ok, 1 env failure */

/* clients.c: closed-loop options (--clients, --think, --select) */
enum { THINK_ZERO = 0, THINK_CONST, THINK_EXP, THINK_UNIFORM };
enum { SELECT_ROUND_ROBIN = 0, SELECT_ONE, SELECT_RANDOM };
int clients_parse_think(ge_t *g, const char *spec);   /* 0 ok, -1 bad */
int clients_parse_select(ge_t *g, const char *name); /* 0 ok, -1 bad */
int clients_check_options(const ge_t *g);            /* 0 ok, 2 bad input (said) */
/* limits.c: n sockets of one process (RLIMIT_NOFILE, raised as needed; the ephemeral port
 * range); 0 ok, 2 after a message naming `what` (the option) with the limit and the fix */
int limits_check_sockets(size_t n, const char *what);
/* the request's phase for requests.csv: "warmup" / "measure" / "cooldown" */
const char *clients_phase(const ge_t *g, const req_t *r);

/* stats.c */
typedef struct {
    double p50, p90, p99, p999, max;
} lag_stats_t;
void stats_send_lag(const ge_t *g, lag_stats_t *out);
void stats_outcomes(const ge_t *g, uint64_t counts[O_COUNT]);
void sort_i64(int64_t *v, size_t n);
int64_t pct_nearest(const int64_t *sorted, size_t n, double q); /* nearest rank, n >= 1 */

/* output.c: the top-level writer (requests.csv, the feature writers, summary.json) */
int output_progress_open(ge_t *g);
void output_progress_close(ge_t *g);
int output_write(ge_t *g);

/* outfile.c: every output file: <out>/NAME opened for writing into `path` (OUT_PATH_MAX bytes),
 * NULL after a message naming it; outfile_close: 0, or 1 after a message when a write or the
 * close failed */
#define OUT_PATH_MAX 4096
FILE *outfile_open(const ge_t *g, const char *name, char *path);
int outfile_close(FILE *f, const char *path);

/* json.c: a JSON string ("..." with escapes) */
void json_str(FILE *f, const char *s);

/* xorshift64 (Marsaglia): the GE's cheap PRNG for retransmission jitter and closed-loop think
 * times / target choice; *state must not be 0. */
static inline uint64_t xorshift64(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static inline void progress_set(ge_t *g, int word, uint64_t v) {
    if (g->progress)
        g->progress[word] = v;
}
static inline void progress_inc(ge_t *g, int word) {
    if (g->progress)
        g->progress[word] = g->progress[word] + 1;
}
enum { PG_MAGIC = 0, PG_TOTAL, PG_SENT, PG_OK, PG_TIMEOUT, PG_RESET, PG_ERROR, PG_STATE,
       PG_ENDPOINTS, PG_ANSWERED, PG_WORDS };

#endif
