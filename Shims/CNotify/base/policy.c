/*
 * policy.c: this process's notify.conf(5), read from its files (notify_conf.c parses them) and
 * read again when they change, and the questions the rest of the core asks of it: which reserve
 * decides a name, may this uid post it.
 *
 * Where: $DARWIN_NOTIFY_CONF (a file, or a directory's *.conf in byte order), else
 * /etc/darwin-notify/notify.conf, then /etc/darwin-notify/notify.conf.d/ *.conf. As notifyd, a
 * file anyone but its owner may write is ignored, and so is one owned by someone other than root
 * (or, for $DARWIN_NOTIFY_CONF, this process's user: that variable only changes this process's
 * own view). Problems are said on stderr once each (notice.c); the rest applies.
 *
 * Changes: the files' identities (inode, size, times) are looked at again at most once a second,
 * and read again when they differ. The reading is done with no lock held; meanwhile others use
 * the configuration they had.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base.h"

#define CN_CONF_FILE "/etc/darwin-notify/notify.conf"
#define CN_CONF_DIR "/etc/darwin-notify/notify.conf.d"
#define CN_CONF_SIZE_MAX (1u << 20)
#define CN_CONF_RECHECK_MS 1000
#define CN_CONF_FILES_MAX 256

static cn_mutex policy_lock = CN_MUTEX_INITIALIZER(CN_LOCK_POLICY);
static cn_conf current;
static uint64_t current_sig, checked_at_ms;
static int loaded, refreshing;
/* When the files are next due to be looked at: until then a question takes no lock (0: at once). */
static _Atomic uint64_t next_look_ms;
/* Counts the times `current` changed (under policy_lock); read with none (cn_policy_generation). */
static _Atomic uint64_t generation;

/* ---- the files ---- */

typedef struct {
    char *paths[CN_CONF_FILES_MAX];
    size_t n;
    int owned_by_us; /* from $DARWIN_NOTIFY_CONF: this user's files are believed too */
} cn_conf_files;

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void add_path(cn_conf_files *f, const char *path) {
    if (f->n < CN_CONF_FILES_MAX) {
        char *copy = strdup(path);
        if (copy) f->paths[f->n++] = copy;
    }
}

/* A directory's *.conf files, in byte order (none if it is missing). */
static void add_dir(cn_conf_files *f, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    size_t first = f->n;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 6 || strcmp(e->d_name + len - 5, ".conf") != 0) continue;
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < sizeof path) add_path(f, path);
    }
    closedir(d);
    qsort(f->paths + first, f->n - first, sizeof *f->paths, by_name);
}

static void list_files(const char *where, cn_conf_files *f) {
    memset(f, 0, sizeof *f);
    const char *env = where ? where : getenv("DARWIN_NOTIFY_CONF");
    if (env && *env) {
        struct stat st;
        f->owned_by_us = 1;
        if (stat(env, &st) == 0 && S_ISDIR(st.st_mode)) add_dir(f, env);
        else add_path(f, env);
        return;
    }
    add_path(f, CN_CONF_FILE);
    add_dir(f, CN_CONF_DIR);
}

static void free_files(cn_conf_files *f) {
    for (size_t i = 0; i < f->n; i++) free(f->paths[i]);
    f->n = 0;
}

