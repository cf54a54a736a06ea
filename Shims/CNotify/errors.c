/* errors.c: thread-local error sentences: the status codes are Apple's, the sentence says what to do. */
#include <stdarg.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>
#include "internal.h"

static _Thread_local char last_error[1024];

void cn_set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

void cn_clear_error(void) { last_error[0] = '\0'; }

/* A notice is not an error: the call succeeded, but differently from what the user may assume
 * (another directory than the predictable one was used). It goes to stderr, once per sentence
 * per process (a small table of their hashes; past it, notices are still printed). */
void cn_notice(const char *fmt, ...) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static uint64_t said[32];
    static size_t count;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    uint64_t h = cn_fnv1a64(line, CN_FNV64_OFFSET_BASIS);
    pthread_mutex_lock(&lock);
    int repeated = 0;
    for (size_t i = 0; i < count; i++) repeated |= said[i] == h;
    if (!repeated && count < sizeof said / sizeof said[0]) said[count++] = h;
    pthread_mutex_unlock(&lock);
    if (!repeated) fprintf(stderr, "darwin-notify: %s\n", line);
}

const char *CNotify_last_error(void) { return last_error; }

const char *CNotify_status_string(uint32_t status) {
    switch (status) {
    case NOTIFY_STATUS_OK: return "OK";
    case NOTIFY_STATUS_INVALID_NAME: return "Invalid Name";
    case NOTIFY_STATUS_INVALID_TOKEN: return "Invalid Token";
    case NOTIFY_STATUS_INVALID_PORT: return "Invalid Port";
    case NOTIFY_STATUS_INVALID_FILE: return "Invalid File";
    case NOTIFY_STATUS_INVALID_SIGNAL: return "Invalid Signal";
    case NOTIFY_STATUS_INVALID_REQUEST: return "Invalid Request";
    case NOTIFY_STATUS_NOT_AUTHORIZED: return "Not Authorized";
    case NOTIFY_STATUS_OPT_DISABLE: return "Option Disabled";
    case NOTIFY_STATUS_SERVER_NOT_FOUND: return "Server Not Found";
    case NOTIFY_STATUS_NULL_INPUT: return "Null Input";
    default: return "Failed";
    }
}
