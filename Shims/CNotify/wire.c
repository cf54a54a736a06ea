/* The wire contract's computed parts: bucket interfaces and match rules (docs/PROTOCOL.md). */
#include <stdio.h>
#include <string.h>
#include "internal.h"

uint32_t cn_fnv1a32(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) { h ^= (unsigned char)*s; h *= 16777619u; }
    return h;
}

void cn_bucket_interface(const char *name, char buf[32]) {
    /* On every post: hand-formatted, no printf. */
    static const char hex[] = "0123456789abcdef";
    uint32_t b = cn_fnv1a32(name) & CN_BUCKET_MASK;
    size_t n = sizeof CN_BUCKET_PREFIX - 1;
    memcpy(buf, CN_BUCKET_PREFIX, n);
    buf[n] = hex[(b >> 8) & 0xf];
    buf[n + 1] = hex[(b >> 4) & 0xf];
    buf[n + 2] = hex[b & 0xf];
    buf[n + 3] = '\0';
}

void cn_name_rule(const char *name, char *buf, size_t len) {
    char iface[32];
    cn_bucket_interface(name, iface);
    int head = snprintf(buf, len, "type='signal',path='" CN_PATH "',interface='%s',member='" CN_MEMBER "'", iface);
    /* In a match rule a quote inside a value is written '\'' (close, escaped quote, reopen). */
    size_t escaped = 0;
    for (const char *p = name; *p; p++) escaped += *p == '\'' ? 4 : 1;
    size_t total = (size_t)head + strlen(",arg0=''") + escaped;
    if (total >= CN_RULE_MAX || total >= len) return; /* too long: keep the bucket rule */
    char *out = buf + head;
    out += sprintf(out, ",arg0='");
    for (const char *p = name; *p; p++) {
        if (*p == '\'') { memcpy(out, "'\\''", 4); out += 4; }
        else *out++ = *p;
    }
    *out++ = '\'';
    *out = '\0';
}

void CNotify_bucket_interface(const char *name, char out[32]) {
    if (!out) return;
    if (!name) { out[0] = '\0'; return; }
    cn_bucket_interface(name, out);
}

void cn_namespace_rule(const char *ns, char *buf, size_t len) {
    snprintf(buf, len, "type='signal',path='" CN_PATH "',member='" CN_MEMBER "',arg0namespace='%s'", ns);
}

uint32_t CNotify_validate_namespace(const char *ns) {
    cn_clear_error();
    return cn_validate_namespace(ns);
}

uint32_t cn_validate_namespace(const char *ns) {
    if (!ns) { cn_set_error("namespace is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    size_t len = strlen(ns);
    int ok = len > 0 && len <= 255;
    for (size_t i = 0, start = 0; ok && i <= len; i++) {
        char ch = ns[i];
        if (ch == '.' || ch == '\0') {
            ok = i > start; /* no empty element */
            start = i + 1;
        } else if (i == start && ch >= '0' && ch <= '9') {
            ok = 0;
        } else {
            ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
        }
    }
    if (!ok) {
        cn_set_error("'%.64s' is not a namespace: dot-separated elements of letters, digits, '_' and '-', "
                     "none empty or starting with a digit, at most 255 bytes (D-Bus arg0namespace)", ns);
        return NOTIFY_STATUS_INVALID_NAME;
    }
    return NOTIFY_STATUS_OK;
}
