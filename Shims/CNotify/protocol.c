/*
 * protocol.c: the wire and file contract, one section per section of docs/PROTOCOL.md: bucket
 * interfaces (with hash.c's FNV-1a), match rules and their escaping, the Post signal (build and parse), sequence
 * numbering, and the names of state files. Another implementation can be checked against it
 * through the CNotify_protocol_* functions (include/darwin_notify.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* ---- PROTOCOL.md "Bucket interfaces" ---- */

void cn_bucket_interface(const char *name, char buf[CN_BUCKET_INTERFACE_LEN]) {
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

void CNotify_bucket_interface(const char *name, char out[32]) {
    if (!out) return;
    if (!name) { out[0] = '\0'; return; }
    cn_bucket_interface(name, out);
}

/* ---- PROTOCOL.md "Match rules" ---- */

void cn_name_rule(const char *name, char *buf, size_t len) {
    char iface[CN_BUCKET_INTERFACE_LEN];
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

/* The longest prefix of `ns` (whole elements) that D-Bus's arg0namespace accepts: up to the first
 * element that starts with a digit (`user.uid.1000` -> `user.uid`). The rule then brings the
 * posts of sibling namespaces too, which the receiver drops (counted as unmatched). */
size_t cn_namespace_rule_prefix(const char *ns) {
    size_t end = strlen(ns);
    for (size_t i = 1; ns[i]; i++)
        if (ns[i - 1] == '.' && ns[i] >= '0' && ns[i] <= '9') { end = i - 1; break; }
    return end;
}

void cn_namespace_rule(const char *ns, char *buf, size_t len) {
    snprintf(buf, len, "type='signal',path='" CN_PATH "',member='" CN_MEMBER "',arg0namespace='%.*s'",
             (int)cn_namespace_rule_prefix(ns), ns);
}

uint32_t CNotify_protocol_match_rule(const char *key, int is_namespace, char *out, size_t len) {
    cn_clear_error();
    CN_RETURN_IF_NULL(key, "name");
    CN_RETURN_IF_NULL(out, "output buffer");
    uint32_t st = is_namespace ? cn_validate_namespace(key) : CNotify_validate_name(key);
    if (st != NOTIFY_STATUS_OK) return st;
    char rule[CN_RULE_MAX + 64];
    (is_namespace ? cn_namespace_rule : cn_name_rule)(key, rule, sizeof rule);
    if (strlen(rule) >= len) {
        cn_set_error("the rule is %zu bytes; the buffer holds %zu", strlen(rule), len);
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    memcpy(out, rule, strlen(rule) + 1);
    return NOTIFY_STATUS_OK;
}

/* ---- PROTOCOL.md "The Post signal" ---- */

DBusMessage *cn_post_build(const char *name, uint64_t seq, int credential_fd) {
    char iface[CN_BUCKET_INTERFACE_LEN];
    cn_bucket_interface(name, iface);
    DBusMessage *m = dbus_message_new_signal(CN_PATH, iface, CN_MEMBER);
    dbus_uint64_t wire_seq = seq;
    int ok = m && dbus_message_append_args(m, DBUS_TYPE_STRING, &name, DBUS_TYPE_UINT64, &wire_seq, DBUS_TYPE_INVALID);
    if (ok && credential_fd >= 0) ok = dbus_message_append_args(m, DBUS_TYPE_UNIX_FD, &credential_fd, DBUS_TYPE_INVALID);
    if (!ok) {
        if (m) dbus_message_unref(m);
        cn_set_error("out of memory while building the post of %s", name);
        return NULL;
    }
    return m;
}

cn_post_parse_result cn_post_parse(DBusMessage *msg, cn_post *out) {
    if (dbus_message_get_type(msg) != DBUS_MESSAGE_TYPE_SIGNAL || !dbus_message_has_member(msg, CN_MEMBER) ||
        !dbus_message_has_path(msg, CN_PATH))
        return CN_POST_NOT_OURS;
    const char *iface = dbus_message_get_interface(msg);
    if (!iface || (strcmp(iface, CN_INTERFACE) != 0 && strncmp(iface, CN_BUCKET_PREFIX, strlen(CN_BUCKET_PREFIX)) != 0))
        return CN_POST_NOT_OURS;
    DBusMessageIter it;
    if (!dbus_message_iter_init(msg, &it) || dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_STRING) return CN_POST_MALFORMED;
    *out = (cn_post){ NULL, 0, 0, -1 };
    dbus_message_iter_get_basic(&it, &out->name);
    size_t len = strlen(out->name);
    if (len == 0 || len > CNOTIFY_NAME_MAX) return CN_POST_MALFORMED;
    if (dbus_message_iter_next(&it) && dbus_message_iter_get_arg_type(&it) == DBUS_TYPE_UINT64) {
        dbus_uint64_t v;
        dbus_message_iter_get_basic(&it, &v);
        out->seq = v;
        out->has_seq = 1;
        if (dbus_message_iter_next(&it) && dbus_message_iter_get_arg_type(&it) == DBUS_TYPE_UNIX_FD)
            dbus_message_iter_get_basic(&it, &out->credential_fd); /* a duplicate that we own */
    }
    return CN_POST_OK;
}

uint32_t CNotify_protocol_build_post(const char *name, uint64_t seq, char **out_bytes, int *out_len) {
    cn_clear_error();
    CN_RETURN_IF_NULL(out_bytes, "output pointer");
    CN_RETURN_IF_NULL(out_len, "length pointer");
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    DBusMessage *m = cn_post_build(name, seq, -1);
    if (!m) return NOTIFY_STATUS_FAILED;
    dbus_message_set_serial(m, 1); /* a message is marshalled only once it has a serial */
    int ok = dbus_message_marshal(m, out_bytes, out_len);
    dbus_message_unref(m);
    if (!ok) { cn_set_error("out of memory while marshalling the post of %s", name); return NOTIFY_STATUS_FAILED; }
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_protocol_parse_post(const char *bytes, int len, char *out_name, size_t name_len, uint64_t *out_seq,
                                     int *out_has_seq) {
    cn_clear_error();
    CN_RETURN_IF_NULL(bytes, "message bytes");
    CN_RETURN_IF_NULL(out_name, "name buffer");
    CN_RETURN_IF_NULL(out_seq, "sequence pointer");
    CN_RETURN_IF_NULL(out_has_seq, "has-sequence pointer");
    DBusError err;
    dbus_error_init(&err);
    DBusMessage *m = dbus_message_demarshal(bytes, len, &err);
    if (!m) {
        cn_set_error("not a D-Bus message: %s", err.message ? err.message : "unknown error");
        dbus_error_free(&err);
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    cn_post post;
    uint32_t st = NOTIFY_STATUS_OK;
    if (cn_post_parse(m, &post) != CN_POST_OK) {
        cn_set_error("a D-Bus message, but not a Post of docs/PROTOCOL.md (member, path, interface or arguments)");
        st = NOTIFY_STATUS_INVALID_REQUEST;
    } else if (strlen(post.name) >= name_len) {
        cn_set_error("the name is %zu bytes; the buffer holds %zu", strlen(post.name), name_len);
        st = NOTIFY_STATUS_INVALID_REQUEST;
    } else {
        memcpy(out_name, post.name, strlen(post.name) + 1);
        *out_seq = post.seq;
        *out_has_seq = post.has_seq;
    }
    dbus_message_unref(m);
    return st;
}

void CNotify_protocol_free(void *bytes) { dbus_free(bytes); }

/* ---- PROTOCOL.md "Sequence numbers" ---- */

uint64_t cn_post_next_seq(cn_map *counts, const char *name) {
    if (counts->count > CN_MAP_BOUND) cn_map_clear(counts, NULL);
    void **count = cn_map_upsert(counts, name);
    if (!count) return 0;
    uint64_t seq = (uintptr_t)*count + 1;
    *count = (void *)(uintptr_t)seq;
    return seq;
}

/* ---- PROTOCOL.md "State files": the file name of a name ---- */

void CNotify_state_file_name(const char *name, char out[33]) {
    if (!out) return;
    if (!name) { out[0] = '\0'; return; }
    /* Two 64-bit hashes with different bases: a name may exceed NAME_MAX, and two names should
     * almost never share a file (the file holds the name, so a collision is detected anyway). */
    uint64_t a = cn_fnv1a64(name, CN_FNV64_OFFSET_BASIS), b = cn_fnv1a64(name, 0x84222325cbf29ce4ull ^ 0x5bd1e995);
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
}
