/* http_prep.c - the http:// transport before the start (main thread, may allocate): checks the
 * --http-* options, renders every request's bytes (request line, Host, the header templates,
 * Content-Length, the body: the template's, the trace's own or filler) into g->arena, sizes the per-target pools and request queues, and
 * opens the keep-alive pools before the start instant (the GE's readiness for HTTP) and holds the
 * kernel's receive stamps on for the run (hold_stamps_on). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"   /* common/clock.h */
#include "rxstamp.h" /* common/rxstamp.h */
#include "rxstamp_pin.h" /* common/rxstamp_pin.h */
#include "http.h"
#include "template_vars.h"

#define MAX_CONNS_PER_TARGET 60000
#define DEFAULT_CONNS 1
#define DEFAULT_CONNS_PER_REQUEST 64

static const char *const METHOD_NAME[] = {"", "GET", "POST", "PUT", "DELETE", "GET", "GET", "PATCH"};
/* headers the GE writes itself: a template may not set them */
static const char *const RESERVED[] = {"host", "content-length", "transfer-encoding", "connection"};

/* "Name: value" with a token name and no CR/LF; the header's template, or NULL (said) */
static http_tmpl_t *header_tmpl(const char *h, int k) {
    char where[48];
    snprintf(where, sizeof where, "--http-header #%d", k + 1);
    const char *colon = strchr(h, ':');
    size_t nl = colon ? (size_t)(colon - h) : 0;
    int ok = nl > 0 && !strpbrk(h, "\r\n");
    for (size_t i = 0; ok && i < nl; i++)
        ok = h[i] > ' ' && h[i] < 0x7f && !strchr("()<>@,;:\\\"/[]?={}", h[i]);
    if (!ok) {
        fprintf(stderr, "gateway-emulator: %s '%s': expected 'Name: value' (a token name, no "
                        "line breaks)\n", where, h);
        return NULL;
    }
    for (size_t i = 0; i < sizeof RESERVED / sizeof *RESERVED; i++)
        if (nl == strlen(RESERVED[i]) && !strncasecmp(h, RESERVED[i], nl)) {
            fprintf(stderr, "gateway-emulator: %s '%s': the GE writes %.*s itself, expected "
                            "another header (Content-Type or a custom one)\n", where, h, (int)nl, h);
            return NULL;
        }
    return http_tmpl_compile(h, where);
}

char *http_read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            char *nb = realloc(buf, cap = cap ? cap * 2 : 8192);
            if (!nb)
                break;
            buf = nb;
        }
        size_t k = fread(buf + n, 1, cap - n - 1, f);
        n += k;
        if (k == 0)
            break;
    }
    int err = ferror(f);
    fclose(f);
    if (err || !buf) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (memchr(buf, 0, n)) { /* a template is text */
        free(buf);
        errno = EINVAL;
        return NULL;
    }
    return buf;
}

typedef struct {
    http_tmpl_t *hdr[32];
    http_tmpl_t *body;
    http_tmpl_t **path; /* per URI: its path as a template (NULL: a path without "{{") */
    size_t npath;
    tv_list_t slots;    /* the per-request values' slots of every request, in request order */
} tmpls_t;

/* a template's bytes at out + n (out NULL: measure); its length. Slots are noted only while
 * writing (out set), at their offset from the request's first byte. */
static size_t put_tmpl(const http_tmpl_t *t, http_vars_t *v, char *out, size_t n, tmpls_t *T) {
    v->slots = out ? &T->slots : NULL;
    v->base = n;
    return http_tmpl_render(t, v, out ? out + n : NULL);
}

