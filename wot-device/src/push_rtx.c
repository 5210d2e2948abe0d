/* push_rtx.c - the min-heap of test rows awaiting a retransmission (P.rtx_heap, keyed on the
 * row's retx_ns; push_int.h). Preallocated at load with one slot per `retransmit` row: a row
 * is in the heap at most once, so push and pop never allocate. */
#include "push_int.h"

static uint64_t key(uint32_t i) { return P.rows[i].retx_ns; }

void push_rtx_push(uint32_t row) {
    if (P.rtx_n == P.rtx_cap)
        return;                    /* cannot happen: one slot per retransmit row */
    size_t i = P.rtx_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (key(P.rtx_heap[p]) <= key(row))
            break;
        P.rtx_heap[i] = P.rtx_heap[p];
        i = p;
    }
    P.rtx_heap[i] = row;
}

int push_rtx_top(uint32_t *row) {
    if (!P.rtx_n)
        return 0;
    *row = P.rtx_heap[0];
    return 1;
}

void push_rtx_pop(void) {
    if (!P.rtx_n)
        return;
    uint32_t last = P.rtx_heap[--P.rtx_n];
    size_t i = 0, n = P.rtx_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && key(P.rtx_heap[c + 1]) < key(P.rtx_heap[c]))
            c++;
        if (key(last) <= key(P.rtx_heap[c]))
            break;
        P.rtx_heap[i] = P.rtx_heap[c];
        i = c;
    }
    if (n)
        P.rtx_heap[i] = last;
}
