/* psk.h - DTLS-PSK credentials from the command line, one rule for the GE and wot-device
 * (docs/CONTRACTS.md "DTLS"): --dtls-psk-identity (1..128 bytes) and --dtls-psk-key-file (raw
 * key bytes, ONE trailing newline ignored, 1..64 bytes) come together or not at all. */
#ifndef WOTBENCH_PSK_H
#define WOTBENCH_PSK_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define PSK_MAX_IDENTITY 128
#define PSK_MAX_KEY 64

/* 0: both given and valid (key read into key/keylen) or both absent (*keylen = 0); 2: bad
 * input, after a message on stderr that starts with `prog` and names the option. */
static inline int psk_credentials(const char *prog, const char *identity, const char *key_file,
                                  uint8_t key[PSK_MAX_KEY], size_t *keylen) {
    *keylen = 0;
    if (!identity && !key_file)
        return 0;
    if (!identity || !key_file) {
        fprintf(stderr, "%s: %s without %s, expected both DTLS-PSK options\n", prog,
                identity ? "--dtls-psk-identity" : "--dtls-psk-key-file",
                identity ? "--dtls-psk-key-file" : "--dtls-psk-identity");
        return 2;
    }
    size_t il = strlen(identity);
    if (il == 0 || il > PSK_MAX_IDENTITY) {
        fprintf(stderr, "%s: --dtls-psk-identity of %zu bytes, expected 1..%d\n", prog, il,
                PSK_MAX_IDENTITY);
        return 2;
    }
    FILE *f = fopen(key_file, "rb");
    if (!f) {
        fprintf(stderr, "%s: --dtls-psk-key-file %s: cannot read it (%s), expected a readable "
                        "file holding the pre-shared key\n", prog, key_file, strerror(errno));
        return 2;
    }
    uint8_t buf[PSK_MAX_KEY + 2];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (n && buf[n - 1] == '\n')
        n--;
    if (n == 0 || n > PSK_MAX_KEY) {
        fprintf(stderr, "%s: --dtls-psk-key-file %s: the key is %s, expected 1..%d bytes (one "
                        "trailing newline is ignored)\n", prog, key_file,
                n ? "too long" : "empty", PSK_MAX_KEY);
        return 2;
    }
    memcpy(key, buf, n);
    memset(buf, 0, sizeof buf);
    *keylen = n;
    return 0;
}

#endif
