/* coapio.c - CoAP I/O thread.
 *
 * One thread owns the libcoap context. A request for a known resource is registered with
 * coap_register_async() (indefinite delay) and handed to the worker queue; libcoap answers a
 * CON request with an empty ACK. When a worker finishes, it wakes this thread through an
 * eventfd; the thread calls coap_async_trigger() and coap_io_process(), which re-invokes the
 * resource handler with the stored request, and the handler fills in the real response
 * (a separate CON response for a CON request, NON for NON). The loop blocks in epoll_wait on
 * the libcoap epoll fd, the worker eventfd and a signalfd: no polling. */
#include "coapio.h"

#include <arpa/inet.h>
#include <coap3/coap.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "block.h"
#include "dtls.h"
#include "impair.h"
#include "netstamp.h"
#include "observe.h"
#include "push.h"
#include "service.h"

#define SESSION_TIMEOUT_S 30
#define MAX_IDLE_SESSIONS 256
#define RCVBUF_BYTES (4 << 20)
#define IO_BUDGET 64          /* datagrams per wake-up before completions are served again */

static struct device *D;      /* handlers have no user argument */

/* Logs an entry whose response libcoap sends when the handler returns: its send time is
 * filled in by the sendmsg wrapper (netstamp.h). */
static void log_add(const struct log_entry *e) {
    struct log_entry *stored = devlog_add(D->log, e);
    if (stored)
        netstamp_expect_response(&stored->sent_ns);
}

static void log_now(int32_t res, uint8_t method, uint8_t code, uint64_t arrival,
                    uint64_t arrival_k, const coap_pdu_t *req) {
    struct log_entry e = {.arrival_ns = arrival, .arrival_k_ns = arrival_k, .res = res,
                          .method = method, .code = code};
    coap_bin_const_t tok = coap_pdu_get_token(req);
    devlog_token(&e, tok.s, tok.length);
    log_add(&e);
}

static uint8_t code_byte(coap_pdu_code_t c) { return (uint8_t)c; }

/* Fills in the real response of a served request and logs it (r, s, req, query: block-wise
 * bodies, block.c). */
static void respond(coap_resource_t *r, coap_session_t *s, const coap_pdu_t *req,
                    const coap_string_t *query, coap_pdu_t *resp, const struct resource *res,
                    uint8_t method, const struct log_entry *times) {
    coap_pdu_code_t code;
    switch (method) {
    case COAP_REQUEST_GET:
        code = COAP_RESPONSE_CODE_CONTENT;
        break;
    case COAP_REQUEST_DELETE:
        code = COAP_RESPONSE_CODE_DELETED;
        break;
    default:
        code = COAP_RESPONSE_CODE_CHANGED;
        break;
    }
    coap_pdu_set_code(resp, code);
    if (method == COAP_REQUEST_PUT || method == COAP_REQUEST_POST)
        block_echo_block1(req, resp);
    if (method == COAP_REQUEST_GET && res->payload_bytes)  /* block-wise above 1 KiB */
        block_add_payload(r, s, req, query, resp, res);
    struct log_entry e = *times;
    e.res = (int32_t)(res - D->rs->v);
    e.method = method;
    e.code = code_byte(code);
    log_add(&e);
    D->c.responses++;
}

/* A second invocation for a triggered async request: send the real (separate) response. */
static void finish(coap_async_t *a, coap_resource_t *r, coap_session_t *s, const coap_pdu_t *req,
                   const coap_string_t *query, coap_pdu_t *resp) {
    struct job *j = coap_async_get_app_data(a);
    if (!j)
        return;
    coap_async_set_app_data(a, NULL);
    struct log_entry e = {.arrival_ns = j->arrival_ns, .arrival_k_ns = j->arrival_k_ns,
                          .start_ns = j->start_ns, .end_ns = j->end_ns};
    devlog_token(&e, j->token, j->tkl);
    respond(r, s, req, query, resp, j->res, j->method, &e);
    workq_release(D->wq, j);
}

/* Piggy-backed: the I/O thread serves the request itself and answers in the ACK (or NON). */
static int piggyback(const struct resource *res) {
    return D->response == RESP_PIGGYBACK ||
           (D->response == RESP_AUTO && res->service_ns <= D->piggyback_max_ns);
}

