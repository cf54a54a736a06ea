/* Thread-local error sentences: the status codes are Apple's, the sentence says what to do. */
#include <stdarg.h>
#include <stdio.h>
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

uint32_t CNotify_validate_name(const char *name) {
    if (name == NULL) {
        cn_set_error("notification name is NULL");
        return NOTIFY_STATUS_NULL_INPUT;
    }
    size_t len = strlen(name);
    if (len == 0) {
        cn_set_error("notification name is empty");
        return NOTIFY_STATUS_INVALID_NAME;
    }
    if (len > CNOTIFY_NAME_MAX) {
        cn_set_error("notification name is %zu bytes; the limit is %d", len, CNOTIFY_NAME_MAX);
        return NOTIFY_STATUS_INVALID_NAME;
    }
    if (!dbus_validate_utf8(name, NULL)) {
        cn_set_error("notification name is not valid UTF-8");
        return NOTIFY_STATUS_INVALID_NAME;
    }
    return NOTIFY_STATUS_OK;
}
