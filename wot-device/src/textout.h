/* textout.h - writing the result files at exit (wot-device's devlog.c, wot-fleet's output.c):
 * open DIR/FILE, close with the write errors checked, a JSON string. Messages start "PROG: ". */
#ifndef WOT_TEXTOUT_H
#define WOT_TEXTOUT_H
#include <stdio.h>

/* fopen(DIR/FILE, "w"); NULL with a message on stderr */
FILE *textout_open(const char *prog, const char *dir, const char *file);
/* fclose with ferror checked; 0 ok, -1 with a message naming `what` */
int textout_close(const char *prog, FILE *f, const char *what);
/* s as a JSON string (quotes, backslashes and control characters escaped) */
void textout_json_str(FILE *f, const char *s);

/* ",N", or "," alone for 0 (an empty CSV field: unknown) */
void textout_opt_u64(FILE *f, unsigned long long v);
/* the CoAP request method name of a code 0.01..0.04, "?" otherwise */
const char *textout_method(unsigned char code);

#endif
