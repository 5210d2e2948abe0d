/* devlog.c - device log storage and the files written at shutdown. */
#include "devlog.h"
#include "textout.h"
#include "dtls.h"
#include "impair.h"
#include "block.h"
#include "observe.h"
#include "push.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

int devlog_init(struct devlog *l, size_t capacity) {
    l->n = 0;
    l->dropped = 0;
    l->cap = capacity;
    l->e = NULL;
    if (capacity == 0)
        return 0;
    void *p = mmap(NULL, capacity * sizeof(struct log_entry), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    l->e = p;
    return 0;
}

struct log_entry *devlog_add(struct devlog *l, const struct log_entry *e) {
    if (l->n < l->cap) {
        l->e[l->n] = *e;
        return &l->e[l->n++];
    }
    l->dropped++;
    return NULL;
}

void devlog_token(struct log_entry *e, const uint8_t *token, size_t len) {
    e->tkl = (uint8_t)(len < sizeof e->token ? len : sizeof e->token);
    memcpy(e->token, token, e->tkl);
}

int devlog_write(const struct devlog *l, const struct resource_set *rs, const struct counters *c,
                 const char *dir, const char *name, int threads, const char *response) {
    FILE *f = textout_open("wot-device", dir, "device-log.csv");
    if (!f)
        return -1;
    static char buf[1 << 16];
    setvbuf(f, buf, _IOFBF, sizeof buf);
    fputs("arrival_ns,start_ns,end_ns,path,method,code,token,arrival_kernel_ns,response_sent_ns\n", f);
    for (size_t i = 0; i < l->n; i++) {
        const struct log_entry *e = &l->e[i];
        const char *path = e->res >= 0 && (size_t)e->res < rs->n ? rs->v[e->res].path : "";
        fprintf(f, "%llu,", (unsigned long long)e->arrival_ns);
        if (e->start_ns)
            fprintf(f, "%llu,%llu,", (unsigned long long)e->start_ns,
                    (unsigned long long)e->end_ns);
        else
            fputs(",,", f);
        fprintf(f, "%s,%s,%u.%02u,", path, textout_method(e->method), e->code >> 5, e->code & 31);
        for (int k = 0; k < e->tkl; k++)
            fprintf(f, "%02x", e->token[k]);
        textout_opt_u64(f, e->arrival_k_ns);
        textout_opt_u64(f, e->sent_ns);
        fputc('\n', f);
    }
    if (textout_close("wot-device", f, "device-log.csv") || observe_write_log(dir, rs))
        return -1;

    f = textout_open("wot-device", dir, "device-summary.json");
    if (!f)
        return -1;
    fputs("{\"name\": ", f);
    textout_json_str(f, name);
    fprintf(f,
            ", \"requests\": %llu, \"responses\": %llu, \"overload_503\": %llu, "
            "\"not_found\": %llu, \"malformed\": %llu, \"log_entries\": %llu, "
            "\"log_dropped\": %llu, \"threads\": %d, \"response\": \"%s\", "
            "\"piggybacked\": %llu",
            (unsigned long long)c->requests, (unsigned long long)c->responses,
            (unsigned long long)c->overload_503, (unsigned long long)c->not_found,
            (unsigned long long)c->malformed, (unsigned long long)l->n,
            (unsigned long long)l->dropped, threads, response,
            (unsigned long long)c->piggybacked);
    impair_json(f);
    observe_json(f);
    block_json(f);
    dtls_json(f);
    push_json(f);
    fputs("}\n", f);
    return textout_close("wot-device", f, "device-summary.json");
}

void devlog_free(struct devlog *l) {
    if (l->e)
        munmap(l->e, l->cap * sizeof(struct log_entry));
    l->e = NULL;
}
