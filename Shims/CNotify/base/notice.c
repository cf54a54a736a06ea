/* notice.c: notices on stderr, for a call that succeeded differently from what the user may
 * assume (another directory than the predictable one was used). Not errors.c's: a notice needs
 * the hash of protocol.c, which itself sets error sentences. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include "base.h"

/* Once per sentence per process (a small table of their hashes; past it, notices are still
 * printed). */
void cn_notice(const char *fmt, ...) {
    static cn_mutex lock = CN_MUTEX_INITIALIZER(CN_LOCK_NOTICE);
    static uint64_t said[32];
    static size_t count;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    uint64_t h = cn_fnv1a64(line, CN_FNV64_OFFSET_BASIS);
    cn_mutex_lock(&lock);
    int repeated = 0;
    for (size_t i = 0; i < count; i++) repeated |= said[i] == h;
    if (!repeated && count < sizeof said / sizeof said[0]) said[count++] = h;
    cn_mutex_unlock(&lock);
    if (!repeated) fprintf(stderr, "darwin-notify: %s\n", line);
}
