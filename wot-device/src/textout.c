/* textout.c - see textout.h. */
#include "textout.h"

#include <errno.h>
#include <string.h>

FILE *textout_open(const char *prog, const char *dir, const char *file) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "%s: cannot write %s: %s\n", prog, path, strerror(errno));
    return f;
}

int textout_close(const char *prog, FILE *f, const char *what) {
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        fprintf(stderr, "%s: error writing %s\n", prog, what);
        return -1;
    }
    return 0;
}

void textout_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

void textout_opt_u64(FILE *f, unsigned long long v) {
    fputc(',', f);
    if (v)
        fprintf(f, "%llu", v);
}

const char *textout_method(unsigned char code) {
    static const char *names[] = {"?", "GET", "POST", "PUT", "DELETE"};
    return code < 5 ? names[code] : "?";
}
