/* test_hooks.c: timing hooks a test's child turns on through its environment; inert otherwise. */
#include <stdlib.h>
#include "base.h"

int cn_test_late_proofs(void) {
    static int late = -1; /* read once: getenv is not safe against a setenv elsewhere, and this is hot */
    if (late < 0) {
        const char *v = getenv("DARWIN_NOTIFY_TEST_LATE_PROOFS");
        late = v && v[0] == '1' && v[1] == '\0';
    }
    return late;
}

uint64_t cn_test_connect_after(void) {
    static long after = -1; /* read once, as above */
    if (after < 0) {
        const char *v = getenv("DARWIN_NOTIFY_TEST_CONNECT_AFTER");
        long n = v && *v ? strtol(v, NULL, 10) : 0;
        after = n > 0 && n <= 10000000 ? n : 0;
    }
    return (uint64_t)after;
}

void cn_test_start_delay(void) {
    const char *ms = getenv("DARWIN_NOTIFY_TEST_START_DELAY_MS");
    if (!ms || !*ms) return;
    long v = strtol(ms, NULL, 10);
    if (v <= 0 || v > 10000) return;
    struct timespec ts = { v / 1000, (v % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}
