/* conn_file_target.c - libFuzzer target: wot-fleet-conn's connections file reader
 * (src/fleet/conn_file.c, CONTRACTS §3c) on any text. 0 with at least one device, each with a
 * known protocol, a request target starting with '/', a reply_path for chunked only,
 * reply_bytes 16..65536, a unique index and attach header lines ending in CRLF, and no
 * message; or -1 and exactly one
 * "FILE:LINE: ..., expected ..." message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../src/fleet/conn.h"
#include "fuzz_stderr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("conn", 0);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    struct cn_set s = {0};
    fz_capture_begin();
    int rc = cn_load(path, &s);
    const char *msg = fz_capture_end();
    close(fd);
    if ((rc == 0 && *msg) || (rc == -1 && !fz_is_file_line_message(msg, path)))
        abort();
    fz_capture_free();
    if (rc == 0) {
        if (s.ndev == 0)
            abort();
        for (uint32_t i = 0; i < s.ndev; i++) {
            const struct cn_device *d = &s.dev[i];
            if (d->proto > CN_STREAM || d->path[0] != '/' || d->reply_bytes < 16 ||
                d->reply_bytes > CN_REPLY_MAX || (d->proto != CN_CHUNKED && *d->reply_path))
                abort();
            /* attach header lines end in CRLF; the attach message has its decoded length */
            size_t hl = d->attach_headers ? strlen(d->attach_headers) : 0;
            if ((d->attach_headers && (hl < 4 || memcmp(d->attach_headers + hl - 2, "\r\n", 2))) ||
                (d->attach_body && (!d->attach_body_len ||
                                    strlen(d->attach_body) != d->attach_body_len)))
                abort();
            for (uint32_t j = 0; j < i; j++)
                if (s.dev[j].index == d->index)
                    abort();
        }
    } else if (rc != -1) {
        abort();
    }
    cn_free(&s);
    return 0;
}
