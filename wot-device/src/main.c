/* main.c - wot-device command line (contract §3). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coapio.h"
#include "devlog.h"
#include "dtls.h"
#include "impair.h"
#include "block.h"
#include "observe.h"
#include "pod.h"
#include "push.h"
#include "resources.h"
#include "workq.h"

#define DEFAULT_LOG_CAPACITY 1000000
#define DEFAULT_PIGGYBACK_MAX_US 1000 /* auto: piggy-back services up to 1 ms (README) */

static void usage(void) {
    fputs("usage: wot-device --resources FILE --log-dir DIR [--listen ADDR[:PORT]]\n"
          "                  [--threads N] [--queue N] [--log-capacity N] [--name NAME]\n"
          "                  [--response auto|piggyback|separate] [--piggyback-max-us N]\n"
          "                  [--impair SPEC [--impair-ge GE] [--impair-seed N]]\n"
          "                  [--dtls-psk-identity ID --dtls-psk-key-file FILE]\n"
          "                  [--push FILE [--push-id N] [--push-timeout-ms N]]\n"
          "       wot-device --pod -- DEVICE ARGS [-- DEVICE ARGS ...]   (one process each)\n",
          stderr);
}

static int parse_count(const char *opt, const char *s, long min, long max, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < min || v > max) {
        fprintf(stderr, "wot-device: bad %s '%s', expected an integer %ld..%ld\n", opt, s, min,
                max);
        return -1;
    }
    *out = v;
    return 0;
}

static int device_main(int argc, char **argv) {
    const char *resources = NULL, *log_dir = NULL, *listen = "0.0.0.0", *name = "";
    const char *psk_id = NULL, *psk_key_file = NULL;
    const char *impair = NULL, *impair_ge = NULL, *impair_seed = NULL;
    const char *push = NULL, *push_id = NULL, *push_timeout = NULL;
    long threads = 1, queue = 1024, log_cap = DEFAULT_LOG_CAPACITY;
    long pb_max_us = DEFAULT_PIGGYBACK_MAX_US;
    enum response_mode response = RESP_AUTO;
    static const struct option opts[] = {
        {"resources", required_argument, 0, 'r'}, {"log-dir", required_argument, 0, 'd'},
        {"listen", required_argument, 0, 'l'},    {"threads", required_argument, 0, 't'},
        {"queue", required_argument, 0, 'q'},     {"log-capacity", required_argument, 0, 'c'},
        {"name", required_argument, 0, 'n'},      {"help", no_argument, 0, 'h'},
        {"impair", required_argument, 0, 'i'},    {"impair-ge", required_argument, 0, 'g'},
        {"impair-seed", required_argument, 0, 's'},
        {"response", required_argument, 0, 'p'}, {"piggyback-max-us", required_argument, 0, 'm'},
        {"dtls-psk-identity", required_argument, 0, 'I'},
        {"dtls-psk-key-file", required_argument, 0, 'K'},
        {"push", required_argument, 0, 'P'},      {"push-id", required_argument, 0, 'N'},
        {"push-timeout-ms", required_argument, 0, 'T'},
        {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int bad = 0;
        switch (o) {
        case 'r': resources = optarg; break;
        case 'd': log_dir = optarg; break;
        case 'l': listen = optarg; break;
        case 'n': name = optarg; break;
        case 'i': impair = optarg; break;
        case 'g': impair_ge = optarg; break;
        case 's': impair_seed = optarg; break;
        case 'I': psk_id = optarg; break;
        case 'K': psk_key_file = optarg; break;
        case 'P': push = optarg; break;
        case 'N': push_id = optarg; break;
        case 'T': push_timeout = optarg; break;
        case 't': bad = parse_count("--threads", optarg, 1, 1024, &threads); break;
        case 'q': bad = parse_count("--queue", optarg, 1, 1 << 20, &queue); break;
        case 'c': bad = parse_count("--log-capacity", optarg, 0, 1L << 30, &log_cap); break;
        case 'm': bad = parse_count("--piggyback-max-us", optarg, 0, 3600000000L, &pb_max_us); break;
        case 'p':
            if (!strcmp(optarg, "auto"))
                response = RESP_AUTO;
            else if (!strcmp(optarg, "piggyback"))
                response = RESP_PIGGYBACK;
            else if (!strcmp(optarg, "separate"))
                response = RESP_SEPARATE;
            else {
                fprintf(stderr, "wot-device: bad --response '%s', expected auto|piggyback|separate\n",
                        optarg);
                bad = 1;
            }
            break;
        case 'h': usage(); return 0;
        default: bad = 1; break;
        }
        if (bad) {
            usage();
            return 2;
        }
    }
    if (optind != argc || !resources || !log_dir) {
        fputs("wot-device: --resources and --log-dir are required, no positional arguments\n",
              stderr);
        usage();
        return 2;
    }
    if (impair_parse(impair, impair_ge, impair_seed) || dtls_configure(psk_id, psk_key_file) ||
        push_load(push, push_id, push_timeout))
        return 2;
    struct stat st;
    if (stat(log_dir, &st) || !S_ISDIR(st.st_mode) || access(log_dir, W_OK)) {
        fprintf(stderr, "wot-device: --log-dir '%s' is not a writable directory\n", log_dir);
        return 2;
    }
    struct resource_set rs;
    if (resources_load(resources, &rs))
        return 2;

    /* SIGTERM/SIGINT go to the signalfd of the I/O thread; workers inherit the mask. */
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGTERM);
    sigaddset(&ss, SIGINT);
    pthread_sigmask(SIG_BLOCK, &ss, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct devlog log;
    struct workq wq;
    if (devlog_init(&log, (size_t)log_cap) || workq_init(&wq, (int)threads, (size_t)queue)) {
        fprintf(stderr, "wot-device: out of memory or cannot start threads\n");
        return 1;
    }
    struct device d = {.rs = &rs, .wq = &wq, .log = &log, .listen = listen, .log_dir = log_dir,
                       .nstart = (unsigned)(queue + threads > 65535 ? 65535 : queue + threads),
                       .response = response, .piggyback_max_ns = (uint64_t)pb_max_us * 1000ULL};
    int rc = coapio_run(&d);
    workq_shutdown(&wq);
    static const char *const RESPONSE[] = {"auto", "piggyback", "separate"};
    if (rc == 0 && (devlog_write(&log, &rs, &d.c, log_dir, name, (int)threads, RESPONSE[response]) ||
                    push_write(log_dir)))
        rc = 1;
    devlog_free(&log);
    observe_free();
    block_free();
    impair_free();
    dtls_free();
    push_free();
    resources_free(&rs);
    return rc;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--pod"))
        return pod_main(argc, argv, device_main);
    return device_main(argc, argv);
}
