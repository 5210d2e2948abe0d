/* stop.c - SIGINT/SIGTERM: the first one is kept in ge_stop_signal, which the pre-start phases
 * and the loop poll. A leaf, so every phase can read it without depending on main.c. */
#include <signal.h>
#include <string.h>

#include "ge.h"

volatile sig_atomic_t ge_stop_signal = 0;

static void on_signal(int sig) {
    if (!ge_stop_signal)
        ge_stop_signal = sig;
}

void stop_on_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: sleeps and epoll waits return EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}
