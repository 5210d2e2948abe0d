/* device_inproc.c - see device_inproc.h. */
#include "device_inproc.h"

#include <arpa/inet.h>
#include <coap3/coap.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../src/block.h"
#include "../src/observe.h"

static struct resource_set rs;
static struct devlog dlog;
static struct workq wq;
static struct device dev;
static coap_context_t *ctx;
static int cli = -1;

/* a free port: bind port 0, read it back, let it go (libcoap binds it right after) */
static int free_port(void) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || getsockname(s, (struct sockaddr *)&a, &l))
        return -1;
    close(s);
    return ntohs(a.sin_port);
}

int inproc_start(const char *resources_csv, enum response_mode mode) {
    FILE *fp = fmemopen((void *)resources_csv, strlen(resources_csv), "r");
    if (!fp || resources_read(fp, "resources.csv", &rs))
        return -1;
    fclose(fp);
    if (devlog_init(&dlog, 1 << 16) || workq_init(&wq, 1, 4))
        return -1;
    dev = (struct device){.rs = &rs, .wq = &wq, .log = &dlog, .listen = "127.0.0.1",
                          .nstart = 5, .response = mode, .piggyback_max_ns = 0};
    coap_startup();
    coap_set_log_level(LOG_WARNING); /* as coapio_run: malformed datagrams are counted */
    ctx = coap_new_context(NULL);
    int port = free_port();
    coap_address_t a;
    coap_address_init(&a);
    a.addr.sin.sin_family = AF_INET;
    a.addr.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.addr.sin.sin_port = htons((uint16_t)port);
    a.size = sizeof(struct sockaddr_in);
    if (!ctx || port < 0 || !coap_new_endpoint(ctx, &a, COAP_PROTO_UDP) || coapio_attach(&dev, ctx)) {
        fprintf(stderr, "device_inproc: cannot start the device on 127.0.0.1:%d\n", port);
        return -1;
    }
    cli = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    if (cli < 0 || connect(cli, (struct sockaddr *)&a.addr.sin, sizeof a.addr.sin)) {
        perror("device_inproc: client socket");
        return -1;
    }
    return 0;
}

/* the worker completions, as coapio.c's loop hands them back */
static void completions(void) {
    struct job *done[8];
    size_t k = workq_collect(&wq, done, 8);
    for (size_t m = 0; m < k; m++)
        if (!observe_job_done(done[m]))
            coap_async_trigger(done[m]->ctx);
}

size_t inproc_exchange(const uint8_t *d, size_t n, uint8_t *out, size_t cap, int wait_ms) {
    uint8_t junk[2048];
    while (recv(cli, junk, sizeof junk, 0) > 0) /* answers of earlier exchanges */
        ;
    if (send(cli, d, n, 0) < 0)
        return 0;
    size_t got = 0;
    for (int t = 0; t <= wait_ms && !got; t++) {
        coap_io_process(ctx, COAP_IO_NO_WAIT);
        completions();
        coap_io_process(ctx, COAP_IO_NO_WAIT);
        ssize_t r = recv(cli, out, cap, 0);
        if (r > 0)
            got = (size_t)r;
        else if (t < wait_ms)
            poll(NULL, 0, 1);
    }
    return got;
}

const struct counters *inproc_counters(void) { return &dev.c; }

void inproc_stop(void) {
    if (cli >= 0)
        close(cli);
    workq_shutdown(&wq);
    coap_free_context(ctx);
    coap_cleanup();
    observe_free();
    block_free();
    devlog_free(&dlog);
    resources_free(&rs);
}