static void serve_inline(coap_resource_t *r, coap_session_t *s, const coap_string_t *query,
                         const struct resource *res, const coap_pdu_t *req, coap_pdu_t *resp,
                         uint8_t method, uint64_t arrival, uint64_t arrival_k) {
    struct log_entry e = {.arrival_ns = arrival, .arrival_k_ns = arrival_k};
    e.start_ns = (uint64_t)mono_ns();
    service_run(res->mode, res->service_ns, e.start_ns);
    e.end_ns = (uint64_t)mono_ns();
    coap_bin_const_t tok = coap_pdu_get_token(req);
    devlog_token(&e, tok.s, tok.length);
    respond(r, s, req, query, resp, res, method, &e);
    D->c.piggybacked++;
}

static void hnd_resource(coap_resource_t *r, coap_session_t *s, const coap_pdu_t *req,
                         const coap_string_t *query, coap_pdu_t *resp) {
    coap_async_t *a = coap_find_async(s, coap_pdu_get_token(req));
    if (a) {
        finish(a, r, s, req, query, resp);
        return;
    }
    if (observe_handle(r, s, req, resp))  /* Observe registration/cancel/notification */
        return;
    if (block_continue(coap_resource_get_userdata(r), req, resp)) /* block-wise follow-up */
        return;
    uint64_t arrival = (uint64_t)mono_ns(), arrival_k = netstamp_last_rx();
    uint8_t method = (uint8_t)coap_pdu_get_code(req);
    const struct resource *res = coap_resource_get_userdata(r);
    D->c.requests++;
    if (piggyback(res)) {
        serve_inline(r, s, query, res, req, resp, method, arrival, arrival_k);
        return;
    }
    struct job *j = workq_acquire(D->wq);
    if (j && !(a = coap_register_async(s, req, 0))) {
        workq_release(D->wq, j);  /* same token already pending on this session */
        j = NULL;
    }
    if (!j) {
        coap_pdu_set_code(resp, COAP_RESPONSE_CODE_SERVICE_UNAVAILABLE);
        D->c.overload_503++;
        D->c.responses++;
        log_now((int32_t)(res - D->rs->v), method,
                code_byte(COAP_RESPONSE_CODE_SERVICE_UNAVAILABLE), arrival, arrival_k, req);
        return;
    }
    j->res = res;
    j->arrival_ns = arrival;
    j->arrival_k_ns = arrival_k;
    j->method = method;
    coap_bin_const_t tok = coap_pdu_get_token(req);
    j->tkl = (uint8_t)(tok.length < sizeof j->token ? tok.length : sizeof j->token);
    memcpy(j->token, tok.s, j->tkl);
    j->ctx = a;
    coap_async_set_app_data(a, j);
    workq_submit(D->wq, j);
}

static void hnd_unknown(coap_resource_t *r, coap_session_t *s, const coap_pdu_t *req,
                        const coap_string_t *query, coap_pdu_t *resp) {
    (void)r, (void)s, (void)query;
    uint64_t arrival = (uint64_t)mono_ns(), arrival_k = netstamp_last_rx();
    D->c.requests++;
    D->c.not_found++;
    D->c.responses++;
    coap_pdu_set_code(resp, COAP_RESPONSE_CODE_NOT_FOUND);
    log_now(LOG_RES_UNKNOWN, (uint8_t)coap_pdu_get_code(req),
            code_byte(COAP_RESPONSE_CODE_NOT_FOUND), arrival, arrival_k, req);
}

static int on_event(coap_session_t *s, const coap_event_t ev) {
    /* Separate CON responses count against NSTART (default 1): raise it so concurrent
     * responses to one client are not held back until the previous one is ACKed. */
    if (ev == COAP_EVENT_SERVER_SESSION_NEW)
        coap_session_set_nstart(s, (uint16_t)D->nstart);
    dtls_on_event(s, ev);
    return 0;
}

static void on_log(coap_log_t level, const char *msg) {
    if (strstr(msg, "malformed"))
        D->c.malformed++;
    else if (level <= LOG_ERR)
        fprintf(stderr, "libcoap: %s", msg);
}

