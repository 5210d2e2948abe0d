/* outfile.c - every output file: <out>/NAME opened with one error message, closed with a
 * write-error check. A leaf: the per-feature writers and output.c use it, it uses nothing. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ge.h"

FILE *outfile_open(const ge_t *g, const char *name, char *path) {
    snprintf(path, OUT_PATH_MAX, "%s/%s", g->out_dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "gateway-emulator: cannot write %s: %s\n", path, strerror(errno));
    return f;
}

int outfile_close(FILE *f, const char *path) {
    int err = ferror(f);
    if ((fclose(f) != 0) | err) {
        fprintf(stderr, "gateway-emulator: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}
