/* observe.c - observable resources (RFC 7641), see observe.h and README "Observe".
 *
 * Each observable resource runs a notification process from the device's start: at every
 * tick (intervals drawn from its notify_dist, scheduled on absolute instants so they do not
 * drift) a sensor read is queued on the worker pool like a request (notify_service_us, the
 * resource's sleep|busy mode). When the read is done, the I/O thread calls
 * coap_resource_notify_observers(): libcoap increments the resource's Observe sequence number
 * and, in the next coap_io_process(), calls the GET handler once per observer with the stored
 * registration request; observe_handle() fills in the notification and logs its emission
 * instant (taken in the handler, right before libcoap's sendmsg).
 *
 * Telling a notification from a new request in the handler (libcoap 4.3.1 passes the same
 * handler both): libcoap builds a notification with the type CON or NON and a message ID it
 * has just taken from the session's counter (coap_new_message_id, copied into the stored
 * request too; resource.c coap_notify_observers), whereas the response to a CON request is an
 * ACK and the response to a NON request is a NON with the request's own message ID (net.c
 * handle_request). So a response that is not an ACK and whose MID is the last one the
 * session's counter gave out is a notification; the handler reads the counter by taking the
 * next ID (coap_new_message_id: ++tx_mid), which only skips one ID. (A NON registration whose
 * client-chosen MID happens to equal that one, p = 2^-16, is logged as a notification; it is
 * still answered correctly.)
 *
 * Registrations (Observe: 0) and deregistrations (Observe: 1) are answered at once with the
 * current value (no service time: the last read is cached), piggybacked for CON. They are
 * logged in notify-log.csv, not in device-log.csv, so request statistics stay requests. */
#include "observe.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "block.h"
#include "notify_interval.h"
#include "service.h"

#define MAX_READS_PER_TICK 16  /* a late timer catches up at most this many reads per wake-up */

enum { K_REGISTER = 0, K_NOTIFY, K_CANCEL };
static const char *KIND[] = {"register", "notify", "cancel"};

struct nlog {                   /* one notify-log row, 56 bytes */
    uint64_t emit_ns, tick_ns, read_start_ns, read_end_ns;
    int32_t res;
    uint32_t seq;               /* Observe option value sent (UINT32_MAX: none) */
    uint8_t kind, type, tkl, token[8]; /* type: COAP_MESSAGE_CON/NON/ACK */
};

struct obsres {
    coap_resource_t *r;         /* NULL: not observable */
    uint64_t next_ns;           /* next tick (absolute CLOCK_MONOTONIC) */
    uint64_t tick_ns, read_start_ns, read_end_ns; /* the last finished read (its scheduled
                                                     instant, start, end): what a notification carries */
};

static struct {
    const struct resource_set *rs;
    struct workq *wq;
    struct obsres *o;
    size_t nobs;
    int tfd;
    uint64_t armed, rng;
    struct nlog *log;
    size_t cap, n;
    uint64_t dropped, reads, reads_unobserved, reads_skipped, notifications, notifications_con,
        registrations, cancels;
} S = {.tfd = -1};


static uint64_t interval_ns(const struct resource *res) { return notify_interval_ns(res, &S.rng); }

int observe_resource_flags(const struct resource *res) {
    if (res->notify_dist == NOTIFY_NONE)
        return 0;
    /* NON_ALWAYS: the configured type on the wire (libcoap would else send every 5th NON
     * notification as CON); coap_resource_set_mode() cannot set it, only coap_resource_init */
    return res->notify_con ? COAP_RESOURCE_FLAGS_NOTIFY_CON : COAP_RESOURCE_FLAGS_NOTIFY_NON_ALWAYS;
}

void observe_setup_resource(coap_resource_t *r, const struct resource *res) {
    if (res->notify_dist == NOTIFY_NONE || !S.o)
        return;
    S.o[res - S.rs->v].r = r;
    coap_resource_set_get_observable(r, 1);
}

static void arm(void) {
    uint64_t next = 0;
    for (size_t i = 0; i < S.rs->n; i++)
        if (S.o[i].r && (next == 0 || S.o[i].next_ns < next))
            next = S.o[i].next_ns;
    if (next == S.armed)
        return;
    struct itimerspec its = {.it_value = {.tv_sec = (time_t)(next / 1000000000ULL),
                                          .tv_nsec = (long)(next % 1000000000ULL)}};
    timerfd_settime(S.tfd, TFD_TIMER_ABSTIME, &its, NULL);
    S.armed = next;
}