/* Parses ADDR[:PORT] or [ADDR6][:PORT]. */
static int parse_listen(const char *spec, coap_address_t *a) {
    char host[64];
    const char *port = NULL;
    size_t hl;
    if (spec[0] == '[') {
        const char *e = strchr(spec, ']');
        if (!e)
            return -1;
        hl = (size_t)(e - spec - 1);
        memcpy(host, spec + 1, hl < sizeof host ? hl : 0);
        if (e[1] == ':')
            port = e + 2;
        else if (e[1])
            return -1;
    } else {
        const char *c = strchr(spec, ':');
        hl = c ? (size_t)(c - spec) : strlen(spec);
        if (hl < sizeof host)
            memcpy(host, spec, hl);
        port = c ? c + 1 : NULL;
    }
    if (hl == 0 || hl >= sizeof host)
        return -1;
    host[hl] = '\0';
    long p = dtls_enabled() ? DTLS_DEFAULT_PORT : 5683;  /* coaps:// default, RFC 7252 §6.2 */
    if (port) {
        char *end;
        errno = 0;
        p = strtol(port, &end, 10);
        if (!*port || *end || errno || p < 1 || p > 65535)
            return -1;
    }
    coap_address_init(a);
    if (inet_pton(AF_INET, host, &a->addr.sin.sin_addr) == 1) {
        a->addr.sin.sin_family = AF_INET;
        a->addr.sin.sin_port = htons((uint16_t)p);
        a->size = sizeof(struct sockaddr_in);
    } else if (inet_pton(AF_INET6, host, &a->addr.sin6.sin6_addr) == 1) {
        a->addr.sin6.sin6_family = AF_INET6;
        a->addr.sin6.sin6_port = htons((uint16_t)p);
        a->size = sizeof(struct sockaddr_in6);
    } else {
        return -1;
    }
    return 0;
}

/* libcoap 4.3.1 has no accessor for the endpoint socket: find our bound UDP socket and
 * raise its receive buffer (SO_RCVBUFFORCE needs CAP_NET_ADMIN; else capped at rmem_max).
 * Returns the socket (for the impairment wrappers), -1 if not found. */
static int raise_rcvbuf(const coap_address_t *a) {
    int found = -1;
    for (int fd = 3; fd < 1024; fd++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int type;
        socklen_t tl = sizeof type;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) || type != SOCK_DGRAM)
            continue;
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) || ss.ss_family != a->addr.sa.sa_family)
            continue;
        in_port_t port = ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                 : ((struct sockaddr_in6 *)&ss)->sin6_port;
        in_port_t want = ss.ss_family == AF_INET ? a->addr.sin.sin_port : a->addr.sin6.sin6_port;
        if (port != want)
            continue;
        int v = RCVBUF_BYTES;
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof v))
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
        found = fd;
    }
    return found;
}

static int add_resources(coap_context_t *ctx) {
    for (size_t i = 0; i < D->rs->n; i++) {
        struct resource *res = &D->rs->v[i];
        coap_resource_t *r = coap_resource_init(coap_make_str_const(res->path),
                                                observe_resource_flags(res));
        if (!r)
            return -1;
        coap_register_request_handler(r, COAP_REQUEST_GET, hnd_resource);
        coap_register_request_handler(r, COAP_REQUEST_PUT, hnd_resource);
        coap_register_request_handler(r, COAP_REQUEST_POST, hnd_resource);
        coap_register_request_handler(r, COAP_REQUEST_DELETE, hnd_resource);
        coap_resource_set_userdata(r, res);
        observe_setup_resource(r, res);
        coap_add_resource(ctx, r);
    }
    coap_resource_t *u = coap_resource_unknown_init(hnd_unknown);
    if (!u)
        return -1;
    coap_register_request_handler(u, COAP_REQUEST_GET, hnd_unknown);
    coap_register_request_handler(u, COAP_REQUEST_POST, hnd_unknown);
    coap_register_request_handler(u, COAP_REQUEST_DELETE, hnd_unknown);
    coap_add_resource(ctx, u);
    return 0;
}