/* request i's bytes into out (NULL: measure); its length */
static size_t render(const ge_t *g, tmpls_t *T, uint32_t i, uint64_t payload, char *out) {
    const req_t *r = &g->reqs[i];
    const uri_t *u = &g->uris[r->path_id];
    http_vars_t v = {i, r->device, METHOD_NAME[r->method], u->path, payload, NULL, 0};
    int has_body = r->method == M_PUT || r->method == M_POST || r->method == M_PATCH;
    size_t body = !has_body ? 0 : T->body ? http_tmpl_render(T->body, &v, NULL) : payload;
    char head[512];
    int hn = snprintf(head, sizeof head, "%s /", v.method);
    size_t n = (size_t)hn;
    if (out)
        memcpy(out, head, n);
    if (T->path[r->path_id]) {
        n += put_tmpl(T->path[r->path_id], &v, out, n, T);
    } else {
        size_t pl = strlen(u->path);
        if (out)
            memcpy(out + n, u->path, pl);
        n += pl;
    }
    hn = snprintf(head, sizeof head, " HTTP/1.1\r\nHost: %s\r\n%s", u->authority,
                  g->http_opt.per_request ? "Connection: close\r\n" : "");
    if (out)
        memcpy(out + n, head, (size_t)hn);
    n += (size_t)hn;
    for (int k = 0; k < g->http_opt.nheaders; k++) {
        n += put_tmpl(T->hdr[k], &v, out, n, T);
        if (out)
            memcpy(out + n, "\r\n", 2);
        n += 2;
    }
    hn = has_body ? snprintf(head, sizeof head, "Content-Length: %zu\r\n\r\n", body)
                  : snprintf(head, sizeof head, "\r\n");
    if (out)
        memcpy(out + n, head, (size_t)hn);
    n += (size_t)hn;
    const char *own = has_body ? trace_body(g, i) : NULL; /* the trace's body column */
    if (has_body && T->body)
        put_tmpl(T->body, &v, out, n, T);
    else if (own && out)
        memcpy(out + n, own, body);
    else if (has_body && out)
        memset(out + n, 'x', body);
    return n + body;
}

static void tmpls_free(tmpls_t *T, int n) {
    for (int k = 0; k < n; k++)
        http_tmpl_free(T->hdr[k]);
    http_tmpl_free(T->body);
    for (size_t k = 0; k < T->npath; k++)
        http_tmpl_free(T->path[k]);
    free(T->path);
    free(T->slots.slot);
}

/* the paths with "{{" become templates (a bad one is refused with its URI, as the trace's) */
static int path_tmpls(ge_t *g, tmpls_t *T) {
    if (!(T->path = calloc(g->nuris ? g->nuris : 1, sizeof *T->path)))
        return 1;
    T->npath = g->nuris;
    for (size_t k = 0; k < g->nuris; k++) {
        if (!strstr(g->uris[k].path, "{{"))
            continue;
        char where[1024];
        snprintf(where, sizeof where, "%s: the path '%.200s' of http://%.260s", g->trace_path,
                 g->uris[k].path, g->uris[k].authority ? g->uris[k].authority : "");
        if (!(T->path[k] = http_tmpl_compile(g->uris[k].path, where)))
            return 2;
    }
    return 0;
}

/* the per-request values' slots of each request (template_vars.h): H->slot_first/slot_n, and
 * the longest request that has some (its connection's copy is that long) */
static int keep_slots(ge_t *g, http_t *H, tmpls_t *T, size_t *first) {
    if (!T->slots.n)
        return 0;
    if (T->slots.n == SIZE_MAX || !(H->slot_n = calloc(g->n, sizeof *H->slot_n)))
        return 1;
    for (size_t i = 0; i < g->n; i++) {
        size_t k = (i + 1 < g->n ? first[i + 1] : T->slots.n) - first[i];
        if (k > UINT16_MAX)
            return 1;
        H->slot_n[i] = (uint16_t)k;
        if (k && H->len[i] > H->copy_len)
            H->copy_len = H->len[i];
    }
    H->slot_first = first;
    H->slots = T->slots.slot;
    T->slots.slot = NULL;
    return 0;
}

/* compiles the templates into *T (the caller frees them), then renders every request */
static int render_with(ge_t *g, http_t *H, tmpls_t *T) {
    for (int k = 0; k < g->http_opt.nheaders; k++)
        if (!(T->hdr[k] = header_tmpl(g->http_opt.headers[k], k)))
            return 2;
    if (g->http_opt.body_file) {
        char *text = http_read_file(g->http_opt.body_file);
        if (!text) {
            fprintf(stderr, "%s:0: cannot read the --http-body-template (%s), expected a "
                            "readable text file\n", g->http_opt.body_file, strerror(errno));
            return 2;
        }
        T->body = http_tmpl_compile(text, g->http_opt.body_file);
        free(text);
        if (!T->body)
            return 2;
    }
    int rc = path_tmpls(g, T);
    if (rc)
        return rc;
    H->off = malloc(g->n * sizeof *H->off);
    H->len = malloc(g->n * sizeof *H->len);
    if (!H->off || !H->len)
        return 1;
    uint64_t total = 0;
    for (size_t i = 0; i < g->n; i++) { /* trace.c left the payload size in dgram_off */
        size_t len = render(g, T, (uint32_t)i, g->reqs[i].dgram_off, NULL);
        if (len > UINT32_MAX)
            return 1;
        H->off[i] = total;
        H->len[i] = (uint32_t)len;
        total += len;
    }
    size_t *first = malloc((g->n ? g->n : 1) * sizeof *first);
    if (!(g->arena = malloc(total ? total : 1)) || !first) {
        free(first);
        return 1;
    }
    for (size_t i = 0; i < g->n; i++) {
        first[i] = T->slots.n;
        render(g, T, (uint32_t)i, g->reqs[i].dgram_off, (char *)g->arena + H->off[i]);
        g->reqs[i].dgram_off = 0;
    }
    rc = keep_slots(g, H, T, first);
    if (!H->slot_first)
        free(first);
    return rc;
}

