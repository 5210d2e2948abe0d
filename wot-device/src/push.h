/* push.h - device-initiated requests (issue 23, docs/CONTRACTS.md §3 "Push"): the device is
 * also a CoAP client. It replays a schedule file (the harness renders every request body and
 * path before the run) from its own UDP socket, bound to the device's address:
 *   setup    one request after another once the harness creates DIR/push-go (its targets
 *            answer; e.g. an RFC 9176 registration); their outcomes go to
 *            DIR/push-setup.csv, the harness's signal;
 *   test     open loop at start + at_us, start = the CLOCK_MONOTONIC ns the harness writes
 *            into DIR/push-start (seen through inotify: no polling);
 *   teardown one after another after SIGTERM (when a setup request succeeded or there is none).
 * Every request ends in one outcome (ok|error|timeout|reset|unsent), written with kernel
 * receive stamps to DIR/push-requests.csv at exit. I/O thread only; the hot path (a due send,
 * a response) neither allocates nor does file I/O. */
#ifndef WOT_PUSH_H
#define WOT_PUSH_H
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>

/* Parses --push FILE (with --push-id, --push-timeout-ms); 0, or -1 after printing
 * "FILE:LINE: what, expected what" (exit 2). file == NULL: push disabled, returns 0. */
int push_load(const char *file, const char *id, const char *timeout_ms);
int push_enabled(void);
/* Opens the client socket on the device's host (--listen without the port) and the inotify
 * watch on log_dir; 0 / -1 (message printed, exit 1). */
int push_open(const char *listen, const char *log_dir);
/* The descriptors the I/O loop waits on (-1 when push is off). */
int push_sock_fd(void);
int push_timer_fd(void);
int push_ctl_fd(void);
/* Starts the setup phase (push_on_ctl calls it when DIR/push-go appears). */
void push_begin(void);
void push_on_sock(void);
/* A datagram the impairments held (impair.h): handled as if it arrived at `arrival`. */
void push_on_replay(const uint8_t *d, size_t len, uint64_t arrival, const void *from,
                    socklen_t fromlen);
void push_on_timer(void);
/* The watched directory changed (or the loop starts): push-go, push-start. */
void push_on_ctl(void);
/* SIGTERM/SIGINT: unsent test requests become `unsent`, teardown begins. Returns 1 while the
 * loop must keep running (teardown in flight), 0 when the device may stop. */
int push_stop(void);
int push_done(void);
/* DIR/push-requests.csv (0 / -1) and the "push" member of device-summary.json. */
int push_write(const char *dir);
void push_json(FILE *f);
void push_free(void);

#endif
