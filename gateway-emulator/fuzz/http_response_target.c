/* http_response_target.c - libFuzzer target: the GE's HTTP/1.1 response parser
 * (http_parse.c) on any bytes. Each input is parsed twice: whole, and in pieces whose sizes
 * come from the input's first byte (a response arrives in reads of any size); both must end
 * in the same state with the same status, body count, close flag and bytes used. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/http.h"

static size_t run(http_parser_t *p, const uint8_t *d, size_t n, size_t piece, int eof) {
    http_parser_reset(p);
    size_t used = 0;
    while (used < n && p->state != HP_DONE && p->state != HP_ERR) {
        size_t k = n - used < piece ? n - used : piece;
        size_t u = http_parse_feed(p, d + used, k);
        if (u > k)
            abort();
        used += u;
        if (u < k)
            break;
    }
    if (eof && p->state != HP_DONE && p->state != HP_ERR)
        http_parse_eof(p);
    return used;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    static http_parser_t a, b;
    size_t piece = (size_t)(data[0] & 0x3f) + 1;
    int eof = data[0] >> 7;
    size_t ua = run(&a, data + 1, size - 1, (size_t)-1, eof);
    size_t ub = run(&b, data + 1, size - 1, piece, eof);
    if (a.state != b.state || ua != ub || a.status != b.status || a.body != b.body ||
        a.close != b.close)
        abort();
    if (a.state == HP_DONE && (a.status < 200 || a.status > 599))
        abort(); /* interim responses are skipped, never the result */
    if (a.body > size)
        abort();
    return 0;
}
