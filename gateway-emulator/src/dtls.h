/* dtls.h - DTLS 1.2 PSK client sessions of the GE (coaps://; see README "DTLS"): what the rest
 * of the GE sees. The coaps:// transport itself is transport_dtls (transport.h).
 *
 * The GE keeps its own sockets and its send loop. Every session is an OpenSSL SSL object whose
 * BIO writes straight to the GE's UDP socket (sendto to the session's endpoint) and reads the one
 * datagram the loop hands it, so record boundaries are datagram boundaries and nothing is
 * copied through a memory BIO. Sessions: one per (socket, endpoint) pair handshaken before the
 * start (--dtls-sessions reuse), or one per request from a pool of slots with their own source
 * ports (per-request: a handshake storm on the schedule).
 *
 * Files: dtls_cli.c (options, credentials), dtls_alloc.c (OpenSSL allocation counter),
 * dtls_ossl.c (context, BIO, callbacks), dtls_session.c (sessions, slots, records),
 * dtls_setup.c (sessions/slots before the start), dtls_prestart.c (the handshake driver),
 * dtls_out.c (handshakes.csv, summary), dtls_transport.c (the transport). */
#ifndef GE_DTLS_H
#define GE_DTLS_H

#include "ge.h"

enum { DTLS_REUSE = 0, DTLS_PER_REQUEST = 1 };

/* CLI: validate the options and read the key file; 0 ok, 2 bad input (message printed) */
int dtls_options(ge_t *g);
/* credentials given but no coaps:// URI in the trace: 2 (message printed), else 0 */
int dtls_check_scheme(const ge_t *g);

#endif
