/* clock.c: monotonic milliseconds and condition-variable deadlines, the core's one notion of time. */
#include "base.h"

CN_HOT uint64_t cn_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

long cn_elapsed_ms(const struct timespec *since) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - since->tv_sec) * 1000 + (t.tv_nsec - since->tv_nsec) / 1000000;
}

struct timespec cn_deadline_in(long ms) {
    struct timespec d;
    clock_gettime(CLOCK_REALTIME, &d); /* pthread_cond_timedwait's default clock */
    d.tv_sec += ms / 1000;
    d.tv_nsec += (ms % 1000) * 1000000L;
    if (d.tv_nsec >= 1000000000L) { d.tv_sec++; d.tv_nsec -= 1000000000L; }
    return d;
}