static int render_all(ge_t *g, http_t *H) {
    tmpls_t T = {{0}, NULL, NULL, 0, {NULL, 0, 0}};
    int rc = render_with(g, H, &T);
    tmpls_free(&T, g->http_opt.nheaders);
    return rc;
}

/* pools: conns per target, the idle deques (all closed at first) and the request queues */
static int pools(ge_t *g, http_t *H) {
    int per = g->http_opt.conns ? g->http_opt.conns
              : g->http_opt.per_request ? DEFAULT_CONNS_PER_REQUEST : DEFAULT_CONNS;
    g->http_opt.conns = per;
    H->nconns = g->neps * (size_t)per;
    int rc = limits_check_sockets(H->nconns, "--http-connections x targets: connections");
    if (rc)
        return rc;
    H->c = calloc(H->nconns, sizeof *H->c);
    H->eps = calloc(g->neps, sizeof *H->eps);
    H->pump = malloc(g->neps * sizeof *H->pump);
    uint32_t *qall = malloc((g->n ? g->n : 1) * sizeof *qall);
    uint32_t *iall = malloc(H->nconns * sizeof *iall);
    if (!H->c || !H->eps || !H->pump || !qall || !iall)
        return 1;
    for (size_t i = 0; i < g->n; i++) /* queue sizes: each request waits at most once */
        H->eps[g->reqs[i].ep].qtail++;
    uint32_t qoff = 0;
    for (size_t e = 0; e < g->neps; e++) {
        hep_t *E = &H->eps[e];
        E->q = qall + qoff;
        qoff += E->qtail;
        E->qtail = 0;
        E->idle = iall + e * (size_t)per;
        E->iconns = (uint32_t)per;
        E->first_conn = (uint32_t)(e * (size_t)per);
        for (int k = 0; k < per; k++) {
            hconn_t *c = &H->c[e * (size_t)per + (size_t)k];
            c->fd = -1;
            c->ep = (uint16_t)e;
            E->idle[E->icount++] = (uint32_t)(e * (size_t)per + (size_t)k);
        }
    }
    return 0;
}

int http_render_requests(ge_t *g) {
    http_t *H = calloc(1, sizeof *H);
    int rc = 1;
    if (H) {
        H->g = g;
        H->stamp_pin = -1;
        g->http = H;
        rc = render_all(g, H);
    }
    if (rc == 1)
        fprintf(stderr, "gateway-emulator: out of memory preparing %zu HTTP requests\n", g->n);
    g->rx_stamps = 1;
    return rc;
}

int http_prepare(ge_t *g) {
    if (g->http_opt.conns > MAX_CONNS_PER_TARGET) {
        fprintf(stderr, "gateway-emulator: --http-connections %d, expected 1..%d\n",
                g->http_opt.conns, MAX_CONNS_PER_TARGET);
        return 2;
    }
    int rc = http_render_requests(g);
    if (!rc && (rc = pools(g, g->http)) == 1)
        fprintf(stderr, "gateway-emulator: out of memory preparing %zu HTTP connections\n",
                g->http->nconns);
    return rc;
}

