/* conn_wire_target.c - libFuzzer target: what a connected device parses of the server's bytes
 * (common/http_chunked.h, common/msg_frame.h, common/ws_handshake.h; CONTRACTS §3c). The chunk
 * data also goes through the delimiter framer (a delimiter the input's first byte picks): a
 * message it reports holds no delimiter in its head, a head of at most HC_HEAD bytes and its
 * size, and its state never passes MF_MAX_MSG. Any bytes, fed to the chunked
 * decoder in pieces whose sizes the input's first byte picks: it returns -1, 0 or 1, keeps at
 * most HC_HEAD bytes of a message and never reports a head longer than its chunk; and as an
 * HTTP response head: the head's end lies inside it, a header value comes back NUL-terminated
 * within its buffer, and the Upgrade check accepts only a 101 with the right accept key. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_chunked.h"
#include "msg_frame.h"
#include "ws_handshake.h"

static size_t msgs;
static struct mf_framer fr;
static const char *delim;
static size_t dlen;
static int fr_err;

static void on_framed(void *user, const char *head, size_t len, uint32_t size) {
    (void)user;
    if (len > HC_HEAD || len > size || size == 0 || size > MF_MAX_MSG ||
        (len >= dlen && memmem(head, len, delim, dlen)))
        abort();
}

static void on_data(void *user, const char *p, size_t n) {
    (void)user;
    if (!fr_err)
        fr_err = mf_feed(&fr, delim, dlen, p, n, on_framed, NULL);
    if (fr.total > MF_MAX_MSG + dlen || fr.head_len > HC_HEAD || fr.matched >= dlen + !dlen)
        abort();
}

static void on_msg(void *user, const char *head, size_t len, uint32_t size) {
    (void)user;
    (void)head;
    if (len > HC_HEAD || len > size)
        abort();
    msgs++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0)
        return 0;
    static const char *const delims[] = {"\n", "\r\n", "aab", "abab"};
    size_t piece = (size_t)(data[0] % 7) + 1;
    delim = delims[(data[0] >> 3) % 4];
    dlen = strlen(delim);
    memset(&fr, 0, sizeof fr);
    fr_err = 0;
    struct hc_decoder d = {0};
    int r = 0;
    for (size_t off = 1; off < size && r == 0; off += piece) {
        size_t n = size - off < piece ? size - off : piece;
        r = hc_feed_data(&d, (const char *)data + off, n, on_msg, on_data, NULL);
        if (r < -1 || r > 1 || d.head_len > HC_HEAD)
            abort();
    }
    const char *head = (const char *)data + 1;
    size_t hlen = size - 1;
    size_t end = http_head_end(head, hlen);
    if (end > hlen || (end && end < 4))
        abort();
    char val[32];
    memset(val, 'x', sizeof val);
    if (http_header(head, hlen, "Sec-WebSocket-Accept", val, sizeof val) == 0 &&
        memchr(val, '\0', sizeof val) == NULL)
        abort();
    const char *why = NULL;
    static const char key[] = "dGhlIHNhbXBsZSBub25jZQ==";   /* RFC 6455 §1.3's example */
    if (ws_check_response(head, hlen, key, &why) == 0) {
        if (http_status(head, hlen) != 101 || val[0] == 'x' ||
            strcmp(val, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") != 0)
            abort();
    } else if (!why) {
        abort();
    }
    return 0;
}
