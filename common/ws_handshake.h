/* ws_handshake.h - the client side of the RFC 6455 opening handshake (§4.1), shared by
 * wot-fleet's connected devices and wot-rpcapp. Framing, masking, ping/pong and close are
 * wslay's (Debian libwslay-dev); this is only the HTTP Upgrade request and the check of the
 * server's answer: status 101 and Sec-WebSocket-Accept = base64(SHA-1(key + GUID)).
 * Header-only (OpenSSL's SHA1 and EVP_EncodeBlock: link libcrypto). */
#ifndef WB_COMMON_WS_HANDSHAKE_H
#define WB_COMMON_WS_HANDSHAKE_H

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WS_KEY_LEN 24          /* base64 of 16 bytes */

/* Sec-WebSocket-Key: base64 of 16 bytes from the caller's xorshift state (RFC 6455 asks for a
 * nonce, not a secret: it only proves the server speaks WebSocket). */
static inline void ws_make_key(char out[WS_KEY_LEN + 1], uint64_t *rng) {
    uint8_t raw[16];
    for (int i = 0; i < 16; i += 8) {
        uint64_t x = *rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *rng = x;
        memcpy(raw + i, &x, 8);
    }
    EVP_EncodeBlock((unsigned char *)out, raw, 16);
}

/* The Upgrade request into buf; returns its length, 0 when it does not fit. `extra` holds
 * whole header lines ("Name: value\r\n"), may be "". */
static inline size_t ws_request(char *buf, size_t cap, const char *host, const char *path,
                                const char *key, const char *extra) {
    int n = snprintf(buf, cap,
                     "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                     "Sec-WebSocket-Version: 13\r\n%s\r\n",
                     path, host, key, extra);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* Index just past "\r\n\r\n" in buf[0..len), or 0 while the head is incomplete. */
static inline size_t http_head_end(const char *buf, size_t len) {
    for (size_t i = 3; i < len; i++)
        if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
            return i + 1;
    return 0;
}

/* The HTTP status code of a response head ("HTTP/1.1 101 ..."), -1 if it is not one. */
static inline int http_status(const char *head, size_t len) {
    if (len < 12 || strncmp(head, "HTTP/1.", 7) != 0 || head[8] != ' ')
        return -1;
    int s = 0;
    for (int i = 9; i < 12; i++) {
        if (head[i] < '0' || head[i] > '9')
            return -1;
        s = s * 10 + (head[i] - '0');
    }
    return s;
}

/* The value of header `name` in a response head (case-insensitive name), copied into out
 * (NUL-terminated, trailing blanks dropped); 0 found, -1 not found or too long. */
static inline int http_header(const char *head, size_t len, const char *name, char *out,
                              size_t cap) {
    size_t nl = strlen(name);
    for (size_t i = 0; i + nl + 1 < len; i++) {
        if ((i == 0 || head[i - 1] != '\n') || strncasecmp(head + i, name, nl) != 0 ||
            head[i + nl] != ':')
            continue;
        size_t v = i + nl + 1, e;
        while (v < len && (head[v] == ' ' || head[v] == '\t'))
            v++;
        for (e = v; e < len && head[e] != '\r' && head[e] != '\n'; e++) {
        }
        /* the value without its trailing whitespace (RFC 9110 OWS) must fit, not the raw line */
        while (e > v && (head[e - 1] == ' ' || head[e - 1] == '\t'))
            e--;
        if (e - v + 1 > cap || memchr(head + v, '\0', e - v))   /* NUL: not a field value */
            return -1;
        memcpy(out, head + v, e - v);
        out[e - v] = '\0';
        return 0;
    }
    return -1;
}

/* Checks the server's answer to the Upgrade request made with `key`: 0 accepted; else -1 and
 * a short reason in why (status, missing or wrong Sec-WebSocket-Accept). */
static inline int ws_check_response(const char *head, size_t len, const char *key,
                                    const char **why) {
    int st = http_status(head, len);
    if (st != 101) {
        *why = st < 0 ? "not an HTTP response" : "status is not 101";
        return -1;
    }
    char got[64], in[WS_KEY_LEN + sizeof WS_GUID], want[32];
    if (http_header(head, len, "Sec-WebSocket-Accept", got, sizeof got)) {
        *why = "no Sec-WebSocket-Accept";
        return -1;
    }
    unsigned char sha[SHA_DIGEST_LENGTH];
    int n = snprintf(in, sizeof in, "%s%s", key, WS_GUID);
    SHA1((const unsigned char *)in, (size_t)n, sha);
    EVP_EncodeBlock((unsigned char *)want, sha, SHA_DIGEST_LENGTH);
    if (strcmp(got, want) != 0) {
        *why = "wrong Sec-WebSocket-Accept";
        return -1;
    }
    return 0;
}

#endif
