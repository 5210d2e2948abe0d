/* clients_opts.c - the closed-loop options (--clients, --duration-ms, --think, --select,
 * --mark-warmup-ms, --mark-cooldown-ms, --max-requests, --requests-per-client, --ramp-ms):
 * parsing, the combinations refused, and
 * each request's phase in requests.csv. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h" /* common/clock.h */
#include "ge.h"

#define MAX_CLIENTS 60000 /* socket index is 16 bits; the port range is smaller anyway */

/* "N" microseconds, 0..1e12 */
static int parse_us(const char *s, int64_t *ns) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0) || v > 1e12)
        return -1;
    *ns = (int64_t)(v * 1e3);
    return 0;
}

int clients_parse_think(ge_t *g, const char *spec) {
    int64_t a = 0, b = 0;
    char buf[128];
    if (strlen(spec) >= sizeof buf)
        return -1;
    strcpy(buf, spec);
    char *colon = strchr(buf, ':');
    if (strcmp(buf, "0") == 0) {
        g->closed.think = THINK_ZERO;
    } else if (colon && (*colon = 0, 1) && strcmp(buf, "const") == 0) {
        if (parse_us(colon + 1, &a) < 0)
            return -1;
        g->closed.think = a ? THINK_CONST : THINK_ZERO;
    } else if (colon && strcmp(buf, "exp") == 0) {
        if (parse_us(colon + 1, &a) < 0 || a <= 0)
            return -1;
        g->closed.think = THINK_EXP;
    } else if (colon && strcmp(buf, "uniform") == 0) {
        char *c2 = strchr(colon + 1, ':');
        if (!c2)
            return -1;
        *c2 = 0;
        if (parse_us(colon + 1, &a) < 0 || parse_us(c2 + 1, &b) < 0 || b < a)
            return -1;
        g->closed.think = THINK_UNIFORM;
    } else {
        return -1;
    }
    g->closed.think_a_ns = a;
    g->closed.think_b_ns = b;
    return 0;
}

int clients_parse_select(ge_t *g, const char *name) {
    if (strcmp(name, "round-robin") == 0)
        g->closed.select = SELECT_ROUND_ROBIN;
    else if (strcmp(name, "one") == 0)
        g->closed.select = SELECT_ONE;
    else if (strcmp(name, "random") == 0)
        g->closed.select = SELECT_RANDOM;
    else
        return -1;
    return 0;
}

static int refuse(const char *what) {
    fprintf(stderr, "gateway-emulator: --clients with %s is not supported, expected plain "
                    "coap:// requests without it\n", what);
    return 2;
}

/* after parsing: the combinations a closed loop does not take; 0 ok, 2 bad input */
int clients_check_options(const ge_t *g) {
    int closed = g->closed.clients > 0;
    if (!closed) {
        if (g->closed.duration_ns || g->closed.warmup_ns || g->closed.cooldown_ns ||
            g->closed.per_client || g->closed.ramp_ns) {
            fprintf(stderr, "gateway-emulator: --duration-ms/--mark-warmup-ms/--mark-cooldown-ms/"
                            "--requests-per-client/--ramp-ms need --clients N (a closed loop; an "
                            "open loop's requests are the trace's)\n");
            return 2;
        }
        return 0;
    }
    if (g->closed.clients > MAX_CLIENTS) {
        fprintf(stderr, "gateway-emulator: --clients %d, expected 1..%d\n", g->closed.clients,
                MAX_CLIENTS);
        return 2;
    }
    if (g->closed.duration_ns <= 0) {
        fprintf(stderr, "gateway-emulator: --clients needs --duration-ms N (how long the clients "
                        "issue requests)\n");
        return 2;
    }
    if (g->closed.warmup_ns + g->closed.cooldown_ns >= g->closed.duration_ns) {
        fprintf(stderr, "gateway-emulator: --mark-warmup-ms + --mark-cooldown-ms leave nothing "
                        "of --duration-ms to measure, expected their sum below it\n");
        return 2;
    }
    if (g->closed.ramp_ns >= g->closed.duration_ns) {
        fprintf(stderr, "gateway-emulator: --ramp-ms is not below --duration-ms, expected the "
                        "last client to start before the end\n");
        return 2;
    }
    if (g->closed.per_client &&
        (uint64_t)g->closed.per_client * (uint64_t)g->closed.clients > g->closed.max_requests) {
        fprintf(stderr, "gateway-emulator: --requests-per-client %u x --clients %d is more than "
                        "--max-requests %zu, expected a table for every budgeted request\n",
                g->closed.per_client, g->closed.clients, g->closed.max_requests);
        return 2;
    }
    if (g->dtls_opt.identity || g->dtls_opt.key_file)
        return refuse("DTLS (--dtls-psk-*)");
    if (g->block_size)
        return refuse("--block-size");
    if (g->proxy.host)
        return refuse("--proxy");
    if (g->ports_per_device)
        return refuse("--ports-per-device (every client has its own source port)");
    return 0;
}

const char *clients_phase(const ge_t *g, const req_t *r) {
    if (!g->closed.clients)
        return ""; /* open loop: every request counts */
    int64_t t = (r->flags & RF_SENT) ? r->sent_ns : r->sched_ns;
    if (t < g->closed.warmup_ns)
        return "warmup";
    if (t >= g->closed.duration_ns - g->closed.cooldown_ns)
        return "cooldown";
    return "measure";
}
