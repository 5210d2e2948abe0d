/* fleet.h - wot-fleet: many emulated CoAP devices in one process (docs/CONTRACTS.md §3b).
 *
 * One table of per-device state (struct fl_device), split into contiguous blocks, one per
 * event loop (struct fl_loop, one thread each, epoll). Every request lives in a job record
 * taken from its loop's pool; the device's FIFO queue and its list of live jobs are links
 * through those records, the loop's timers (sleep-mode service ends, retransmissions of
 * separate CON responses) are a min-heap of job indices behind one absolute timerfd, and
 * busy-mode service runs on worker threads that hand finished jobs back through an eventfd.
 * Pools, heap, log and rings are reserved once at start; nothing is allocated per request. */
#ifndef WOT_FLEET_H
#define WOT_FLEET_H
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../resources.h"
#include "clock.h"
#include "coap_wire.h"

#define FL_NIL UINT32_MAX
#define FL_MAX_DATAGRAM 1152     /* one CoAP datagram: header, token, options, 1024 payload */

enum fl_response { FL_RESP_AUTO = 0, FL_RESP_PIGGYBACK = 1, FL_RESP_SEPARATE = 2 };

/* counters of one device (fleet-devices.csv) */
struct fl_counters {
    uint64_t requests, responses, overload_503, not_found, malformed, piggybacked, log_dropped;
};

/* The last piggy-backed exchange of a device: a retransmitted CON request (its ACK was lost)
 * gets the same response again instead of a second service (RFC 7252 §4.5). */
struct fl_last {
    uint32_t peer_addr;      /* network order; 0 = none */
    uint16_t peer_port, mid;
    const struct resource *res;
    uint8_t code, tkl, token[8];
    uint8_t method, has_block1, has_block2;   /* a block-wise answer is rebuilt (block.c) */
    uint32_t block1, block2;
};

struct fl_res_file;
struct fl_obs_dev;    /* fleet/observe.c */
struct fl_imp_dev;    /* fleet/impair.c */

struct fl_device {
    int fd;                       /* its UDP socket */
    uint32_t index;               /* global device index (what the logs carry) */
    uint32_t line;                /* devices-file line, for messages */
    uint16_t slots, busy;         /* concurrency and slots in service */
    uint32_t queue_cap, queued;   /* bounded FIFO of waiting requests */
    uint32_t q_head, q_tail;      /* FIFO through fl_job.next */
    uint32_t live_head;           /* every live job of the device (dedup, ACK matching) */
    uint16_t next_mid;            /* message IDs of separate CON / NON responses */
    uint8_t response;             /* enum fl_response */
    uint64_t piggyback_max_ns;
    const char *name;
    const char *listen;           /* as written in the devices file */
    const struct fl_res_file *rf; /* its resources (shared by the devices naming that file) */
    struct sockaddr_in addr;
    struct fl_counters c;
    struct fl_last last;
    struct fl_obs_dev *obs;       /* NULL: no observable resource (fleet/observe.c) */
    struct fl_imp_dev *imp;       /* NULL: not impaired (fleet/impair.c) */
    uint32_t push;                /* push: its index among its loop's pushing devices, FL_NIL
                                   * = none (fleet_push.h; only with --push) */
};

enum fl_job_state { JS_FREE = 0, JS_QUEUED, JS_SLEEPING, JS_AT_WORKER, JS_AWAIT_ACK, JS_TICK };
/* what a job is: a request; or, for Observe (fleet/observe.c), a resource's notification
 * process (its next tick, JS_TICK), a sensor read (served like a request), a CON
 * notification awaiting its ACK */
enum fl_job_kind { FL_JOB_REQUEST = 0, FL_JOB_TICK, FL_JOB_READ, FL_JOB_NOTIFY };

struct fl_job {
    uint32_t dev;                 /* index into the loop's device block */
    uint32_t next;                /* FIFO / free list */
    uint32_t live_prev, live_next;
    uint32_t heap_pos;            /* FL_NIL when no timer */
    uint8_t state, method, type, tkl, token[8];
    uint8_t piggyback;            /* response in the ACK (CON) rather than separate */
    uint8_t rtx;                  /* retransmissions of the separate CON response so far */
    uint16_t req_mid, resp_mid;
    uint16_t code;
    uint8_t kind;                 /* enum fl_job_kind */
    uint8_t has_block1, has_block2;  /* the request's Block1/Block2 (fleet/block.c) */
    uint32_t block1, block2;
    uint32_t obs, seq;            /* FL_JOB_NOTIFY: observer, Observe value; TICK/READ: res */
    const struct resource *res;
    uint64_t arrival_ns, arrival_k_ns, start_ns, end_ns, due_ns, sent_ns;
    uint64_t rtx_timeout_ns;      /* current ACK timeout of the separate CON response */
    struct sockaddr_in peer;
};