int observe_init(const struct resource_set *rs, struct workq *wq, size_t log_capacity) {
    S.rs = rs;
    S.wq = wq;
    for (size_t i = 0; i < rs->n; i++)
        S.nobs += rs->v[i].notify_dist != NOTIFY_NONE;
    if (S.nobs == 0)
        return 0;
    S.o = calloc(rs->n, sizeof *S.o);
    S.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (!S.o || S.tfd < 0) {
        fprintf(stderr, "wot-device: observe: cannot create the notification timer: %s\n",
                strerror(errno));
        return -1;
    }
    S.cap = log_capacity;
    if (S.cap) {
        void *p = mmap(NULL, S.cap * sizeof *S.log, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "wot-device: observe: cannot reserve the notification log\n");
            return -1;
        }
        S.log = p;
    }
    if (getrandom(&S.rng, sizeof S.rng, 0) != sizeof S.rng || S.rng == 0)
        S.rng = mono_ns() | 1;
    uint64_t now = mono_ns();
    for (size_t i = 0; i < rs->n; i++) {
        if (rs->v[i].notify_dist == NOTIFY_NONE)
            continue;
        /* a stationary start: devices started together are not in lock step, and the first
         * interval is not shorter than the others on average (notify_interval.h) */
        S.o[i].next_ns = now + notify_first_ns(&rs->v[i], &S.rng);
    }
    return 0;
}

int observe_fd(void) { return S.tfd; }

void observe_start(void) {
    if (S.tfd >= 0)
        arm();
}

void observe_on_timer(void) {
    uint64_t exp;
    if (read(S.tfd, &exp, sizeof exp) < 0) {
    }
    S.armed = 0;
    uint64_t now = mono_ns();
    for (size_t i = 0; i < S.rs->n; i++) {
        const struct resource *res = &S.rs->v[i];
        if (res->notify_dist == NOTIFY_NONE)
            continue;
        for (int k = 0; k < MAX_READS_PER_TICK && S.o[i].next_ns <= now; k++) {
            uint64_t tick = S.o[i].next_ns;
            S.o[i].next_ns += interval_ns(res);
            struct job *j = workq_acquire(S.wq);
            if (!j) {
                S.reads_skipped++;
                continue;
            }
            j->kind = JOB_NOTIFY;
            j->res = res;
            j->arrival_ns = tick; /* the scheduled instant of the read */
            j->ctx = NULL;
            j->tkl = 0;
            workq_submit(S.wq, j);
        }
        if (S.o[i].next_ns <= now) /* still behind after the cap: skip ahead */
            S.o[i].next_ns = now + interval_ns(res);
    }
    arm();
}

int observe_job_done(struct job *j) {
    if (j->kind != JOB_NOTIFY)
        return 0;
    size_t i = (size_t)(j->res - S.rs->v);
    S.o[i].tick_ns = j->arrival_ns;
    S.o[i].read_start_ns = j->start_ns;
    S.o[i].read_end_ns = j->end_ns;
    S.reads++;
    coap_resource_t *r = S.o[i].r;
    if (!r || !coap_resource_notify_observers(r, NULL))
        S.reads_unobserved++;
    workq_release(S.wq, j);
    return 1;
}

static void log_add(const struct nlog *e) {
    if (S.n < S.cap)
        S.log[S.n++] = *e;
    else
        S.dropped++;
}

