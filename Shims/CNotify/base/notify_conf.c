/*
 * notify_conf.c: notify.conf(5), notifyd's configuration, read as Libnotify's notifyd reads it
 * (notifyd.c init_config) and judged as its libnotify.c _internal_check_access judges a request.
 *
 *   reserve PREFIX [UID [GID [MODE]]]   names starting with PREFIX belong to UID and GID; MODE,
 *                                       six characters `rwrwrw` (owner, group, others; `-` for
 *                                       none), says who may observe (r) and post or set (w)
 *   monitor NAME PATH                   the daemon posts NAME when PATH changes
 *   set NAME [VALUE]                    NAME has a state from the start (VALUE, else 0)
 *   quit                                the rest of the file is not read
 *   # ...                               a comment; blank lines are skipped
 *
 * Where notifyd silently skips a line it cannot use, this reports it (file and line) and skips
 * it; the rest of the file still applies. Parsing is pure: no file is opened here
 * (policy.c reads the files).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base.h"

#define CN_CONF_LINE_MAX 4096

void cn_conf_init(cn_conf *conf) { memset(conf, 0, sizeof *conf); }

void cn_conf_free(cn_conf *conf) {
    for (size_t i = 0; i < conf->nreserves; i++) free(conf->reserves[i].prefix);
    for (size_t i = 0; i < conf->nmonitors; i++) { free(conf->monitors[i].name); free(conf->monitors[i].path); }
    for (size_t i = 0; i < conf->nsets; i++) free(conf->sets[i].name);
    free(conf->reserves);
    free(conf->monitors);
    free(conf->sets);
    cn_conf_init(conf);
}

static int grow(void **array, size_t *cap, size_t count, size_t size) {
    if (count < *cap) return 1;
    size_t ncap = *cap ? *cap * 2 : 8;
    void *n = realloc(*array, ncap * size);
    if (!n) return 0;
    *array = n;
    *cap = ncap;
    return 1;
}

/* A decimal id below (uid_t)-1, the kernel's "no id"; Apple's atoi would take "12abc" as 12. */
static int parse_id(const char *s, uint32_t *out) {
    if (!*s) return 0;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        v = v * 10 + (uint64_t)(*p - '0');
        if (v >= (uint32_t)-1) return 0;
    }
    *out = (uint32_t)v;
    return 1;
}

