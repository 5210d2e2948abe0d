/* workq.c - worker pool and bounded queue (see workq.h). */
#include "workq.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "service.h"

static void *worker(void *arg) {
    struct workq *q = arg;
    service_thread_init();
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (q->qlen == 0 && !q->stop)
            pthread_cond_wait(&q->cv, &q->mu);
        if (q->stop)
            break;
        struct job *j = q->pending[q->qhead];
        q->qhead = (q->qhead + 1) % q->qcap;
        q->qlen--;
        pthread_mutex_unlock(&q->mu);

        j->start_ns = mono_ns();
        service_run(j->res->mode,
                    j->kind == JOB_NOTIFY ? j->res->notify_service_ns : j->res->service_ns,
                    j->start_ns);
        j->end_ns = mono_ns();

        pthread_mutex_lock(&q->mu);
        q->done[(q->dhead + q->dlen) % q->nslots] = j;
        int wake = q->dlen++ == 0;
        if (wake) {
            /* wake the I/O thread with the mutex released: on a shared core it would otherwise
             * run at once, block on the mutex and switch back (two extra context switches) */
            pthread_mutex_unlock(&q->mu);
            uint64_t one = 1;
            while (write(q->efd, &one, sizeof one) < 0 && errno == EINTR) {
            }
            pthread_mutex_lock(&q->mu);
        }
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int workq_init(struct workq *q, int nthreads, size_t queue_cap) {
    *q = (struct workq){.nthreads = 0, .qcap = queue_cap, .efd = -1};
    q->nslots = queue_cap + (size_t)nthreads;
    q->slots = calloc(q->nslots, sizeof *q->slots);
    q->free_list = calloc(q->nslots, sizeof *q->free_list);
    q->pending = calloc(queue_cap, sizeof *q->pending);
    q->done = calloc(q->nslots, sizeof *q->done);
    q->threads = calloc((size_t)nthreads, sizeof *q->threads);
    if (!q->slots || !q->free_list || !q->pending || !q->done || !q->threads)
        return -1;
    for (size_t i = 0; i < q->nslots; i++) {
        q->slots[i].idx = i;
        q->free_list[q->nfree++] = q->nslots - 1 - i;
    }
    q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->efd < 0)
        return -1;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&q->threads[i], NULL, worker, q) != 0)
            return -1;
        q->nthreads++;
    }
    return 0;
}

struct job *workq_acquire(struct workq *q) {
    /* pending + in service + done <= nslots; a job is only refused if the pending ring is
     * full, so the bound the client sees is exactly --queue waiting requests. */
    pthread_mutex_lock(&q->mu);
    int full = q->qlen >= q->qcap;
    pthread_mutex_unlock(&q->mu);
    if (full || q->nfree == 0)
        return NULL;
    struct job *j = &q->slots[q->free_list[--q->nfree]];
    j->kind = JOB_REQUEST;
    return j;
}

void workq_release(struct workq *q, struct job *j) { q->free_list[q->nfree++] = j->idx; }

void workq_submit(struct workq *q, struct job *j) {
    pthread_mutex_lock(&q->mu);
    q->pending[(q->qhead + q->qlen) % q->qcap] = j;
    q->qlen++;
    pthread_mutex_unlock(&q->mu);
    pthread_cond_signal(&q->cv); /* after the unlock: the woken worker finds the mutex free */
}

size_t workq_collect(struct workq *q, struct job **out, size_t max) {
    uint64_t v;
    while (read(q->efd, &v, sizeof v) < 0 && errno == EINTR) {
    }
    size_t n = 0;
    pthread_mutex_lock(&q->mu);
    while (q->dlen > 0 && n < max) {
        out[n++] = q->done[q->dhead];
        q->dhead = (q->dhead + 1) % q->nslots;
        q->dlen--;
    }
    if (q->dlen > 0) {  /* more left: keep the eventfd readable */
        uint64_t one = 1;
        while (write(q->efd, &one, sizeof one) < 0 && errno == EINTR) {
        }
    }
    pthread_mutex_unlock(&q->mu);
    return n;
}

void workq_shutdown(struct workq *q) {
    if (q->nthreads) {
        pthread_mutex_lock(&q->mu);
        q->stop = 1;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
        for (int i = 0; i < q->nthreads; i++)
            pthread_join(q->threads[i], NULL);
        pthread_mutex_destroy(&q->mu);
        pthread_cond_destroy(&q->cv);
    }
    if (q->efd >= 0)
        close(q->efd);
    free(q->slots);
    free(q->free_list);
    free(q->pending);
    free(q->done);
    free(q->threads);
    *q = (struct workq){.efd = -1};
}

