/* msg_frame.h - message framing that does not depend on HTTP chunk boundaries (docs/CONNECTED.md
 * "Framing"): the bytes of a chunked body are one stream, a message ends at a configured
 * delimiter (1..MF_DELIM_MAX bytes, e.g. "\n") wherever the chunks were cut, so an intermediary
 * that re-chunks (nginx merging three messages into one chunk, or splitting one over two) does
 * not change what a device receives. Like http_chunked.h it keeps only the first HC_HEAD bytes
 * of a message (what reply matching needs) and counts the rest: a connection's reassembly
 * state is a fixed struct allocated with its decoder at attach, however large its messages.
 * A message longer than MF_MAX_MSG (the delimiter never came) is an error, never an overflow.
 * Header-only. */
#ifndef WB_COMMON_MSG_FRAME_H
#define WB_COMMON_MSG_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "http_chunked.h"

#define MF_DELIM_MAX 8
#define MF_MAX_MSG (1u << 20)

struct mf_framer {
    uint32_t total;           /* bytes of the current message so far, delimiter bytes included */
    uint16_t head_len;
    uint8_t matched;          /* delimiter bytes matched at the end of what came */
    char head[HC_HEAD];
};

/* the delimiter's bytes matched after byte c, given k matched before (the longest suffix of
 * delim[0..k) + c that is a prefix of delim) */
static inline uint8_t mf_step(const char *delim, size_t dlen, uint8_t k, char c) {
    if (k < dlen && delim[k] == c)
        return (uint8_t)(k + 1);
    char seen[MF_DELIM_MAX];
    memcpy(seen, delim, k);
    seen[k] = c;              /* k < dlen <= MF_DELIM_MAX after a full match is reset to 0 */
    for (size_t j = k; j > 0; j--)          /* candidate lengths k..1 */
        if (memcmp(seen + k + 1 - j, delim, j) == 0)
            return (uint8_t)j;
    return 0;
}

/* Feeds buf[0..len) of the stream. For every complete non-empty message calls
 * on_msg(user, head, head_len, size) (size: the message's length without its delimiter;
 * head_len <= min(size, HC_HEAD)); empty messages (two delimiters in a row) are skipped.
 * Returns 0, or -1 when a message passed MF_MAX_MSG bytes without its delimiter. */
static inline int mf_feed(struct mf_framer *f, const char *delim, size_t dlen, const char *buf,
                          size_t len, void (*on_msg)(void *, const char *, size_t, uint32_t),
                          void *user) {
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (f->head_len < HC_HEAD)
            f->head[f->head_len++] = c;
        if (++f->total > MF_MAX_MSG + dlen)
            return -1;
        f->matched = mf_step(delim, dlen, f->matched, c);
        if (f->matched < dlen)
            continue;
        uint32_t size = f->total - (uint32_t)dlen;
        size_t head = f->head_len < size ? f->head_len : size;
        f->total = 0;
        f->head_len = 0;
        f->matched = 0;
        if (size)
            on_msg(user, f->head, head, size);
    }
    return 0;
}

#endif
