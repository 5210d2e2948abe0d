/* conn_absent.c - the connected-device entry points of the static wot-fleet (the FROM scratch
 * image's): Debian ships wslay as a shared library only, so connected devices are in
 * build/wot-fleet-conn (dynamically linked, process backend; docs/CONNECTED.md). Here
 * --connections is refused at start, naming the binary that has them. */
#include <stdio.h>

#include "conn.h"

int cn_load(const char *file, struct cn_set *s) {
    (void)s;
    fprintf(stderr, "wot-fleet: --connections %s: this wot-fleet is the static build without "
            "connected devices, expected wot-fleet-conn (wot-device/build/wot-fleet-conn)\n",
            file);
    return -1;
}

void cn_free(struct cn_set *s) { (void)s; }
int cn_start(struct cn_set *s) { (void)s; return -1; }
void cn_stop(struct cn_set *s) { (void)s; }
void cn_release(struct cn_set *s) { (void)s; }
uint64_t cn_needed_fds(const struct cn_set *s) { (void)s; return 0; }
int cn_write_outputs(const struct cn_set *s) { (void)s; return -1; }
