/* fuzz_stderr.h - the fuzz targets' check of the project's rule for bad input: "a clear error
 * naming file:line ... expected ...", never silence. A parser's stderr is caught in memory for
 * one input (the stdio stream only: sanitizer and libFuzzer reports still reach fd 2). */
#ifndef WB_FUZZ_STDERR_H
#define WB_FUZZ_STDERR_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *fz_saved;
static char *fz_text;
static size_t fz_len;

static void fz_capture_begin(void) {
    fz_saved = stderr;
    stderr = open_memstream(&fz_text, &fz_len);
    if (!stderr)
        abort();
}

/* the text written since fz_capture_begin (free it with fz_capture_free) */
static const char *fz_capture_end(void) {
    fclose(stderr);
    stderr = fz_saved;
    return fz_text;
}

static void fz_capture_free(void) {
    free(fz_text);
    fz_text = NULL;
}

/* "NAME:LINE: ..., expected ..." on one line */
static int fz_is_file_line_message(const char *t, const char *name) {
    size_t n = strlen(name);
    if (strncmp(t, name, n) != 0 || t[n] != ':' || t[n + 1] < '0' || t[n + 1] > '9')
        return 0;
    const char *nl = strchr(t, '\n');
    const char *ex = strstr(t, "expected");
    return nl && !nl[1] && ex && ex < nl;
}
#endif
