/* workers.c - busy-mode service of wot-fleet: worker threads that burn a job's S of their own
 * CPU time (CLOCK_THREAD_CPUTIME_ID, service.c as in wot-device), so its wall time stretches
 * when the cores are shared, as a device's CPU work would. Worker w takes the jobs of loop
 * w % loops from that loop's ring and hands each finished job back through the loop's done
 * ring and eventfd (written only when the ring was empty: one wake-up per batch). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../service.h"
#include "fleet.h"

static void *worker(void *arg) {
    struct fl_loop *l = arg;
    char name[16];
    snprintf(name, sizeof name, "fleet-work%d", l->id);
    pthread_setname_np(pthread_self(), name);
    service_thread_init();
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (l->wlen == 0 && !l->workers_stop)
            pthread_cond_wait(&l->cv, &l->mu);
        if (l->workers_stop)
            break;
        uint32_t j = l->work[l->whead];
        l->whead = (l->whead + 1) % l->wcap;
        l->wlen--;
        pthread_mutex_unlock(&l->mu);

        struct fl_job *J = &l->jobs[j];
        service_run(MODE_BUSY, J->due_ns - J->start_ns, J->start_ns);  /* S, or a sensor read's */
        J->end_ns = (uint64_t)mono_ns();

        pthread_mutex_lock(&l->mu);
        l->done[(l->dhead + l->dlen) % l->wcap] = j;
        if (l->dlen++ == 0) {
            /* wake the loop with the mutex released (it takes the mutex at once) */
            pthread_mutex_unlock(&l->mu);
            fl_loop_wake(l);
            pthread_mutex_lock(&l->mu);
        }
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

void fl_work_submit(struct fl_loop *l, uint32_t j) {
    pthread_mutex_lock(&l->mu);
    l->work[(l->whead + l->wlen) % l->wcap] = j;  /* wlen <= the loop's slots = wcap */
    l->wlen++;
    pthread_mutex_unlock(&l->mu);
    pthread_cond_signal(&l->cv);
}

int fl_workers_start(struct fleet *f) {
    f->workers = calloc((size_t)f->nworkers, sizeof *f->workers);
    if (!f->workers)
        return -1;
    for (int w = 0; w < f->nworkers; w++) {
        int e = pthread_create(&f->workers[w], NULL, worker, &f->loops[w % f->nloops]);
        if (e) {
            fprintf(stderr, "wot-fleet: cannot start worker %d: %s\n", w, strerror(e));
            f->nworkers = w;
            return -1;
        }
    }
    return 0;
}

void fl_workers_stop(struct fleet *f) {
    for (int i = 0; i < f->nloops; i++) {
        struct fl_loop *l = &f->loops[i];
        pthread_mutex_lock(&l->mu);
        l->workers_stop = 1;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
    }
    for (int w = 0; f->workers && w < f->nworkers; w++)
        pthread_join(f->workers[w], NULL);
    free(f->workers);
    f->workers = NULL;
}
