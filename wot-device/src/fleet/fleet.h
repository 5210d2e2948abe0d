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

#include "../resources.h"
#include "clock.h"

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
};

struct fl_res_file;

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
    uint32_t push;                /* push: its index among its loop's pushing devices, FL_NIL
                                   * = none (fleet_push.h; only with --push) */
};

enum fl_job_state { JS_FREE = 0, JS_QUEUED, JS_SLEEPING, JS_AT_WORKER, JS_AWAIT_ACK };

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

#endif
