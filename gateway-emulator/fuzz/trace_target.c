/* trace_target.c - libFuzzer target: the GE's trace reader (trace.c, trace_read) on any text.
 * The first byte picks the options that change what the reader accepts (--block-size, DTLS
 * credentials, --proxy, --http-connections, --type non); the rest is the trace. A bad line
 * must end in rc 2 with one "fuzz.csv:LINE: ..., expected ..." message, a good trace in rc 0
 * and no message; never a crash, a sanitizer report or a leak. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/ge.h"
#include "fuzz_stderr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2)
        return 0;
    uint8_t opts = data[0];
    static ge_t g;
    memset(&g, 0, sizeof g);
    if (opts & 1)
        g.block_size = 1024;
    if (opts & 2)
        g.dtls_opt.identity = "id";
    if (opts & 4) {
        g.proxy.host = "127.0.0.1";
        g.proxy.port = 5683;
        g.proxy.mode = opts & 8 ? 1 : 0;
    }
    if (opts & 16)
        g.http_opt.conns = 2;
    if (opts & 32)
        g.non = 1;
    FILE *fp = fmemopen((void *)(data + 1), size - 1, "r");
    if (!fp)
        return 0;
    fz_capture_begin();
    int rc = trace_read(&g, fp, "fuzz.csv");
    const char *msg = fz_capture_end();
    fclose(fp);
    if (rc != 0 && rc != 1 && rc != 2)
        abort(); /* the reader's contract: 0 ok, 1 environment, 2 bad input */
    if (rc == 0 && (g.n == 0 || *msg))
        abort(); /* an accepted trace has a request and no complaint */
    if (rc == 2 && !fz_is_file_line_message(msg, "fuzz.csv"))
        abort();
    fz_capture_free();
    trace_free(&g);
    return 0;
}
