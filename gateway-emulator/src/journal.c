/* journal.c - the request table in a shared file mapping (--journal FILE), so that what was
 * measured outlives the gateway emulator.
 *
 * The GE writes its per-request files once, after the loop (no I/O on the hot path). Killed
 * (SIGKILL, an OOM kill, `docker kill`), it would leave nothing. With --journal, the request
 * table itself lives in FILE, mapped MAP_SHARED: the loop's plain stores are the record, and
 * the kernel keeps the pages when the process dies. FILE belongs on a tmpfs (/dev/shm): shmem
 * pages are never written back, so no store takes a write-protect fault in the loop. The
 * harness turns a dead GE's journal into requests.csv (wotbench/rundir/ge_journal.py).
 *
 * Layout (little-endian, contract §2): a 64-byte header, then `n` req_t records (ge.h). An
 * http:// record keeps its status code in `status` (the union with the CoAP MID) and its class
 * in `code`; the header's `scheme` says which. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ge.h"

#define JOURNAL_MAGIC 0x314e524a45474257ULL /* "WBGEJRN1" */
#define JOURNAL_VERSION 1

typedef struct {
    uint64_t magic;
    uint32_t version;
    uint32_t record_size; /* sizeof(req_t) */
    uint64_t n;
    int64_t start_mono_ns; /* 0 until the start instant is fixed */
    uint64_t token_salt;
    int64_t timeout_ns;
    uint32_t scheme; /* SCHEME_* (ge.h): 3 = http://, whose records hold the HTTP status */
    uint32_t reserved32;
    uint64_t reserved;
} journal_hdr_t;

_Static_assert(sizeof(journal_hdr_t) == 64, "journal header is 64 bytes");
_Static_assert(sizeof(req_t) == 72, "req_t layout is part of the journal contract");
_Static_assert(offsetof(req_t, status) == 50 && offsetof(req_t, code) == 57 &&
                   offsetof(req_t, rx_wait_ns) == 64,
               "the offsets wotbench/rundir/ge_journal.py reads (contract §2)");

int journal_open(ge_t *g, const char *path) {
    size_t len = sizeof(journal_hdr_t) + g->n * sizeof(req_t);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ftruncate(fd, (off_t)len) < 0) {
        fprintf(stderr, "gateway-emulator: cannot create the journal %s: %s\n", path,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        return 1;
    }
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        fprintf(stderr, "gateway-emulator: cannot map the journal %s: %s\n", path,
                strerror(errno));
        return 1;
    }
    journal_hdr_t *h = m;
    *h = (journal_hdr_t){.magic = JOURNAL_MAGIC, .version = JOURNAL_VERSION,
                         .record_size = sizeof(req_t), .n = g->n, .token_salt = g->salt,
                         .timeout_ns = g->timeout_ns, .scheme = (uint32_t)g->scheme};
    req_t *moved = (req_t *)(h + 1);
    if (g->n)
        memcpy(moved, g->reqs, g->n * sizeof(req_t));
    free(g->reqs);
    g->reqs = moved;
    g->journal = h;
    return 0;
}

void journal_started(ge_t *g) {
    if (g->journal)
        ((journal_hdr_t *)g->journal)->start_mono_ns = g->start_mono;
}
