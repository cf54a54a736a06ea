/*
 * guard.c: who may post, set or observe a name: the user.uid.N rule (names.c), then the reserve
 * of this process's notify.conf that decides it (policy.c, notify_conf.c). The one question every
 * path of a post asks (docs/DESIGN.md "Who may post a name"). Above names.c, notify_conf.c and
 * policy.c in base/: it calls them, they never call it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base.h"

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

size_t cn_self_groups(gid_t stack[CN_GROUPS_MAX], gid_t **gids) {
    *gids = stack;
    int n = getgroups(0, NULL);
    if (n < 0) n = 0;
    if ((size_t)n + 1 > CN_GROUPS_MAX && !(*gids = malloc(((size_t)n + 1) * sizeof **gids))) {
        *gids = stack;
        n = CN_GROUPS_MAX - 1;
    }
    (*gids)[0] = getegid();
    int got = n > 0 ? getgroups(n, *gids + 1) : 0; /* -1 (more groups meanwhile, or past the stack's): the gid alone */
    return got > 0 ? (size_t)got + 1 : 1;
}

/* Whether this process may write (or read) what `g` guards, by its uid and every group it is in. */
static int i_may(const cn_guard *g, int write) {
    gid_t stack[CN_GROUPS_MAX], *gids;
    size_t ngids = cn_self_groups(stack, &gids);
    int ok = write ? cn_guard_allows(g, geteuid(), gids, ngids) : cn_guard_may_read(g, geteuid(), gids, ngids);
    if (gids != stack) free(gids);
    return ok;
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
    uid_t me = geteuid();
    if (i_may(&g, 0)) return NOTIFY_STATUS_OK;
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
    if (i_may(&g, 1)) return NOTIFY_STATUS_OK;
    if (g.uid_name)
        cn_set_error("only uid %u or root may post or set the state of %s (this process is uid %u)",
                     (unsigned)g.reserve.uid, name, (unsigned)me);
    else
        cn_set_error("%s is reserved by notify.conf for uid %u and gid %u (mode %03x): this process (uid %u) may not "
                     "post or set it", name, (unsigned)g.reserve.uid, (unsigned)g.reserve.gid,
                     (unsigned)g.reserve.access, (unsigned)me);
    return NOTIFY_STATUS_NOT_AUTHORIZED;
}

