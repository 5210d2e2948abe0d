/* observe.h - observable resources (RFC 7641): the notification process of each observable
 * resource (a timer, a sensor read on a worker, then libcoap's notify), the registration and
 * notification responses, and the notification log (notify-log.csv). */
#ifndef WOT_OBSERVE_H
#define WOT_OBSERVE_H
#include <coap3/coap.h>
#include <stdio.h>

#include "resources.h"
#include "workq.h"

/* Before the resources are added: allocates the log, creates the timer, draws each process's
 * first read at a random phase. Returns 0, or -1 (message printed). Nothing is allocated
 * without observable resources; observe_fd() is then -1. */
int observe_init(const struct resource_set *rs, struct workq *wq, size_t log_capacity);
/* coap_resource_init flags: the notification type (CON, or NON on every notification) */
int observe_resource_flags(const struct resource *res);
/* After coap_resource_init: makes r observable (CON or NON notifications) if res says so. */
void observe_setup_resource(coap_resource_t *r, const struct resource *res);
/* Once the endpoint listens: arms the timer. */
void observe_start(void);
int observe_fd(void);
/* The timer fired: queue the due sensor reads, re-arm. */
void observe_on_timer(void);
/* A finished job: 1 if it was a sensor read (consumed here: observers are notified), else 0. */
int observe_job_done(struct job *j);
/* Resource handler hook for GET with an Observe option on an observable resource
 * (registration, deregistration, or a notification libcoap asks for): fills in the response
 * and logs it; returns 1 if handled, 0 if the request is an ordinary one. */
int observe_handle(coap_resource_t *r, coap_session_t *session, const coap_pdu_t *req,
                   coap_pdu_t *resp);
/* ", \"observe\": {...}" (null without observable resources) into device-summary.json */
void observe_json(FILE *f);
/* DIR/notify-log.csv (only with observable resources); 0 or -1 (message printed) */
int observe_write_log(const char *dir, const struct resource_set *rs);
void observe_free(void);

#endif