static int parse_u64(const char *s, uint64_t *out) {
    if (!*s) return 0;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

/* Apple's atoaccess: six characters, r or w in their places; here anything but the letter or
 * `-` is an error (Apple would read "rwx---" as rw----). */
static int parse_mode(const char *s, uint32_t *out) {
    static const char want[] = "rwrwrw";
    static const uint32_t shift[] = { CN_ACCESS_USER_SHIFT, CN_ACCESS_USER_SHIFT, CN_ACCESS_GROUP_SHIFT,
                                      CN_ACCESS_GROUP_SHIFT, CN_ACCESS_OTHER_SHIFT, CN_ACCESS_OTHER_SHIFT };
    if (strlen(s) != 6) return 0;
    uint32_t a = 0;
    for (int i = 0; i < 6; i++) {
        if (s[i] == want[i]) a |= (uint32_t)((i % 2 == 0) ? CNOTIFY_ACCESS_READ : CNOTIFY_ACCESS_WRITE) << shift[i];
        else if (s[i] != '-') return 0;
    }
    *out = a;
    return 1;
}

/* A reserve for the same prefix replaces the earlier one (notifyd's _notify_lib_set_owner and
 * _notify_lib_set_access update the name's record). Kept in notifyd's order: descending strcmp,
 * so a longer prefix comes before any prefix of it and the deepest one decides. */
static int add_reserve(cn_conf *conf, const char *prefix, uint32_t uid, uint32_t gid, uint32_t access) {
    for (size_t i = 0; i < conf->nreserves; i++)
        if (strcmp(conf->reserves[i].prefix, prefix) == 0) {
            conf->reserves[i].uid = uid;
            conf->reserves[i].gid = gid;
            conf->reserves[i].access = access;
            return 1;
        }
    char *copy = strdup(prefix);
    if (!copy || !grow((void **)&conf->reserves, &conf->capreserves, conf->nreserves, sizeof *conf->reserves)) {
        free(copy);
        return 0;
    }
    size_t at = 0;
    while (at < conf->nreserves && strcmp(prefix, conf->reserves[at].prefix) < 0) at++;
    memmove(&conf->reserves[at + 1], &conf->reserves[at], (conf->nreserves - at) * sizeof *conf->reserves);
    conf->reserves[at] = (cn_conf_reserve){ copy, uid, gid, access };
    conf->nreserves++;
    return 1;
}

static int add_monitor(cn_conf *conf, const char *name, const char *path) {
    char *n = strdup(name), *p = strdup(path);
    if (!n || !p || !grow((void **)&conf->monitors, &conf->capmonitors, conf->nmonitors, sizeof *conf->monitors)) {
        free(n);
        free(p);
        return 0;
    }
    conf->monitors[conf->nmonitors++] = (cn_conf_monitor){ n, p };
    return 1;
}

static int add_set(cn_conf *conf, const char *name, uint64_t value) {
    for (size_t i = 0; i < conf->nsets; i++)
        if (strcmp(conf->sets[i].name, name) == 0) { conf->sets[i].value = value; return 1; }
    char *n = strdup(name);
    if (!n || !grow((void **)&conf->sets, &conf->capsets, conf->nsets, sizeof *conf->sets)) { free(n); return 0; }
    conf->sets[conf->nsets++] = (cn_conf_set){ n, value };
    return 1;
}

/* Splits `line` in place on blanks (notifyd's explode on "\t "): at most `cap` words. */
static size_t split(char *line, char **words, size_t cap) {
    size_t n = 0;
    for (char *p = line; *p;) {
        while (*p == ' ' || *p == '\t') *p++ = '\0';
        if (!*p) break;
        if (n == cap) return cap + 1; /* too many: the caller says so */
        words[n++] = p;
        while (*p && *p != ' ' && *p != '\t') p++;
    }
    return n;
}

/* One line; 1 to go on, 0 after `quit`. A problem is reported and the line skipped. */
static int parse_line(cn_conf *conf, char *line, const char *file, unsigned lineno, cn_conf_report_fn report, void *ctx,
                      size_t *bad) {
#define BAD(...)                                                                                                       \
    do {                                                                                                               \
        char why_[512];                                                                                                \
        snprintf(why_, sizeof why_, __VA_ARGS__);                                                                      \
        if (report) report(ctx, file, lineno, why_);                                                                   \
        (*bad)++;                                                                                                      \
        return 1;                                                                                                      \
    } while (0)
    char *w[6];
    size_t n = split(line, w, 5);
    if (n == 0 || w[0][0] == '#') return 1;
    if (n > 5) BAD("too many words");
    const char *kw = w[0];
    if (strcasecmp(kw, "quit") == 0) return 0;
    int reserve = strcasecmp(kw, "reserve") == 0, monitor = strcasecmp(kw, "monitor") == 0, set = strcasecmp(kw, "set") == 0;
    if (!reserve && !monitor && !set) BAD("unknown keyword '%.64s' (reserve, monitor, set or quit)", kw);
    if (n < 2) BAD("%s needs a name", kw);
    if (CNotify_validate_name(w[1]) != NOTIFY_STATUS_OK) BAD("'%.64s' is not a notification name: %s", w[1], CNotify_last_error());
    if (reserve) {
        uint32_t uid = 0, gid = 0, access = CN_ACCESS_DEFAULT;
        if (n > 2 && !parse_id(w[2], &uid)) BAD("reserve: '%.64s' is not a uid (a decimal number)", w[2]);
        if (n > 3 && !parse_id(w[3], &gid)) BAD("reserve: '%.64s' is not a gid (a decimal number)", w[3]);
        if (n > 4 && !parse_mode(w[4], &access)) BAD("reserve: '%.64s' is not a mode (six of r, w or -, as rwr-r-)", w[4]);
        if (!add_reserve(conf, w[1], uid, gid, access)) BAD("out of memory");
    } else if (monitor) {
        if (n != 3) BAD("monitor takes a name and a path");
        if (w[2][0] != '/') BAD("monitor: '%.64s' is not an absolute path", w[2]);
        if (!add_monitor(conf, w[1], w[2])) BAD("out of memory");
    } else {
        uint64_t value = 0;
        if (n > 3) BAD("set takes a name and an optional value");
        if (n == 3 && !parse_u64(w[2], &value)) BAD("set: '%.64s' is not a value (a decimal number below 2^64)", w[2]);
        if (!add_set(conf, w[1], value)) BAD("out of memory");
    }
    return 1;
#undef BAD
}

size_t cn_conf_parse(cn_conf *conf, const char *text, size_t len, const char *file, cn_conf_report_fn report, void *ctx) {
    size_t bad = 0;
    char line[CN_CONF_LINE_MAX + 1];
    unsigned lineno = 0;
    size_t i = 0;
    while (i < len) {
        lineno++;
        size_t start = i;
        while (i < len && text[i] != '\n') i++;
        size_t n = i - start;
        if (i < len) i++; /* the newline */
        if (n > CN_CONF_LINE_MAX) {
            if (report) report(ctx, file, lineno, "line longer than 4096 bytes");
            bad++;
            continue;
        }
        if (memchr(text + start, '\0', n)) {
            if (report) report(ctx, file, lineno, "a NUL byte in the line");
            bad++;
            continue;
        }
        memcpy(line, text + start, n);
        line[n] = '\0';
        if (n && line[n - 1] == '\r') line[n - 1] = '\0';
        if (!parse_line(conf, line, file, lineno, report, ctx, &bad)) break;
    }
    return bad;
}

/* The deepest reserve covering `name` (plain prefix, as notifyd: `com.apple.system.` covers
 * `com.apple.system.timezone`, and `a.b` covers `a.bc`), or NULL. */
const cn_conf_reserve *cn_conf_reserve_of(const cn_conf *conf, const char *name) {
    for (size_t i = 0; i < conf->nreserves; i++) {
        const cn_conf_reserve *r = &conf->reserves[i];
        if (strncmp(r->prefix, name, strlen(r->prefix)) == 0) return r;
    }
    return NULL;
}

int cn_conf_allows(const cn_conf_reserve *r, uid_t uid, const gid_t *gids, size_t ngids, int req) {
    if (!r || uid == 0) return 1; /* root may do anything */
    if (r->uid == uid && (r->access & ((uint32_t)req << CN_ACCESS_USER_SHIFT))) return 1;
    for (size_t i = 0; i < ngids; i++)
        if (r->gid == gids[i] && (r->access & ((uint32_t)req << CN_ACCESS_GROUP_SHIFT))) return 1;
    return (r->access & ((uint32_t)req << CN_ACCESS_OTHER_SHIFT)) != 0;
}

int cn_conf_needs_proof(const cn_conf_reserve *r) {
    return r && !(r->access & ((uint32_t)CNOTIFY_ACCESS_WRITE << CN_ACCESS_OTHER_SHIFT));
}
