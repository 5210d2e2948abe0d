/* conn_stream.c - a connected device as the study attaches it (Cometa): ONE HTTP/1.1 POST
 * held open in both directions. Its request body is chunked and never ends: the attach message
 * is its first chunk, then every heartbeat, event and reply goes up as one chunk; its response
 * (a 200 with a chunked body, read by conn_http.c's subscription code) brings every message
 * down as one chunk. With a delimiter (d->dlen) every message up ends with it and messages down
 * are cut at it, not at chunk boundaries (msg_frame.h). One connection per device (d->sub,
 * kind CK_SUB). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "conn.h"

#define HEAD_CAP 1024             /* the response head, as for the chunked subscription */

int cn_stream_send_request(struct cn_loop *l, struct cn_device *d) {
    int n = snprintf(l->tx, sizeof l->tx, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: text/plain"
                     "\r\nTransfer-Encoding: chunked\r\n%s\r\n",
                     l->set->post_method ? l->set->post_method : "POST", d->path, d->host,
                     d->attach_headers ? d->attach_headers : "");
    if (n <= 0 || (size_t)n >= sizeof l->tx)
        return -1;
    size_t len = (size_t)n;
    if (d->attach_body) {         /* the attach message: the request body's first chunk */
        int k = snprintf(l->tx + len, 16, "%x\r\n", d->attach_body_len + d->dlen);
        len += (size_t)k;
        memcpy(l->tx + len, d->attach_body, d->attach_body_len);
        len += d->attach_body_len;
        memcpy(l->tx + len, d->delim, d->dlen);
        len += d->dlen;
        memcpy(l->tx + len, "\r\n", 2);
        len += 2;
    }
    d->sub.hbuf = malloc(HEAD_CAP);
    d->sub.hlen = 0;
    d->sub.state = CS_HEAD;
    if (!d->sub.hbuf)
        return -1;
    uint32_t gen = d->gen;
    struct iovec iov[1] = {{l->tx, len}};
    if (cn_http_put(l, d, &d->sub, iov, 1) == 0)
        return 0;
    return gen == d->gen ? -1 : 0;   /* ended already: nothing more for the caller to do */
}

int cn_stream_send(struct cn_loop *l, struct cn_device *d, const char *msg, size_t len) {
    if (d->sub.state != CS_OPEN && d->sub.state != CS_HEAD)
        return -1;
    if (len == 0)
        return 0;                 /* an empty chunk would end the request body */
    char head[20];
    int hn = snprintf(head, sizeof head, "%zx\r\n", len + d->dlen);
    struct iovec iov[4] = {{head, (size_t)hn}, {(void *)msg, len}, {d->delim, d->dlen},
                           {"\r\n", 2}};
    return cn_http_put(l, d, &d->sub, iov, 4);
}