static int epoll_add(int ep, int fd) {
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

static int readable(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* Impairments (impair_*.c): sends held responses that are due, hands due held requests to
 * libcoap (coap_io_do_epoll on the endpoint socket makes libcoap call recvmsg, which the
 * wrapper answers with the held datagram) and arms the timerfd for the next due time. */
static void impair_service(coap_context_t *ctx, int tfd, uint64_t *armed) {
    uint64_t now = mono_ns();
    impair_flush_egress(now);
    while (impair_ingress_begin(now)) {
        size_t len;
        uint64_t arrival;
        const void *from;
        socklen_t fl;
        const uint8_t *d = impair_ingress_other(&len, &arrival, &from, &fl);
        if (d) {                        /* an answer to the device's own request */
            push_on_replay(d, len, arrival, from, fl);
        } else {
            struct epoll_event ev = {.events = EPOLLIN, .data.ptr = impair_endpoint_ptr()};
            coap_io_do_epoll(ctx, &ev, 1);
        }
        impair_ingress_end();
        impair_flush_egress(now = mono_ns());  /* e.g. an immediate 4.04 without delay */
    }
    uint64_t next = impair_next_due();
    if (next != *armed) {
        struct itimerspec its = {.it_value = {.tv_sec = (time_t)(next / 1000000000ULL),
                                              .tv_nsec = (long)(next % 1000000000ULL)}};
        timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);  /* next == 0 disarms */
        *armed = next;
    }
}

/* A request datagram on the endpoint socket goes straight to libcoap's endpoint reader (which
 * calls the handler, and the handler's response is sent before this returns): the timer
 * re-arm and epoll_wait inside coap_io_process come after the response, not before it. */
static void read_endpoint(coap_context_t *ctx, void *ep_ptr) {
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ep_ptr};
    coap_io_do_epoll(ctx, &ev, 1);
    netstamp_forget();
}

static int loop(coap_context_t *ctx, int sfd, int efd) {
    int cfd = coap_context_get_coap_fd(ctx);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int tfd = impair_enabled() ? timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC) : -1;
    void *ep_ptr = impair_epoll_ptr(efd); /* libcoap's socket of the endpoint */
    if (cfd < 0 || ep < 0 || epoll_add(ep, cfd) || epoll_add(ep, D->wq->efd) ||
        epoll_add(ep, sfd) || (impair_enabled() && (tfd < 0 || epoll_add(ep, tfd))) ||
        (ep_ptr && epoll_add(ep, efd)) ||
        (observe_fd() >= 0 && epoll_add(ep, observe_fd())) ||
        (push_enabled() && (epoll_add(ep, push_sock_fd()) || epoll_add(ep, push_timer_fd()) ||
                            epoll_add(ep, push_ctl_fd())))) {
        fprintf(stderr, "wot-device: epoll setup failed: %s\n", strerror(errno));
        return 1;
    }
    /* held datagrams leave within µs of their due time; piggy-backed sleeps end on time */
    if (impair_enabled() || D->response != RESP_SEPARATE)
        service_thread_init();
    uint64_t armed = 0;
    struct job **done = calloc(D->wq->nslots, sizeof *done);
    if (!done)
        return 1;
    int stop = 0;
    if (push_enabled())
        push_on_ctl();   /* push-go/push-start written before the watch was set */
    while (!stop) {
        struct epoll_event ev[8];
        int n = epoll_wait(ep, ev, 8, -1);
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "wot-device: epoll_wait: %s\n", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            if (ev[i].data.fd == efd && efd >= 0) {
                read_endpoint(ctx, ep_ptr);
            } else if (ev[i].data.fd == sfd) {
                struct signalfd_siginfo si;
                while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                    /* a device that pushes runs its teardown requests first */
                    stop = !push_enabled() || !push_stop();
                }
            } else if (push_enabled() && ev[i].data.fd == push_sock_fd()) {
                push_on_sock();
            } else if (push_enabled() && ev[i].data.fd == push_timer_fd()) {
                push_on_timer();
            } else if (push_enabled() && ev[i].data.fd == push_ctl_fd()) {
                push_on_ctl();
            } else if (ev[i].data.fd == D->wq->efd) {
                size_t k = workq_collect(D->wq, done, D->wq->nslots);
                for (size_t m = 0; m < k; m++)
                    if (!observe_job_done(done[m]))  /* a sensor read notifies observers */
                        coap_async_trigger(done[m]->ctx);
            } else if (ev[i].data.fd == observe_fd()) {
                observe_on_timer();
            } else if (ev[i].data.fd == tfd) {
                uint64_t expirations;
                if (read(tfd, &expirations, sizeof expirations) < 0) {
                }
                armed = 0;  /* expired: re-arm below */
            }
        }
        /* Sends triggered responses, runs timers, reads one datagram (pitfall 2: repeat). */
        coap_io_process(ctx, COAP_IO_NO_WAIT);
        for (int b = 1; b < IO_BUDGET && readable(cfd); b++)
            coap_io_process(ctx, COAP_IO_NO_WAIT);
        if (tfd >= 0)
            impair_service(ctx, tfd, &armed);
        netstamp_forget();
        netstamp_refresh();
        if (push_enabled() && push_done())   /* only after a signal: teardown has ended */
            stop = 1;
    }
    free(done);
    if (tfd >= 0)
        close(tfd);
    close(ep);
    return 0;
}

