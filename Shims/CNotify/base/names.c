/*
 * names.c: the names policy, apart from where states are stored. Which names are valid, which
 * never leave the process (`self.`), which only one uid may post or set (`user.uid.N`), and
 * which namespaces D-Bus can match on.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "base.h"

/* UTF-8 as D-Bus accepts it in a string (the names travel as one): well formed, shortest form, no
 * surrogate, nothing past U+10FFFF. Ours rather than libdbus's, so the names policy needs no bus. */
CN_HOT int cn_utf8_valid(const char *text) {
    const unsigned char *s = (const unsigned char *)text;
    while (*s) {
        unsigned c = *s, n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 4;
        if (n == 4) return 0;
        uint32_t cp = n == 0 ? c : c & (0x3fu >> n);
        for (unsigned i = 1; i <= n; i++) {
            if ((s[i] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i] & 0x3fu);
        }
        static const uint32_t shortest[] = { 0, 0x80, 0x800, 0x10000 };
        if (cp < shortest[n] || cp > 0x10ffff || (cp & 0xfffff800u) == 0xd800) return 0;
        s += n + 1;
    }
    return 1;
}

uint32_t CNotify_validate_name(const char *name) {
    cn_clear_error();
    if (name == NULL) { /* Libnotify's answer to a NULL name (notify_client.c), not NULL_INPUT */
        cn_set_error("notification name is NULL");
        return NOTIFY_STATUS_INVALID_NAME;
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
    if (!cn_utf8_valid(name)) {
        cn_set_error("notification name is not valid UTF-8");
        return NOTIFY_STATUS_INVALID_NAME;
    }
    return NOTIFY_STATUS_OK;
}

/* ---- `self.`: posted and observed within one process (Apple's prefix) ---- */

int cn_is_self_name(const char *name) { return name && strncmp(name, "self.", 5) == 0; }

int cn_is_self_namespace(const char *ns) { return ns && (strcmp(ns, "self") == 0 || cn_is_self_name(ns)); }

int cn_is_self_key(const char *key, int is_namespace) {
    return is_namespace ? cn_is_self_namespace(key) : cn_is_self_name(key);
}

/* ---- `user.uid.N`: only uid N or root may post or set ---- */

int cn_restricted_uid(const char *name, uid_t *uid) {
    if (strncmp(name, "user.uid.", 9) != 0) return 0;
    /* As notifyd: the digits after the prefix (none: uid 0, root only). A number that does not
     * fit a uid must not wrap onto one (user.uid.18446744073709617150 is not uid 65534). */
    uint64_t n = 0;
    for (const char *p = name + 9; *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (uint64_t)(*p - '0');
        if (n >= (uid_t)-1) return -1; /* (uid_t)-1 is "no uid" to the kernel */
    }
    *uid = (uid_t)n;
    return 1;
}

int CNotify_name_restricted_uid(const char *name, uint32_t *out_uid) {
    if (!name) return 0;
    uid_t uid = 0;
    int restricted = cn_restricted_uid(name, &uid);
    if (out_uid) *out_uid = restricted == 1 ? (uint32_t)uid : 0;
    return restricted;
}

/* ---- namespaces ----
 * Dot-separated elements of [A-Za-z0-9_-], none empty, at most 255 bytes; the first may not
 * start with a digit. D-Bus's arg0namespace is stricter (no element may start with a digit), so
 * `user.uid.1000` is observed with the rule of its longest prefix D-Bus accepts (`user.uid`),
 * and the receiver keeps only what is under the namespace (protocol.c, registry.c). */

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
        } else if (i == 0 && ch >= '0' && ch <= '9') {
            ok = 0;
        } else {
            ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
        }
    }
    if (!ok) {
        cn_set_error("'%.64s' is not a namespace: dot-separated elements of letters, digits, '_' and '-', "
                     "none empty, the first not starting with a digit, at most 255 bytes", ns);
        return NOTIFY_STATUS_INVALID_NAME;
    }
    return NOTIFY_STATUS_OK;
}