/* What identifies the files as they are now: their names and stat identities, hashed. */
static uint64_t signature(const cn_conf_files *f) {
    uint64_t h = CN_FNV64_OFFSET_BASIS;
    for (size_t i = 0; i < f->n; i++) {
        struct stat st;
        h = cn_fnv1a64(f->paths[i], h);
        if (stat(f->paths[i], &st) != 0) { h = cn_fnv1a64("-", h); continue; }
        char id[160];
        snprintf(id, sizeof id, "%llu.%llu.%lld.%lld.%ld.%lld.%ld.%o.%u", (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino, (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                 (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec, (unsigned)st.st_mode, (unsigned)st.st_uid);
        h = cn_fnv1a64(id, h);
    }
    return h;
}

/* Reads one file into `conf` if it may be believed; reports what it skips. */
static size_t read_file(cn_conf *conf, const char *path, int owned_by_us, int missing_ok, cn_conf_report_fn report,
                        void *ctx) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT && missing_ok) return 0;
        char why[256];
        snprintf(why, sizeof why, "cannot be opened: %s", errno == ELOOP ? "it is a symbolic link" : strerror(errno));
        report(ctx, path, 0, why);
        return 1;
    }
    struct stat st;
    const char *skip = NULL;
    char why[256];
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) skip = "is not a regular file: ignored";
    else if (st.st_uid != 0 && !(owned_by_us && st.st_uid == geteuid())) {
        snprintf(why, sizeof why, "is owned by uid %u, not root: ignored", (unsigned)st.st_uid);
        skip = why;
    } else if (st.st_mode & 022) skip = "may be written by group or others: ignored";
    else if ((uint64_t)st.st_size > CN_CONF_SIZE_MAX) skip = "is over 1 MiB: ignored";
    if (skip) {
        report(ctx, path, 0, skip);
        close(fd);
        return 1;
    }
    char *text = malloc((size_t)st.st_size + 1);
    size_t len = 0;
    ssize_t r = 0;
    while (text && len < (size_t)st.st_size && (r = read(fd, text + len, (size_t)st.st_size - len)) > 0) len += (size_t)r;
    close(fd);
    if (!text || r < 0) {
        free(text);
        report(ctx, path, 0, "cannot be read");
        return 1;
    }
    size_t bad = cn_conf_parse(conf, text, len, path, report, ctx);
    free(text);
    return bad;
}

static size_t read_all(cn_conf *conf, const cn_conf_files *f, int defaults, cn_conf_report_fn report, void *ctx) {
    size_t bad = 0;
    for (size_t i = 0; i < f->n; i++) bad += read_file(conf, f->paths[i], f->owned_by_us, defaults, report, ctx);
    return bad;
}

static void notice_problem(void *ctx, const char *file, unsigned line, const char *why) {
    (void)ctx;
    if (line) cn_notice("%s:%u: %s (the line is skipped)", file, line, why);
    else cn_notice("%s %s", file, why);
}

/* ---- the process's configuration ---- */

/* Reads the files again if they changed (at most once a second, unless `now`). No lock held
 * while reading. */
CN_HOT static void refresh_files(int force) {
    uint64_t now = cn_now_ms();
    if (!force && now < atomic_load_explicit(&next_look_ms, memory_order_acquire)) return;
    cn_mutex_lock(&policy_lock);
    int due = !refreshing && (!loaded || force || now - checked_at_ms >= CN_CONF_RECHECK_MS);
    if (due) refreshing = 1;
    uint64_t had = current_sig;
    int was_loaded = loaded;
    cn_mutex_unlock(&policy_lock);
    if (!due) return;
    cn_conf_files files;
    list_files(NULL, &files);
    uint64_t sig = signature(&files);
    cn_conf fresh;
    cn_conf_init(&fresh);
    int changed = !was_loaded || sig != had;
    if (changed) read_all(&fresh, &files, 1, notice_problem, NULL);
    free_files(&files);
    cn_mutex_lock(&policy_lock);
    if (changed) {
        cn_conf old = current;
        current = fresh;
        current_sig = sig;
        loaded = 1;
        fresh = old; /* freed below, with no lock held */
        atomic_fetch_add_explicit(&generation, 1, memory_order_release);
    }
    checked_at_ms = now;
    atomic_store_explicit(&next_look_ms, now + CN_CONF_RECHECK_MS, memory_order_release);
    refreshing = 0;
    cn_mutex_unlock(&policy_lock);
    cn_conf_free(&fresh);
}

static void refresh(void) { refresh_files(0); }

void CNotify_conf_reload(void) {
    cn_clear_error();
    refresh_files(1);
}

int cn_policy_reserve(const char *name, cn_conf_reserve *out) {
    refresh();
    return cn_policy_reserve_cached(name, out);
}

CN_HOT uint64_t cn_policy_generation(void) {
    refresh();
    return atomic_load_explicit(&generation, memory_order_acquire);
}

int cn_policy_reserve_cached(const char *name, cn_conf_reserve *out) {
    cn_mutex_lock(&policy_lock);
    const cn_conf_reserve *r = cn_conf_reserve_of(&current, name);
    if (r) *out = (cn_conf_reserve){ NULL, r->uid, r->gid, r->access };
    cn_mutex_unlock(&policy_lock);
    return r != NULL;
}

/* ---- the public questions ---- */