/* one row of fleet-log-<loop>.csv */
struct fl_log_row {
    uint64_t arrival_ns, start_ns, end_ns, arrival_k_ns, sent_ns, due_ns;
    const struct resource *res;   /* NULL: unknown path (4.04) */
    uint32_t device;
    uint8_t method, code, tkl, token[8];
};

struct fl_heap_ent {
    uint64_t at;
    uint32_t job;
};

/* per-loop counters that are not a device's (fleet-summary.json "loop") */
struct fl_loop_stats {
    uint64_t requests, wakeups, busy_ns, pool_503, rtx_sent, rtx_gave_up, duplicates, rst_in;
    uint64_t send_errors, no_kernel_stamps, cpu_ns, spins;
};

struct fl_loop {
    int id;
    int ep, tfd, wfd;             /* epoll, timer (absolute CLOCK_MONOTONIC), wake/completions */
    struct fl_device *dev;        /* this loop's block of the device table */
    uint32_t ndev;
    int cpu;                      /* pin to this cpu, -1 = no pinning */
    /* job pool: bump allocation then a free list (untouched records cost no memory) */
    struct fl_job *jobs;
    uint32_t jcap, jbump, jfree;
    /* timers */
    struct fl_heap_ent *heap;
    uint32_t hn;
    uint64_t armed;               /* deadline the timerfd is armed for, 0 = disarmed */
    uint64_t spin_ns;             /* wake this long before a timer and poll up to it */
    /* busy-mode work: jobs for the workers and finished jobs back (mutex-protected rings) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t *work, wcap, whead, wlen;
    uint32_t *done, dhead, dlen;
    int workers_stop;
    /* device log */
    struct fl_log_row *log;
    size_t log_cap, log_n;
    uint64_t log_dropped;
    struct fl_loop_stats st;
    struct fl_obs_loop *obs;      /* NULL: no observable device in this loop */
    struct fl_imp_loop *imp;      /* NULL: no impaired device in this loop */
    uint64_t block2_follow_ups, block1_continues;   /* fleet/block.c */
    clock_map_t cmap;             /* REALTIME kernel stamps -> MONOTONIC */
    uint64_t rng;                 /* xorshift64: retransmission timeouts, message IDs */
    volatile int stop;
    struct fl_push_loop *push;    /* push: this loop's pushing devices, NULL without --push */
    pthread_t thread;
    uint8_t rx[FL_MAX_DATAGRAM + 64], tx[FL_MAX_DATAGRAM + 64];
};

struct fl_res_file {
    char *path;
    struct resource_set rs;
    char *wkc;                    /* the /.well-known/core body (RFC 6690 link format) */
    size_t wkc_len;
};

struct fleet {
    struct fl_device *dev;
    uint32_t ndev;
    struct fl_res_file *files;
    uint32_t nfiles;
    char *strings;                /* names and listen specs of every device */
    struct fl_loop *loops;
    int nloops, nworkers;
    pthread_t *workers;
    const char *name, *log_dir, *devices_file;
    size_t log_capacity;
    int rcvbuf;
    uint64_t spin_ns;             /* --spin-us: poll the last part of a timer's wait */
    int *cpus, ncpus;
    uint32_t observers;           /* --observers: observer records per observable device */
    /* the devices file's impairment columns (fleet/impair.c): distinct specs, and per device
     * 1 + its spec's index (0 = none) and its seed; NULL without those columns */
    struct fl_imp_spec *imp_specs;
    uint32_t nimp_specs, *imp_spec_of;
    uint64_t *imp_seed_of;
    struct fl_push *push;         /* push: --push FILE's schedule (fleet_push.h), else NULL */
};

/* devices_file.c: parses FILE into f->dev / f->files; prints "FILE:LINE: what, expected what"
 * and returns -1 on bad input. */
int fl_devices_load(const char *file, struct fleet *f);
void fl_devices_free(struct fleet *f);

/* loop.c */
int fl_loop_init(struct fleet *f, struct fl_loop *l, int id, uint32_t first, uint32_t n);
void *fl_loop_run(void *arg);
void fl_loop_wake(struct fl_loop *l);
void fl_loop_free(struct fl_loop *l);

/* workers.c: busy-mode service threads (worker w serves loop w % loops) */
int fl_workers_start(struct fleet *f);
void fl_workers_stop(struct fleet *f);
/* loop thread: hands a job to its loop's workers */
void fl_work_submit(struct fl_loop *l, uint32_t job);

/* output.c: the files written at exit; 0 ok, -1 (message printed) */
int fl_write_outputs(const struct fleet *f);

