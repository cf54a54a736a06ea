/* errors.c: thread-local error sentences: the status codes are Apple's, the sentence says what to do. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "base.h"

static _Thread_local char last_error[1024];

void cn_set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

void cn_clear_error(void) { last_error[0] = '\0'; }

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