typedef struct { CNotify_conf_report report; void *context; } public_report;

static void to_public(void *ctx, const char *file, unsigned line, const char *why) {
    public_report *p = ctx;
    p->report(p->context, file, line, why);
}

uint32_t CNotify_conf_check(const char *path, CNotify_conf_report report, void *context, size_t *out_bad,
                            size_t *out_reserves, size_t *out_monitors, size_t *out_sets) {
    cn_clear_error();
    CN_RETURN_IF_NULL(report, "report");
    cn_conf_files files;
    list_files(path, &files);
    cn_conf conf;
    cn_conf_init(&conf);
    public_report p = { report, context };
    /* A path named by the caller must be there; the default places may be absent. */
    size_t bad = read_all(&conf, &files, path == NULL, to_public, &p);
    if (out_bad) *out_bad = bad;
    if (out_reserves) *out_reserves = conf.nreserves;
    if (out_monitors) *out_monitors = conf.nmonitors;
    if (out_sets) *out_sets = conf.nsets;
    cn_conf_free(&conf);
    free_files(&files);
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_name_access(const char *name, uint32_t uid, const uint32_t *gids, size_t ngids, int access) {
    cn_clear_error();
    CN_RETURN_IF_NULL(name, "name");
    if (ngids && !gids) { cn_set_error("gids is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    if (access != CNOTIFY_ACCESS_READ && access != CNOTIFY_ACCESS_WRITE) {
        cn_set_error("access is %d: CNOTIFY_ACCESS_READ or CNOTIFY_ACCESS_WRITE", access);
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    uid_t owner;
    int restricted = cn_restricted_uid(name, &owner);
    if (restricted != 0) {
        if (restricted > 0 && (uid == owner || uid == 0)) return NOTIFY_STATUS_OK;
        cn_set_error("%.200s belongs to %s", name, restricted > 0 ? "one user (user.uid.N)" : "no uid");
        return NOTIFY_STATUS_NOT_AUTHORIZED;
    }
    refresh();
    cn_mutex_lock(&policy_lock);
    const cn_conf_reserve *r = cn_conf_reserve_of(&current, name);
    int ok = cn_conf_allows(r, (uid_t)uid, (const gid_t *)gids, ngids, access);
    if (!ok)
        cn_set_error("%.200s is reserved by notify.conf (reserve %.200s %u %u %03x): uid %u may not %s it", name,
                     r->prefix, (unsigned)r->uid, (unsigned)r->gid, (unsigned)r->access, (unsigned)uid,
                     access == CNOTIFY_ACCESS_WRITE ? "post or set" : "observe");
    cn_mutex_unlock(&policy_lock);
    return ok ? NOTIFY_STATUS_OK : NOTIFY_STATUS_NOT_AUTHORIZED;
}

size_t CNotify_conf_lines(CNotify_conf_line each, void *context) {
    cn_clear_error();
    if (!each) return 0;
    refresh();
    /* Copied under the lock, handed out without it: `each` may call back into the core. */
    cn_mutex_lock(&policy_lock);
    size_t nm = current.nmonitors, ns = current.nsets, n = nm + ns;
    char **names = calloc(n ? n : 1, sizeof *names), **paths = calloc(nm ? nm : 1, sizeof *paths);
    uint64_t *values = calloc(ns ? ns : 1, sizeof *values);
    int ok = names && paths && values;
    for (size_t i = 0; ok && i < nm; i++)
        ok = (names[i] = strdup(current.monitors[i].name)) && (paths[i] = strdup(current.monitors[i].path));
    for (size_t i = 0; ok && i < ns; i++) {
        ok = (names[nm + i] = strdup(current.sets[i].name)) != NULL;
        values[i] = current.sets[i].value;
    }
    cn_mutex_unlock(&policy_lock);
    if (ok) {
        for (size_t i = 0; i < nm; i++) each(context, "monitor", names[i], paths[i], 0);
        for (size_t i = 0; i < ns; i++) each(context, "set", names[nm + i], NULL, values[i]);
    } else {
        cn_set_error("out of memory");
        n = 0;
    }
    for (size_t i = 0; names && i < nm + ns; i++) free(names[i]);
    for (size_t i = 0; paths && i < nm; i++) free(paths[i]);
    free(names);
    free(paths);
    free(values);
    return n;
}
