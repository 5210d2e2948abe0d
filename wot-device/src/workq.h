/* workq.h - bounded request queue, worker threads and the completion hand-back.
 * The I/O thread submits jobs; workers run the service emulation; finished jobs go to a
 * completion list and the I/O thread is woken through an eventfd. */
#ifndef WOT_WORKQ_H
#define WOT_WORKQ_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "resources.h"

struct job {
    const struct resource *res;
    uint64_t arrival_ns, start_ns, end_ns;
    uint64_t arrival_k_ns;      /* kernel receive stamp of the request (netstamp.h), 0 = none */
    uint8_t method;
    uint8_t kind;               /* JOB_REQUEST, or JOB_NOTIFY: a sensor read for Observe (observe.c) */
    uint8_t tkl, token[8];      /* the request's token, for the device log */
    void *ctx;                  /* owned by the I/O thread (the libcoap async handle) */
    size_t idx;                 /* slot index */
};

enum { JOB_REQUEST = 0, JOB_NOTIFY = 1 };

struct workq {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job *slots;          /* queue_cap + nthreads job slots */
    size_t nslots;
    size_t *free_list, nfree;   /* I/O thread only */
    struct job **pending;       /* ring of queue_cap: submitted, not started */
    size_t qcap, qhead, qlen;
    struct job **done;          /* ring of nslots: finished, not yet collected */
    size_t dhead, dlen;
    int efd;                    /* eventfd: workers -> I/O thread */
    int stop;
    pthread_t *threads;
    int nthreads;
};

int workq_init(struct workq *q, int nthreads, size_t queue_cap);
/* I/O thread: a free slot, or NULL when the queue is full (the caller answers 5.03). */
struct job *workq_acquire(struct workq *q);
void workq_release(struct workq *q, struct job *j);
void workq_submit(struct workq *q, struct job *j);
/* I/O thread: moves up to max finished jobs to out; clears the eventfd. */
size_t workq_collect(struct workq *q, struct job **out, size_t max);
void workq_shutdown(struct workq *q);

#endif
