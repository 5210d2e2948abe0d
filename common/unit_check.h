/* unit_check.h - the few helpers of the in-process parser tests (gateway-emulator/unit,
 * wot-device/unit): a failing check prints "not ok" with the case and what differed, and the
 * program exits 1 (tests/c/test_parsers_inprocess.py runs them). Messages a parser prints to
 * stderr are captured so a bad input's exact error can be compared. */
#ifndef WB_UNIT_CHECK_H
#define WB_UNIT_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int uc_cases, uc_failed;

#define UC_CHECK(name, cond, ...)                                                  \
    do {                                                                           \
        uc_cases++;                                                                \
        if (!(cond)) {                                                             \
            uc_failed++;                                                           \
            printf("not ok %s: ", (name));                                         \
            printf(__VA_ARGS__);                                                   \
            putchar('\n');                                                         \
        }                                                                          \
    } while (0)

/* stderr into a temporary file between uc_capture_begin and uc_capture_end */
static int uc_saved_fd = -1;
static FILE *uc_tmp;

static void uc_capture_begin(void) {
    fflush(stderr);
    uc_tmp = tmpfile();
    if (!uc_tmp) {
        perror("tmpfile");
        exit(2);
    }
    uc_saved_fd = dup(2);
    dup2(fileno(uc_tmp), 2);
}

/* the captured text, without its final newline, in out (cap bytes) */
static void uc_capture_end(char *out, size_t cap) {
    fflush(stderr);
    dup2(uc_saved_fd, 2);
    close(uc_saved_fd);
    rewind(uc_tmp);
    size_t n = fread(out, 1, cap - 1, uc_tmp);
    out[n] = '\0';
    while (n && out[n - 1] == '\n')
        out[--n] = '\0';
    fclose(uc_tmp);
}

static int uc_report(const char *program) {
    printf("%s: %d checks, %d failed\n", program, uc_cases, uc_failed);
    return uc_failed ? 1 : 0;
}
#endif