/* ---- what loop.c offers fleet/observe.c, block.c and impair.c (the loop thread only) ---- */
/* n records reserved untouched (MAP_NORESERVE: pages cost memory once written); NULL fails */
void *fl_reserve(size_t n, size_t size);
void fl_unreserve(void *p, size_t n, size_t size);
uint32_t fl_job_take(struct fl_loop *l, uint32_t dev, uint8_t kind);  /* FL_NIL: pool empty */
void fl_job_drop(struct fl_loop *l, uint32_t j);      /* its timer cancelled, back to the pool */
void fl_timer_at(struct fl_loop *l, uint32_t j, uint64_t at);
/* the device's FIFO and slots, as a request: 0 started or queued, -1 the queue is full */
int fl_serve(struct fl_loop *l, uint32_t j);
/* sends l->tx[0..len) from the device (through its egress impairment); 0 on failure, else
 * the instant it was handed on */
uint64_t fl_send(struct fl_loop *l, struct fl_device *d, const struct sockaddr_in *peer,
                 size_t len);
/* RFC 7252 §4.2: the first ACK timeout of a CON message, random in [2 s, 3 s] */
uint64_t fl_ack_timeout(struct fl_loop *l);
void fl_process_datagram(struct fl_loop *l, struct fl_device *d, size_t n,
                         const struct sockaddr_in *peer, uint64_t arrival, uint64_t arrival_k);

/* fleet/observe.c (RFC 7641, CONTRACTS §3b "Observe") */
int fl_obs_init(struct fleet *f, struct fl_loop *l);            /* 0, -1 (message printed) */
uint32_t fl_obs_jobs(const struct fl_loop *l);                  /* jobs it may hold at once */
void fl_obs_start(struct fl_loop *l);                           /* the first ticks */
/* a GET with Observe 0/1 on an observable resource: answered here (1), else 0 */
int fl_obs_request(struct fl_loop *l, struct fl_device *d, const struct fl_msg *m,
                   const struct sockaddr_in *peer, const struct resource *res);
void fl_obs_tick(struct fl_loop *l, uint32_t j);                /* a TICK job's timer */
void fl_obs_read_done(struct fl_loop *l, uint32_t j);           /* a READ job ended */
size_t fl_obs_build(struct fl_loop *l, const struct fl_job *J); /* a NOTIFY job's bytes */
void fl_obs_rejected(struct fl_loop *l, uint32_t j, int timed_out);  /* NOTIFY: RST/given up */
/* an RST no job matched: a NON notification's (its observer goes) */
void fl_obs_rst(struct fl_loop *l, struct fl_device *d, uint16_t mid,
                const struct sockaddr_in *peer);
int fl_obs_write(const struct fleet *f, const struct fl_loop *l);  /* fleet-notify-<loop>.csv */
void fl_obs_json(FILE *out, const struct fleet *f);             /* , "observe": ... */
void fl_obs_free(struct fl_loop *l);

/* fleet/block.c (RFC 7959) */
/* a follow-up of a block-wise transfer (GET Block2 NUM > 0, Block1 M = 1): answered (1) */
int fl_block_follow_up(struct fl_loop *l, struct fl_device *d, const struct fl_msg *m,
                       const struct sockaddr_in *peer, const struct resource *res);
/* the response of a served request that is block-wise (1, *len its bytes in l->tx), else 0 */
int fl_block_response(struct fl_loop *l, const struct fl_job *J, uint8_t type, uint16_t mid,
                      size_t *len);
void fl_block_json(FILE *out, const struct fleet *f);           /* , "blockwise": ... */

/* fleet/impair.c (app-level impairments, CONTRACTS §3 "App-level impairments") */
/* a devices-file row's impair/impair_ge/impair_seed: 0, -1 after "FILE:LINE: ..." */
int fl_imp_parse_row(struct fleet *f, uint32_t dev, const char *spec, const char *ge,
                     const char *seed, const char *file, long line);
void fl_imp_specs_free(struct fleet *f);
int fl_imp_init(struct fleet *f, struct fl_loop *l);
/* egress: 1 when l->tx[0..len) goes now, 0 when dropped or held (sent later) */
int fl_imp_out(struct fl_loop *l, struct fl_device *d, const struct sockaddr_in *peer,
               size_t len, uint64_t now);
/* ingress: 1 when l->rx[0..n) is processed now, 0 when dropped or held */
int fl_imp_in(struct fl_loop *l, struct fl_device *d, size_t n, const struct sockaddr_in *peer,
              uint64_t arrived);
uint64_t fl_imp_next_due(const struct fl_loop *l);              /* 0: nothing held */
void fl_imp_release(struct fl_loop *l, uint64_t now);           /* due datagrams go on */
int fl_imp_write(const struct fleet *f);                        /* fleet-impair.csv */
void fl_imp_json(FILE *out, const struct fleet *f);             /* , "impair": ... */
void fl_imp_free(struct fl_loop *l);

#endif
