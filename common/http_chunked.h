/* http_chunked.h - a streaming decoder of an HTTP/1.1 chunked body (RFC 9112 §7.1) that holds
 * a long-lived subscription: every chunk is one message. Only the first HC_HEAD bytes of a
 * message are kept (what reply matching needs: the id near its start), so a connection costs
 * a fixed few hundred bytes however large its messages are. Header-only. */
#ifndef WB_COMMON_HTTP_CHUNKED_H
#define WB_COMMON_HTTP_CHUNKED_H

#include <stddef.h>
#include <stdint.h>

#define HC_HEAD 96
#define HC_MAX_CHUNK (64u << 20)

enum hc_state { HC_SIZE = 0, HC_EXT, HC_SIZE_LF, HC_DATA, HC_DATA_CR, HC_DATA_LF, HC_END };

struct hc_decoder {
    uint32_t left;            /* bytes of the current chunk still to come */
    uint32_t size;            /* the current chunk's size */
    uint16_t head_len;
    uint8_t state, digits;
    char head[HC_HEAD];
};

/* Feeds buf[0..len). For every complete chunk calls on_msg(user, head, head_len, size) and,
 * when on_data is not NULL, on_data(user, p, n) for every slice of chunk data as it comes
 * (what a framer that ignores chunk boundaries reads: msg_frame.h). Returns 0, 1 after the
 * last (zero-size) chunk, -1 on a malformed body. */
static inline int hc_feed_data(struct hc_decoder *d, const char *buf, size_t len,
                               void (*on_msg)(void *, const char *, size_t, uint32_t),
                               void (*on_data)(void *, const char *, size_t), void *user) {
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        switch (d->state) {
        case HC_SIZE: {
            int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (v >= 0) {
                if (++d->digits > 8 || (d->size << 4) + (uint32_t)v > HC_MAX_CHUNK)
                    return -1;
                d->size = (d->size << 4) + (uint32_t)v;
            } else if (d->digits && (c == ';' || c == ' ' || c == '\t')) {
                d->state = HC_EXT;
            } else if (d->digits && c == '\r') {
                d->state = HC_SIZE_LF;
            } else {
                return -1;
            }
            break;
        }
        case HC_EXT:                 /* chunk extensions: ignored */
            if (c == '\r')
                d->state = HC_SIZE_LF;
            break;
        case HC_SIZE_LF:
            if (c != '\n')
                return -1;
            if (d->size == 0) {
                d->state = HC_END;
                return 1;
            }
            d->left = d->size;
            d->head_len = 0;
            d->state = HC_DATA;
            break;
        case HC_DATA: {
            size_t take = len - i < d->left ? len - i : d->left;
            for (size_t k = 0; k < take && d->head_len < HC_HEAD; k++)
                d->head[d->head_len++] = buf[i + k];
            if (on_data)
                on_data(user, buf + i, take);
            d->left -= (uint32_t)take;
            i += take - 1;
            if (d->left == 0)
                d->state = HC_DATA_CR;
            break;
        }
        case HC_DATA_CR:
            if (c != '\r')
                return -1;
            d->state = HC_DATA_LF;
            break;
        case HC_DATA_LF:
            if (c != '\n')
                return -1;
            on_msg(user, d->head, d->head_len, d->size);
            d->size = 0;
            d->digits = 0;
            d->state = HC_SIZE;
            break;
        default:
            return 1;
        }
    }
    return 0;
}

static inline int hc_feed(struct hc_decoder *d, const char *buf, size_t len,
                          void (*on_msg)(void *, const char *, size_t, uint32_t), void *user) {
    return hc_feed_data(d, buf, len, on_msg, NULL, user);
}

#endif