int observe_handle(coap_resource_t *r, coap_session_t *session, const coap_pdu_t *req,
                   coap_pdu_t *resp) {
    const struct resource *res = coap_resource_get_userdata(r);
    if (!res || res->notify_dist == NOTIFY_NONE || coap_pdu_get_code(req) != COAP_REQUEST_CODE_GET)
        return 0;
    coap_opt_iterator_t it;
    coap_opt_t *o = coap_check_option(req, COAP_OPTION_OBSERVE, &it);
    if (!o)
        return 0;
    unsigned action = coap_decode_var_bytes(coap_opt_value(o), coap_opt_length(o));
    if (action > 1) /* RFC 7641 2: other values are not defined; an ordinary GET */
        return 0;
    size_t i = (size_t)(res - S.rs->v);
    int kind = action == 1 ? K_CANCEL : K_REGISTER;
    if (action == 0 && coap_pdu_get_type(resp) != COAP_MESSAGE_ACK &&
        coap_pdu_get_mid(resp) == (coap_mid_t)(uint16_t)(coap_new_message_id(session) - 1))
        kind = K_NOTIFY;
    uint8_t b[4];
    coap_pdu_set_code(resp, COAP_RESPONSE_CODE_CONTENT);
    coap_add_option(resp, COAP_OPTION_MAXAGE, coap_encode_var_safe(b, sizeof b, res->max_age_s), b);
    if (res->payload_bytes)
        coap_add_data(resp, res->payload_bytes, block_payload(res->payload_bytes));
    struct nlog e = {.res = (int32_t)i, .kind = (uint8_t)kind, .seq = UINT32_MAX,
                     .type = (uint8_t)coap_pdu_get_type(resp)};
    coap_opt_t *so = coap_check_option(resp, COAP_OPTION_OBSERVE, &it);
    if (so)
        e.seq = coap_decode_var_bytes(coap_opt_value(so), coap_opt_length(so));
    coap_bin_const_t tok = coap_pdu_get_token(req);
    e.tkl = (uint8_t)(tok.length < sizeof e.token ? tok.length : sizeof e.token);
    memcpy(e.token, tok.s, e.tkl);
    if (kind == K_NOTIFY) {
        e.tick_ns = S.o[i].tick_ns;
        e.read_start_ns = S.o[i].read_start_ns;
        e.read_end_ns = S.o[i].read_end_ns;
        S.notifications++;
        S.notifications_con += e.type == COAP_MESSAGE_CON;
    } else if (kind == K_REGISTER) {
        S.registrations++;
    } else {
        S.cancels++;
    }
    e.emit_ns = mono_ns();
    log_add(&e);
    return 1;
}

void observe_json(FILE *f) {
    if (S.nobs == 0) {
        fputs(", \"observe\": null", f);
        return;
    }
    fprintf(f,
            ", \"observe\": {\"observable_resources\": %zu, \"reads\": %llu, "
            "\"reads_unobserved\": %llu, \"reads_skipped\": %llu, \"notifications\": %llu, "
            "\"notifications_con\": %llu, \"registrations\": %llu, \"cancels\": %llu, "
            "\"log_entries\": %zu, \"log_dropped\": %llu}",
            S.nobs, (unsigned long long)S.reads, (unsigned long long)S.reads_unobserved,
            (unsigned long long)S.reads_skipped, (unsigned long long)S.notifications,
            (unsigned long long)S.notifications_con, (unsigned long long)S.registrations,
            (unsigned long long)S.cancels, S.n, (unsigned long long)S.dropped);
}

int observe_write_log(const char *dir, const struct resource_set *rs) {
    if (S.nobs == 0)
        return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/notify-log.csv", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "wot-device: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fputs("emit_ns,tick_ns,read_start_ns,read_end_ns,path,kind,seq,type,token\n", f);
    for (size_t k = 0; k < S.n; k++) {
        const struct nlog *e = &S.log[k];
        fprintf(f, "%llu,", (unsigned long long)e->emit_ns);
        if (e->read_start_ns)
            fprintf(f, "%llu,%llu,%llu,", (unsigned long long)e->tick_ns,
                    (unsigned long long)e->read_start_ns, (unsigned long long)e->read_end_ns);
        else
            fputs(",,,", f);
        fprintf(f, "%s,%s,", rs->v[e->res].path, KIND[e->kind]);
        if (e->seq != UINT32_MAX)
            fprintf(f, "%u", e->seq);
        fprintf(f, ",%s,", e->type == COAP_MESSAGE_CON ? "con" : e->type == COAP_MESSAGE_ACK ? "ack" : "non");
        for (int b = 0; b < e->tkl; b++)
            fprintf(f, "%02x", e->token[b]);
        fputc('\n', f);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        fprintf(stderr, "wot-device: error writing %s\n", path);
        return -1;
    }
    return 0;
}

void observe_free(void) {
    if (S.log)
        munmap(S.log, S.cap * sizeof *S.log);
    S.log = NULL;
    free(S.o);
    S.o = NULL;
    if (S.tfd >= 0)
        close(S.tfd);
    S.tfd = -1;
}