int http_open_socket(http_t *H, hconn_t *c) {
    const endpoint_t *e = &H->g->eps[c->ep];
    int fd = socket(e->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* a request is one write */
    if (rxstamp_enable(fd) < 0)
        H->g->rx_stamps = 0;
    H->n.connects++;
    c->fd = fd;
    c->served = 0;
    c->want_out = 0;
    if (connect(fd, (const struct sockaddr *)&e->addr, e->addrlen) < 0 && errno != EINPROGRESS) {
        int err = errno;
        close(fd);
        c->fd = -1;
        errno = err;
        return -1;
    }
    return 0;
}

/* A connection's socket asks for kernel receive stamps only while it is open; with a connection
 * per request (or a server that closes) there are moments with none open, and when nothing else
 * on the host asks for stamps the kernel stops stamping then and starts again only some time
 * after the next connect: that connection's response went unstamped (rxstamp_pin.h). One socket
 * held for the whole run keeps stamping on; we wait for it to take effect (at most 200 ms, and
 * never past 20 ms before the start). */
static void hold_stamps_on(ge_t *g, http_t *H) {
    if (!g->rx_stamps || H->stamp_pin >= 0)
        return;
    int64_t wait = g->start_mono - 20 * NS_PER_MS - mono_ns();
    wait = wait > 200 * NS_PER_MS ? 200 * NS_PER_MS : wait < 0 ? 0 : wait;
    int on;
    H->stamp_pin = rxstamp_pin(wait, &on);
    if (H->stamp_pin < 0)
        fprintf(stderr, "gateway-emulator: note: cannot hold kernel receive stamps on (%s): "
                        "responses on new connections may lack them\n", strerror(errno));
    else if (!on)
        fprintf(stderr, "gateway-emulator: note: the kernel was not stamping arriving packets "
                        "%.0f ms after we asked: the first responses may lack kernel stamps\n",
                (double)wait / 1e6);
}

/* keep-alive: every pool connection (closed loop: every client's) established before the start, for at most
 * max(--warmup-ms, --timeout-ms) and never later than 20 ms before it; a target is ready when
 * all its connections are (warmup.json with --warmup-ms). Failed ones stay closed: the request
 * that gets one connects it (and is refused if the target still is not there). */
int http_prestart(ge_t *g) {
    http_t *H = g->http;
    hold_stamps_on(g, H);
    if (g->http_opt.per_request || !H->nconns)
        return 0;
    int64_t t0 = mono_ns(), budget = g->warmup_ns > g->timeout_ns ? g->warmup_ns : g->timeout_ns;
    int64_t deadline = t0 + budget;
    if (deadline > g->start_mono - 20 * NS_PER_MS)
        deadline = g->start_mono - 20 * NS_PER_MS;
    struct pollfd *pf = calloc(H->nconns, sizeof *pf);
    uint8_t *ready = calloc(g->neps ? g->neps : 1, 1);
    if (!pf || !ready) {
        fprintf(stderr, "gateway-emulator: out of memory opening HTTP connections\n");
        return 1;
    }
    progress_set(g, PG_ENDPOINTS, g->neps);
    size_t pending = 0;
    for (size_t i = 0; i < H->nconns; i++) {
        hconn_t *c = &H->c[i];
        c->state = http_open_socket(H, c) == 0 ? CS_CONNECTING : CS_CLOSED;
        if (c->state == CS_CLOSED)
            H->n.connect_failures++;
        pending += c->state == CS_CONNECTING;
    }
    int64_t now;
    while (pending && !ge_stop_signal && (now = mono_ns()) < deadline) {
        for (size_t i = 0; i < H->nconns; i++)
            pf[i] = (struct pollfd){H->c[i].state == CS_CONNECTING ? H->c[i].fd : -1, POLLOUT, 0};
        int64_t left = (deadline - now) / NS_PER_MS;
        if (poll(pf, H->nconns, left > 100 ? 100 : (int)left + 1) <= 0)
            continue;
        for (size_t i = 0; i < H->nconns; i++) {
            hconn_t *c = &H->c[i];
            if (c->state != CS_CONNECTING || !pf[i].revents)
                continue;
            int err = 0;
            socklen_t el = sizeof err;
            getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
            pending--;
            if (err) {
                close(c->fd);
                c->fd = -1;
                c->state = CS_CLOSED;
                H->n.connect_failures++;
                H->n.refused += err == ECONNREFUSED;
            } else {
                c->state = CS_FREE;
            }
        }
    }
    memset(ready, 1, g->neps);
    for (size_t i = 0; i < H->nconns; i++) {
        hconn_t *c = &H->c[i];
        if (c->state == CS_CONNECTING) { /* not by the deadline: closed, reconnected later */
            close(c->fd);
            c->fd = -1;
            c->state = CS_CLOSED;
        }
        ready[c->ep] &= c->state == CS_FREE;
    }
    for (size_t e = 0; e < g->neps; e++) { /* open connections in front of the idle deques */
        hep_t *E = &H->eps[e];
        uint32_t open = 0;
        for (uint32_t k = 0; k < E->iconns; k++)
            if (H->c[E->first_conn + k].state == CS_FREE)
                E->idle[open++] = E->first_conn + k;
        for (uint32_t k = 0; k < E->iconns; k++)
            if (H->c[E->first_conn + k].state == CS_CLOSED)
                E->idle[open++] = E->first_conn + k;
    }
    progress_set(g, PG_ANSWERED, 0);
    int rc = g->warmup_ns ? warmup_record(g, ready, 1, mono_ns() - t0) : 0;
    free(pf);
    free(ready);
    return rc;
}
