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
int cn_utf8_valid(const char *text) {
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

/* ---- who may post a name: user.uid.N, then notify.conf's reserves (policy.c) ---- */

static int name_guard(const char *name, cn_guard *g, int (*reserve_of)(const char *, cn_conf_reserve *)) {
    memset(g, 0, sizeof *g);
    uid_t owner;
    int restricted = cn_restricted_uid(name, &owner);
    if (restricted < 0) return g->kind = -1;
    if (restricted > 0) {
        g->uid_name = 1;
        g->reserve = (cn_conf_reserve){ NULL, owner, (gid_t)-1, CNOTIFY_ACCESS_READ | CNOTIFY_ACCESS_WRITE };
        return g->kind = 1;
    }
    if (!reserve_of(name, &g->reserve)) return g->kind = 0;
    g->reserved = 1;
    /* A reserve that lets others write guards nothing a post could forge. */
    return g->kind = cn_conf_needs_proof(&g->reserve) ? 1 : 0;
}

int cn_name_guard(const char *name, cn_guard *g) { return name_guard(name, g, cn_policy_reserve); }

int cn_name_guard_cached(const char *name, cn_guard *g) { return name_guard(name, g, cn_policy_reserve_cached); }

int cn_guard_allows(const cn_guard *g, uid_t uid, const gid_t *gids, size_t ngids) {
    if (g->kind == 0) return 1;
    if (g->kind < 0) return 0;
    if (g->uid_name) return uid == g->reserve.uid || uid == 0;
    return cn_conf_allows(&g->reserve, uid, gids, ngids, CNOTIFY_ACCESS_WRITE);
}

int cn_guard_may_read(const cn_guard *g, uid_t uid, const gid_t *gids, size_t ngids) {
    if (g->kind < 0) return 0;
    if (g->uid_name) return uid == g->reserve.uid || uid == 0;
    if (!g->reserved) return 1;
    return cn_conf_allows(&g->reserve, uid, gids, ngids, CNOTIFY_ACCESS_READ);
}

/* This process's uid and groups, as the kernel will stamp them on a credential or a socket. */
static size_t my_groups(gid_t *gids, size_t cap) {
    gids[0] = getegid();
    int n = getgroups((int)(cap - 1), gids + 1);
    return n > 0 ? (size_t)n + 1 : 1;
}

int CNotify_name_needs_credential(const char *name) {
    cn_clear_error();
    if (!name) return 0;
    cn_guard g;
    return cn_name_guard(name, &g);
}

uint32_t cn_may_read(const char *name) {
    cn_guard g;
    cn_name_guard(name, &g);
    if (!g.reserved) return NOTIFY_STATUS_OK; /* user.uid.N: observed by anyone, as before */
    gid_t gids[CN_GROUPS_MAX];
    size_t ngids = my_groups(gids, CN_GROUPS_MAX);
    uid_t me = geteuid();
    if (cn_guard_may_read(&g, me, gids, ngids)) return NOTIFY_STATUS_OK;
    cn_set_error("%s is reserved by notify.conf for uid %u and gid %u (mode %03x): this process (uid %u) may not "
                 "observe it", name, (unsigned)g.reserve.uid, (unsigned)g.reserve.gid, (unsigned)g.reserve.access,
                 (unsigned)me);
    return NOTIFY_STATUS_NOT_AUTHORIZED;
}

uint32_t cn_may_write(const char *name, int *out_restricted) {
    cn_guard g;
    int kind = cn_name_guard(name, &g);
    if (out_restricted) *out_restricted = kind == 1;
    if (kind == 0) return NOTIFY_STATUS_OK;
    if (kind < 0) {
        cn_set_error("%.40s... is restricted to a number that is not a uid (over %u): nobody may post or set it",
                     name, (unsigned)((uid_t)-2));
        return NOTIFY_STATUS_NOT_AUTHORIZED;
    }
    uid_t me = geteuid();
    gid_t gids[CN_GROUPS_MAX];
    size_t ngids = my_groups(gids, CN_GROUPS_MAX);
    if (cn_guard_allows(&g, me, gids, ngids)) return NOTIFY_STATUS_OK;
    if (g.uid_name)
        cn_set_error("only uid %u or root may post or set the state of %s (this process is uid %u)",
                     (unsigned)g.reserve.uid, name, (unsigned)me);
    else
        cn_set_error("%s is reserved by notify.conf for uid %u and gid %u (mode %03x): this process (uid %u) may not "
                     "post or set it", name, (unsigned)g.reserve.uid, (unsigned)g.reserve.gid,
                     (unsigned)g.reserve.access, (unsigned)me);
    return NOTIFY_STATUS_NOT_AUTHORIZED;
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
