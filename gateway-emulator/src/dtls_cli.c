/* dtls_cli.c - the DTLS options: credentials read and checked before the trace, and the
 * combinations refused (--proxy, --dtls-sessions alone, credentials without coaps://). */
#include <stdio.h>

#include "dtls_int.h"
#include "psk.h" /* common/psk.h */

int dtls_options(ge_t *g) {
    const char *id = g->dtls_opt.identity, *kf = g->dtls_opt.key_file;
    if (!id && !kf) {
        if (g->dtls_opt.mode_set) {
            fprintf(stderr, "gateway-emulator: --dtls-sessions without --dtls-psk-identity and "
                            "--dtls-psk-key-file, expected DTLS credentials with it\n");
            return 2;
        }
        return 0;
    }
    if (psk_credentials("gateway-emulator", id, kf, g->dtls_opt.key, &g->dtls_opt.keylen))
        return 2;
    if (g->proxy.host) {
        fprintf(stderr, "gateway-emulator: --proxy with --dtls-psk-identity, expected one of them "
                        "(DTLS through a forward proxy is not supported)\n");
        return 2;
    }
    /* before OpenSSL allocates anything: count its allocations from now on */
    dtls_alloc_count_install();
    return 0;
}

int dtls_check_scheme(const ge_t *g) {
    if (!g->dtls_opt.identity || g->scheme == 2)
        return 0;
    fprintf(stderr, "%s: no coaps:// URI in the trace, expected coaps:// URIs with "
                    "--dtls-psk-identity/--dtls-psk-key-file\n", g->trace_path);
    return 2;
}
