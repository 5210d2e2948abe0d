/* netstamp.h - the device's network-side times of each request, CLOCK_MONOTONIC ns:
 *   arrival (kernel): when the request datagram entered the endpoint socket (SO_TIMESTAMPNS,
 *                     read in the recvmsg wrapper, mapped from CLOCK_REALTIME by common/clock.h)
 *   response sent:    read right before the response datagram is handed to sendmsg (wrapper)
 * libcoap owns the socket; its recvmsg/sendmsg calls pass through impair_wrap.c, which calls
 * these. I/O thread only. */
#ifndef WOT_NETSTAMP_H
#define WOT_NETSTAMP_H
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Turns on kernel receive stamps for the endpoint socket fd; 0 ok, -1 when the kernel refuses
 * (the device then logs user-space times only). */
int netstamp_enable(int fd);
/* 1 when fd is the stamped endpoint socket. */
int netstamp_is_endpoint(int fd);
/* recvmsg() on the endpoint with a control buffer of our own: keeps the kernel stamp and hands
 * the caller every other control message (libcoap's IP_PKTINFO) in its own buffer. */
ssize_t netstamp_recvmsg(int fd, struct msghdr *m, int flags);
/* Kernel arrival of the datagram libcoap read last (0 = none or not stamped). */
uint64_t netstamp_last_rx(void);
/* An impairment replay: the held datagram's emulated arrival replaces the kernel stamp. */
void netstamp_set_rx(uint64_t mono);
/* The send time of the next response datagram (code != 0.00) goes to *slot. */
void netstamp_expect_response(uint64_t *slot);
/* Called by the sendmsg wrapper right before a datagram leaves (or enters the impairments). */
void netstamp_on_send(const void *data, size_t len);
/* Drops a pending slot (after every coap_io_process: the response went out or never will). */
void netstamp_forget(void);
/* Re-measures the REALTIME->MONOTONIC offset when older than a second (I/O loop, idle side). */
void netstamp_refresh(void);

#endif
