/* dtls_alloc.c - counts OpenSSL's allocations (one increment per malloc/realloc) so the summary
 * can report how many happen on the loop thread (README "DTLS", Allocation). */
#include <stdlib.h>

#include <openssl/crypto.h>

#include "dtls_int.h"

static uint64_t n_allocs;

static void *cnt_malloc(size_t n, const char *f, int l) {
    (void)f, (void)l;
    n_allocs++;
    return malloc(n);
}
static void *cnt_realloc(void *p, size_t n, const char *f, int l) {
    (void)f, (void)l;
    n_allocs++;
    return realloc(p, n);
}
static void cnt_free(void *p, const char *f, int l) {
    (void)f, (void)l;
    free(p);
}

void dtls_alloc_count_install(void) {
    CRYPTO_set_mem_functions(cnt_malloc, cnt_realloc, cnt_free);
}

uint64_t dtls_allocs(void) {
    return n_allocs;
}
