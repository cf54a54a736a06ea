/*
 * protocol.c: the pure parts of the wire and file contract, one section per section of
 * docs/PROTOCOL.md: bucket interfaces (with hash.c's FNV-1a), match rules and their escaping,
 * sequence numbering, origins, and the names of state files. The Post message itself is built and
 * parsed by the bus transport (transport/bus/bus_wire.c). Another implementation can be checked against it
 * through the CNotify_protocol_* functions (include/darwin_notify.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include "base.h"

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

/* `head` and then, when it fits, ",arg0='<name>'": the receiver filters again, so a name too long
 * for a rule keeps the wider one. In a match rule a quote inside a value is written '\'' (close,
 * escaped quote, reopen). */
static void rule_with_arg0(char *buf, size_t len, int head, const char *name) {
    if (head < 0 || (size_t)head >= len) return;
    size_t escaped = 0;
    for (const char *p = name; *p; p++) escaped += *p == '\'' ? 4 : 1;
    size_t total = (size_t)head + strlen(",arg0=''") + escaped;
    if (total >= CN_RULE_MAX || total >= len) return;
    char *out = buf + head;
    out += sprintf(out, ",arg0='");
    for (const char *p = name; *p; p++) {
        if (*p == '\'') { memcpy(out, "'\\''", 4); out += 4; }
        else *out++ = *p;
    }
    *out++ = '\'';
    *out = '\0';
}

void cn_name_rule(const char *name, char *buf, size_t len) {
    char iface[CN_BUCKET_INTERFACE_LEN];
    cn_bucket_interface(name, iface);
    int head = snprintf(buf, len, "type='signal',path='" CN_PATH "',interface='%s',member='" CN_MEMBER "'", iface);
    rule_with_arg0(buf, len, head, name); /* too long: the bucket rule */
}

void cn_distributed_rule(const char *name, char *buf, size_t len) {
    int head = snprintf(buf, len, "%s", CN_DISTRIBUTED_RULE);
    if (name[0]) rule_with_arg0(buf, len, head, name); /* "": every name */
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

/* ---- PROTOCOL.md "Sequence numbers" ---- */

uint64_t cn_post_next_seq(cn_map *counts, const char *name) {
    if (counts->count > CN_MAP_BOUND) cn_map_clear(counts, NULL);
    void **count = cn_map_upsert(counts, name);
    if (!count) return 0;
    uint64_t seq = (uintptr_t)*count + 1;
    *count = (void *)(uintptr_t)seq;
    return seq;
}

/* ---- PROTOCOL.md "Origins": who posted, whatever the connection ---- */

int cn_origin_new(uint64_t *out) {
    do {
        if (getrandom(out, sizeof *out, 0) != (ssize_t)sizeof *out) return -1;
    } while (*out == 0);
    return 0;
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
