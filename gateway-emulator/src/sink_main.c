/* sink_main.c - notify-sink's command line and its outputs (sink.h):
 *
 *   notify-sink --out DIR --marker TEXT [--duration-ms N] [--max-notifications N]
 *               [--ready-file FILE] [--accept MIME]
 *               [--webhook NAME=ADDRESS:PORT ...] [--stream NAME=http://HOST:PORT/PATH ...]
 *               [--observe NAME=coap://HOST:PORT/PATH ...] [--websocket NAME=ws://HOST:PORT/PATH ...]
 *               [--longpoll NAME=http://HOST:PORT/PATH ...]
 *
 * DIR/notifications.csv: subscriber,id,received_ns,kernel (CLOCK_MONOTONIC ns; kernel 1 when
 * it is the kernel's receive stamp); DIR/sink.json: per subscriber its kind, what it listened
 * to, connections, bytes, messages (a long-poll: its complete answers), ids and errors (a
 * long-poll also its polls), and the run's start/end. Exit 0, 1
 * environment (a stream that cannot connect, a port in use), 2 bad input. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "sink.h"

volatile sig_atomic_t sink_stop;
int sink_failed;

static void on_signal(int sig) {
    (void)sig;
    sink_stop = 1;
}

static void usage(FILE *f) {
    fputs("usage: notify-sink --out DIR --marker TEXT [--duration-ms N] [--max-notifications N]\n"
          "         [--ready-file FILE] [--accept MIME]\n"
          "         [--webhook NAME=ADDRESS:PORT ...] [--stream NAME=http://HOST:PORT/PATH ...]\n"
          "         [--observe NAME=coap://HOST:PORT/PATH ...] [--websocket NAME=ws://HOST:PORT/PATH ...]\n"
          "         [--longpoll NAME=http://HOST:PORT/PATH ...]\n", f);
}

static int bad(const char *opt, const char *val, const char *expected) {
    fprintf(stderr, "notify-sink: bad value '%s' for %s, expected %s\n", val, opt, expected);
    usage(stderr);
    return 2;
}

static int add_sub(sink_t *S, int kind, const char *opt, const char *arg) {
    const char *eq = strchr(arg, '=');
    if (S->nsubs == SINK_MAX_SUBS)
        return bad(opt, arg, "at most 64 subscribers");
    if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof S->sub[0].name ||
        strlen(eq + 1) >= sizeof S->sub[0].spec || !eq[1])
        return bad(opt, arg, "NAME=WHERE (a name of at most 47 characters)");
    sink_sub_t *s = &S->sub[S->nsubs++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->fd = -1;
    memcpy(s->name, arg, (size_t)(eq - arg));
    strcpy(s->spec, eq + 1);
    for (int i = 0; i < S->nsubs - 1; i++)
        if (!strcmp(S->sub[i].name, s->name))
            return bad(opt, arg, "a subscriber name not used before");
    return 0;
}

static int parse(sink_t *S, int argc, char **argv) {
    static const struct option opts[] = {
        {"out", required_argument, 0, 'o'},      {"marker", required_argument, 0, 'm'},
        {"duration-ms", required_argument, 0, 'd'}, {"max-notifications", required_argument, 0, 'n'},
        {"ready-file", required_argument, 0, 'r'}, {"accept", required_argument, 0, 'a'},
        {"webhook", required_argument, 0, 'w'},  {"stream", required_argument, 0, 's'},
        {"observe", required_argument, 0, 'b'},  {"websocket", required_argument, 0, 'k'},
        {"longpoll", required_argument, 0, 'l'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    S->cap = 1000000;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end;
        long long v;
        int rc = 0;
        switch (c) {
        case 'o': S->out_dir = optarg; break;
        case 'm': S->marker = optarg; break;
        case 'r': S->ready_file = optarg; break;
        case 'a': S->accept = optarg; break;
        case 'd':
        case 'n':
            v = strtoll(optarg, &end, 10);
            if (end == optarg || *end || v < (c == 'd' ? 0 : 1) || v > 1000000000LL)
                return bad(c == 'd' ? "--duration-ms" : "--max-notifications", optarg,
                           "an integer 1..1000000000 (0 for --duration-ms: until a signal)");
            if (c == 'd')
                S->duration_ns = v * NS_PER_MS;
            else
                S->cap = (size_t)v;
            break;
        case 'w': rc = add_sub(S, SUB_WEBHOOK, "--webhook", optarg); break;
        case 's': rc = add_sub(S, SUB_STREAM, "--stream", optarg); break;
        case 'b': rc = add_sub(S, SUB_OBSERVE, "--observe", optarg); break;
        case 'k': rc = add_sub(S, SUB_WEBSOCKET, "--websocket", optarg); break;
        case 'l': rc = add_sub(S, SUB_LONGPOLL, "--longpoll", optarg); break;
        case 'h': usage(stdout); exit(0);
        default:
            fprintf(stderr, "notify-sink: unknown or incomplete option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
        if (rc)
            return rc;
    }
    if (!S->out_dir || !S->marker || !S->nsubs) {
        fprintf(stderr, "notify-sink: --out, --marker and at least one of --webhook/--stream/"
                        "--observe/--websocket/--longpoll are required\n");
        usage(stderr);
        return 2;
    }
    sink_scan_t probe;
    if (sink_scan_init(&probe, S->marker) < 0)
        return bad("--marker", S->marker, "1..63 bytes of text that precede the id");
    return 0;
}

static const char *const KIND[] = {"webhook", "stream", "observe", "websocket", "longpoll"};

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++)
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    fputc('"', f);
}

static int write_outputs(const sink_t *S) {
    char path[4096];
    snprintf(path, sizeof path, "%s/notifications.csv", S->out_dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    fputs("subscriber,id,received_ns,kernel\n", f);
    for (size_t i = 0; i < S->n; i++) {
        const sink_note_t *x = &S->note[i];
        fprintf(f, "%s,%llu,%lld,%d\n", S->sub[x->sub].name, (unsigned long long)x->id,
                (long long)x->t, x->kernel);
    }
    if (fclose(f))
        return 1;
    snprintf(path, sizeof path, "%s/sink.json", S->out_dir);
    if (!(f = fopen(path, "w")))
        return 1;
    fprintf(f, "{\"marker\": ");
    json_str(f, S->marker);
    fprintf(f, ", \"start_mono_ns\": %lld, \"end_mono_ns\": %lld, \"notifications\": %zu, "
               "\"over_capacity\": %zu, \"capacity\": %zu, \"subscribers\": [",
            (long long)S->start_mono, (long long)S->end_mono, S->n, S->over_capacity, S->cap);
    for (int i = 0; i < S->nsubs; i++) {
        const sink_sub_t *s = &S->sub[i];
        fprintf(f, "%s{\"name\": ", i ? ", " : "");
        json_str(f, s->name);
        fprintf(f, ", \"kind\": \"%s\", \"target\": ", KIND[s->kind]);
        json_str(f, s->spec);
        fprintf(f, ", \"ready\": %s, \"status\": %d, \"connections\": %llu, \"bytes\": %llu, "
                   "\"messages\": %llu, \"ids\": %llu, \"errors\": %llu",
                s->ready ? "true" : "false", s->status, (unsigned long long)s->connections,
                (unsigned long long)s->bytes, (unsigned long long)s->messages,
                (unsigned long long)s->ids, (unsigned long long)s->errors);
        if (s->kind == SUB_LONGPOLL) /* the GETs sent: the first, the re-polls, the reconnections' */
            fprintf(f, ", \"polls\": %llu", (unsigned long long)s->polls);
        fputc('}', f);
    }
    fprintf(f, "]}\n");
    return fclose(f) ? 1 : 0;
}

int main(int argc, char **argv) {
    static sink_t S;
    int rc = parse(&S, argc, argv);
    if (rc)
        return rc;
    if (mkdir(S.out_dir, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "notify-sink: cannot create %s: %s\n", S.out_dir, strerror(errno));
        return 1;
    }
    /* reserved, touched as notifications arrive: nothing is allocated while they do */
    S.note = mmap(NULL, S.cap * sizeof *S.note, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (S.note == MAP_FAILED) {
        fprintf(stderr, "notify-sink: cannot reserve %zu notification records\n", S.cap);
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if ((rc = sink_open(&S)))
        return rc;
    sink_run(&S);
    if (write_outputs(&S)) {
        fprintf(stderr, "notify-sink: cannot write into %s: %s\n", S.out_dir, strerror(errno));
        return 1;
    }
    return sink_failed ? 1 : 0;
}