/* Tell the harness the endpoint listens: an empty <log_dir>/ready (no network involved, so the
 * readiness of many devices costs no neighbour-table entries). Best effort. */
static void mark_ready(const char *log_dir) {
    char path[4096];
    if (!log_dir || snprintf(path, sizeof path, "%s/ready", log_dir) >= (int)sizeof path)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
}

int coapio_attach(struct device *d, coap_context_t *ctx) {
    D = d;
    coap_set_log_handler(on_log);
    coap_register_event_handler(ctx, on_event);
    return block_init(ctx, d->rs) || observe_init(d->rs, d->wq, d->log->cap) ||
                   add_resources(ctx) ? 1 : 0;
}

int coapio_run(struct device *d) {
    D = d;
    coap_address_t addr;
    if (parse_listen(d->listen, &addr)) {
        fprintf(stderr, "wot-device: bad --listen '%s', expected ADDR[:PORT]\n", d->listen);
        return 2;
    }
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGTERM);
    sigaddset(&ss, SIGINT);
    int sfd = signalfd(-1, &ss, SFD_CLOEXEC | SFD_NONBLOCK);

    coap_startup();
    coap_set_log_handler(on_log);
    coap_set_log_level(LOG_WARNING);
    coap_context_t *ctx = coap_new_context(NULL);
    if (sfd < 0 || !ctx) {
        fprintf(stderr, "wot-device: cannot create context\n");
        return 1;
    }
    if (block_init(ctx, d->rs)) {
        fprintf(stderr, "wot-device: out of memory for the payload bytes\n");
        coap_free_context(ctx);
        return 1;
    }
    coap_context_set_session_timeout(ctx, SESSION_TIMEOUT_S);
    coap_context_set_max_idle_sessions(ctx, MAX_IDLE_SESSIONS);
    coap_register_event_handler(ctx, on_event);
    if (dtls_setup(ctx)) {
        coap_free_context(ctx);
        return 1;
    }
    if (!coap_new_endpoint(ctx, &addr, dtls_enabled() ? COAP_PROTO_DTLS : COAP_PROTO_UDP)) {
        fprintf(stderr, "wot-device: cannot listen on %s\n", d->listen);
        coap_free_context(ctx);
        return 1;
    }
    int efd = raise_rcvbuf(&addr);
    if (netstamp_enable(efd))
        fprintf(stderr, "wot-device: no kernel receive stamps on the endpoint socket; the log's "
                "arrival_kernel_ns stays empty\n");
    if (impair_enabled() && (impair_set_endpoint(efd) || impair_init())) {
        fprintf(stderr, "wot-device: --impair: cannot hook the endpoint socket or allocate "
                "the delay queues\n");
        coap_free_context(ctx);
        return 1;
    }
    int rc = observe_init(d->rs, d->wq, d->log->cap) || add_resources(ctx) ? 1 : 0;
    if (rc == 0 && push_enabled() && push_open(d->listen, d->log_dir))
        rc = 1;
    if (rc == 0) {
        observe_start();
        mark_ready(d->log_dir);
    }
    if (rc == 0)
        rc = loop(ctx, sfd, efd);
    coap_free_context(ctx);
    coap_cleanup();
    close(sfd);
    return rc;
}
