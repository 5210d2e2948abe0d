/* resources_target.c - libFuzzer target: the resource file reader shared by wot-device and
 * wot-fleet (resources.c) on any text. 0 with at least one resource, each path valid and
 * unique, and no message; or -1, one "fuzz.csv:LINE: ..., expected ..." message and nothing
 * left allocated. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/resources.h"
#include "fuzz_stderr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0)
        return 0;
    FILE *fp = fmemopen((void *)data, size, "r");
    if (!fp)
        return 0;
    struct resource_set rs;
    fz_capture_begin();
    int rc = resources_read(fp, "fuzz.csv", &rs);
    const char *msg = fz_capture_end();
    fclose(fp);
    if ((rc == 0 && *msg) || (rc == -1 && !fz_is_file_line_message(msg, "fuzz.csv")))
        abort();
    fz_capture_free();
    if (rc == 0) {
        if (rs.n == 0)
            abort();
        for (size_t i = 0; i < rs.n; i++) {
            const char *p = rs.v[i].path;
            if (!*p || *p == '/' || strstr(p, "//") || rs.v[i].payload_bytes > RES_MAX_PAYLOAD)
                abort();
            for (size_t j = 0; j < i; j++)
                if (!strcmp(rs.v[j].path, p))
                    abort();
        }
        resources_free(&rs);
    } else if (rc != -1 || rs.v || rs.n) {
        abort();
    }
    return 0;
}
