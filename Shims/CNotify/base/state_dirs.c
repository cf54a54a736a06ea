/*
 * state_dirs.c: which directories hold state values (docs/PROTOCOL.md, "State files"), and
 * which of them may be believed. The values themselves are state.c's.
 *
 * Every name here is predictable, and another user may have made any of them first: the shared
 * directory D in /tmp, D/plain, D/uid.N, a temporary file. Nobody's earlier creation, innocent or
 * not, may deny state to anyone, so each directory is found as "the first usable one of a list in
 * byte order" (`base`, then `base.*`), and a user who finds none usable makes `base.XXXXXX`
 * (random, O_EXCL) beside the squatted one and says so. A directory we own (or any, as root) in
 * the wrong mode is repaired with chmod, which keeps its values; nothing holding values is moved
 * aside or emptied.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base.h"

/* ---- names nobody can squat ---- */

/* `prefix` followed by 12 random characters of [A-Za-z0-9]: 71 bits, so trying the next one
 * after an EEXIST always ends (nobody can make every name). */
static void random_name(char *out, size_t len, const char *prefix) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char bytes[12];
    if (getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts); /* no entropy yet: the time and pid still vary */
        for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)((ts.tv_nsec >> (i * 3)) ^ getpid() ^ (i * 77));
    }
    char suffix[sizeof bytes + 1];
    for (size_t i = 0; i < sizeof bytes; i++) suffix[i] = alphabet[bytes[i] % (sizeof alphabet - 1)];
    suffix[sizeof bytes] = '\0';
    snprintf(out, len, "%s%s", prefix, suffix);
}

int cn_state_move_aside(const char *dir, const char *path) {
    for (int attempt = 0; attempt < 64; attempt++) {
        char prefix[PATH_MAX], stale[PATH_MAX];
        snprintf(prefix, sizeof prefix, "%s/.stale.", dir);
        random_name(stale, sizeof stale, prefix);
        if (renameat2(AT_FDCWD, path, AT_FDCWD, stale, RENAME_NOREPLACE) == 0) return 0;
        if (errno != EEXIST) return -1;
    }
    errno = EEXIST;
    return -1;
}

int cn_state_temp_file(const char *dir, char *path, size_t len) {
    for (int attempt = 0; attempt < 64; attempt++) {
        char prefix[PATH_MAX];
        snprintf(prefix, sizeof prefix, "%s/.tmp.", dir);
        random_name(path, len, prefix);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    errno = EEXIST;
    return -1;
}

/* ---- first usable of a list ---- */

/* The shared directory D of a bus: everyone writes in it and nobody removes another's entries
 * (1777). Its owner can still empty it (so a D owned by another user is used, and its owner can
 * reset the values in it, as docs/PROTOCOL.md says); a D of root or ours may also be private. */
static const char *shared_root_problem(const struct stat *st, const void *unused) {
    (void)unused;
    if (!S_ISDIR(st->st_mode)) return "not a directory (or a symbolic link)";
    mode_t mode = st->st_mode & 07777;
    if (st->st_uid == 0 || st->st_uid == geteuid()) {
        if ((mode & S_IWOTH) && !(mode & S_ISVTX)) return "writable by everyone but not sticky";
        return NULL;
    }
    if (mode != 01777) return "owned by another user and not mode 1777";
    return NULL;
}

/* plain/ in a shared D: everyone may write and replace files (0777, not sticky). */
static const char *shared_plain_problem(const struct stat *st, const void *unused) {
    (void)unused;
    if (!S_ISDIR(st->st_mode)) return "not a directory (or a symbolic link)";
    if ((st->st_mode & 07777) != 0777) return "not mode 0777";
    return NULL;
}

static uint32_t chmod_checked(const char *path, mode_t mode) {
    if (chmod(path, mode) == 0) return NOTIFY_STATUS_OK;
    cn_set_error("cannot chmod %o %s: %s", (unsigned)mode, path, strerror(errno));
    return NOTIFY_STATUS_FAILED;
}

/* Finds (or makes) the shared directory `parent`/`base` with mode `mode`: the named one if
 * usable, repaired if it is ours and only its mode is wrong, else the first usable `base`.*,
 * else a new `base`.XXXXXX. `what` names it in sentences. */
static uint32_t shared_dir(const char *parent, const char *base, mode_t mode, cn_dir_problem_fn problem,
                           const char *what, char *out, size_t len) {
    char named[PATH_MAX];
    snprintf(named, sizeof named, "%s/%s", parent, base);
    if (mkdir(named, mode) == 0) {
        uint32_t rc = chmod_checked(named, mode); /* the umask must not narrow a shared directory */
        if (rc != NOTIFY_STATUS_OK) return rc;
    }
    struct stat st;
    if (lstat(named, &st) == 0 && S_ISDIR(st.st_mode) && problem(&st, NULL) && st.st_uid == geteuid()) {
        /* Ours in the wrong mode: chmod keeps every value it holds. Not another's, even as root:
         * its owner could change it back, and everyone must agree on one directory. */
        if (chmod(named, mode) == 0 && lstat(named, &st) == 0 && !problem(&st, NULL)) {
            snprintf(out, len, "%s", named);
            return NOTIFY_STATUS_OK;
        }
    }
    if (cn_first_usable_dir(parent, base, problem, NULL, out, len)) return NOTIFY_STATUS_OK;
    /* Taken by someone else in a way we may not repair: our own beside it. */
    if (cn_make_usable_dir_beside(parent, base, mode, problem, NULL, out, len) != 0) {
        cn_set_error("cannot make %s beside %s: %s", what, named, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    const char *why = lstat(named, &st) == 0 ? problem(&st, NULL) : "missing";
    cn_notice("%s is unusable (%s, owned by uid %u): using %s instead", named, why ? why : "changed",
              (unsigned)st.st_uid, out);
    return NOTIFY_STATUS_OK;
}

/* ---- D ---- */

uint32_t cn_state_root_in_use(const char *path, cn_state_place place, char *out, size_t len) {
    snprintf(out, len, "%s", path);
    if (place != CN_STATE_PREDICTABLE) return NOTIFY_STATUS_OK;
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (!slash || slash == parent) return NOTIFY_STATUS_OK;
    *slash = '\0';
    if (!cn_first_usable_dir(parent, slash + 1, shared_root_problem, NULL, out, len)) snprintf(out, len, "%s", path);
    return NOTIFY_STATUS_OK;
}

static uint32_t refuse_root(const char *dir, const struct stat *st, const char *why) {
    if (strcmp(why, "writable by everyone but not sticky") == 0)
        cn_set_error("refusing state directory %s: writable by everyone but not sticky; fix it with: chmod +t %s", dir, dir);
    else
        cn_set_error("refusing state directory %s: %s (uid %u, mode %o); its owner or root fixes it with: chmod 1777 %s "
                     "(shared) or chmod 700 %s (private), or choose another with DARWIN_NOTIFY_STATE_DIR",
                     dir, why, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777), dir, dir);
    return NOTIFY_STATUS_FAILED;
}

uint32_t cn_state_root(const char *path, cn_state_place place, char *out, size_t len, int *shared) {
    struct stat st;
    if (place == CN_STATE_PREDICTABLE) { /* /tmp/darwin-notify-state-…: anyone could have made it */
        char parent[PATH_MAX];
        snprintf(parent, sizeof parent, "%s", path);
        char *slash = strrchr(parent, '/');
        if (!slash || slash == parent) { cn_set_error("bad state directory path %s", path); return NOTIFY_STATUS_FAILED; }
        *slash = '\0';
        uint32_t rc = shared_dir(parent, slash + 1, 01777, shared_root_problem, "a state directory", out, len);
        if (rc != NOTIFY_STATUS_OK) return rc;
    } else {
        if (place == CN_STATE_PRIVATE && mkdir(path, 0700) != 0 && errno != EEXIST) {
            cn_set_error("cannot create state directory %s: %s", path, strerror(errno));
            return NOTIFY_STATUS_FAILED;
        }
        snprintf(out, len, "%s", path);
    }
    if (lstat(out, &st) != 0) {
        cn_set_error("cannot inspect state directory %s: %s", out, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    const char *why = shared_root_problem(&st, NULL);
    if (why) return refuse_root(out, &st, why);
    *shared = (st.st_mode & S_IWOTH) != 0;
    return NOTIFY_STATUS_OK;
}

/* ---- D/plain ---- */

uint32_t cn_state_plain_dir(const char *root, int shared, char *out, size_t len) {
    if (shared) return shared_dir(root, "plain", 0777, shared_plain_problem, "a plain/ directory", out, len);
    /* A private D (0700): nobody but us and root reaches plain/, so any mode of ours is safe and
     * its values are kept; u+rwx is added if missing. */
    snprintf(out, len, "%s/plain", root);
    if (mkdir(out, 0700) != 0 && errno != EEXIST) {
        cn_set_error("cannot create %s: %s", out, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    struct stat st;
    if (lstat(out, &st) != 0) {
        cn_set_error("cannot inspect %s: %s", out, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    if (!S_ISDIR(st.st_mode)) {
        cn_set_error("%s is not a directory (or is a symbolic link); the values it should hold are not there: "
                     "move it away (mv %s %s.bad) and the next set makes it", out, out, out);
        return NOTIFY_STATUS_FAILED;
    }
    if (st.st_uid == geteuid()) {
        if ((st.st_mode & 0700) != 0700) return chmod_checked(out, (st.st_mode & 07777) | 0700);
        return NOTIFY_STATUS_OK;
    }
    if (access(out, R_OK | W_OK | X_OK) == 0) return NOTIFY_STATUS_OK;
    cn_set_error("%s is owned by uid %u (mode %o) and not writable by you (uid %u); its values are left as they are: "
                 "its owner fixes it with: chmod 0777 %s, or chown %u %s",
                 out, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid(), out,
                 (unsigned)geteuid(), out);
    return NOTIFY_STATUS_FAILED;
}

/* ---- D/uid.N and D/gid.G: one way to find or make a directory only its owners can write ---- */

/* Who a per-owner directory is for: its base name (uid.N, gid.G), what makes one usable, how a
 * fresh one is given to its owner, and the owner's words for errors ("uid 1000"). */
typedef struct {
    char base[32];
    cn_dir_problem_fn problem;
    const void *arg;
    mode_t initial;           /* mkdir's mode, before fix: never more open than the final one */
    int (*fix)(const char *made, const void *arg); /* 0 on success */
    char who[32];
} cn_owned_dir;

static int find_owned(const char *root, const cn_owned_dir *d, char *out, size_t len) {
    return cn_first_usable_dir(root, d->base, d->problem, d->arg, out, len);
}

/* The first usable one, or a new one: `base` when it is free (root first moves a wrong one
 * aside), else `base`.XXXXXX (mkdtemp: nobody can take the name in advance). */
static uint32_t make_owned(const char *root, const cn_owned_dir *d, char *out, size_t len) {
    if (find_owned(root, d, out, len)) return NOTIFY_STATUS_OK;
    char primary[PATH_MAX];
    snprintf(primary, sizeof primary, "%s/%s", root, d->base);
    struct stat st;
    if (geteuid() == 0 && lstat(primary, &st) == 0) cn_state_move_aside(root, primary); /* root may: it is taken wrongly */
    char made[PATH_MAX];
    int ok;
    if (lstat(primary, &st) != 0) { /* free: take it */
        snprintf(made, sizeof made, "%s", primary);
        ok = mkdir(made, d->initial) == 0 || errno == EEXIST;
    } else { /* someone else holds it and we may not move it: a name of our own beside it */
        snprintf(made, sizeof made, "%s/%s.XXXXXX", root, d->base);
        ok = mkdtemp(made) != NULL;
    }
    if (ok && lstat(made, &st) == 0 && st.st_uid == geteuid()) ok = d->fix(made, d->arg) == 0;
    if (!ok) {
        cn_set_error("cannot make the state directory of %s in %s: %s", d->who, root, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    /* Another process may have made one at the same moment: all agree on the first. */
    if (find_owned(root, d, out, len)) return NOTIFY_STATUS_OK;
    cn_set_error("no usable state directory for %s in %s", d->who, root);
    return NOTIFY_STATUS_FAILED;
}

/* A uid.N directory that only N and root can write in. */
static int uid_dir_usable(const struct stat *st, uid_t n) {
    return S_ISDIR(st->st_mode) && (st->st_uid == n || st->st_uid == 0) && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

static const char *uid_dir_problem(const struct stat *st, const void *uid) {
    return uid_dir_usable(st, *(const uid_t *)uid) ? NULL : "not a directory of that uid writable by it only";
}

static int uid_dir_fix(const char *made, const void *uid) {
    uid_t n = *(const uid_t *)uid;
    return chmod(made, 0755) != 0 || (geteuid() != n && chown(made, n, (gid_t)-1) != 0) ? -1 : 0;
}

static cn_owned_dir uid_dir_of(const uid_t *n) {
    cn_owned_dir d = { .problem = uid_dir_problem, .arg = n, .initial = 0755, .fix = uid_dir_fix };
    snprintf(d.base, sizeof d.base, "uid.%u", (unsigned)*n);
    snprintf(d.who, sizeof d.who, "uid %u", (unsigned)*n);
    return d;
}

int cn_state_find_uid_dir(const char *root, uid_t n, char *out, size_t len) {
    cn_owned_dir d = uid_dir_of(&n);
    return find_owned(root, &d, out, len);
}

uint32_t cn_state_make_uid_dir(const char *root, uid_t n, char *out, size_t len) {
    cn_owned_dir d = uid_dir_of(&n);
    return make_owned(root, &d, out, len);
}

/* A gid.G directory (the state of names a notify.conf reserve lets group G write): group G,
 * setgid (its files are G's), writable by the group and not by others. Only G's members (and
 * root) can give a directory group G, so only they made it, and only they can write in it. */
static int gid_dir_usable(const struct stat *st, gid_t g) {
    return S_ISDIR(st->st_mode) && st->st_gid == g && (st->st_mode & S_ISGID) && (st->st_mode & S_IWGRP) &&
           !(st->st_mode & S_IWOTH);
}

static const char *gid_dir_problem(const struct stat *st, const void *gid) {
    return gid_dir_usable(st, *(const gid_t *)gid) ? NULL : "not a setgid directory of that group writable by it only";
}

/* Group G first (a member or root may give it), then the mode: never writable by a group that
 * is not G. */
static int gid_dir_fix(const char *made, const void *gid) {
    return chown(made, (uid_t)-1, *(const gid_t *)gid) != 0 || chmod(made, 02775) != 0 ? -1 : 0;
}

static cn_owned_dir gid_dir_of(const gid_t *g) {
    cn_owned_dir d = { .problem = gid_dir_problem, .arg = g, .initial = 0700, .fix = gid_dir_fix };
    snprintf(d.base, sizeof d.base, "gid.%u", (unsigned)*g);
    snprintf(d.who, sizeof d.who, "group %u", (unsigned)*g);
    return d;
}

int cn_state_find_gid_dir(const char *root, gid_t g, char *out, size_t len) {
    cn_owned_dir d = gid_dir_of(&g);
    return find_owned(root, &d, out, len);
}

uint32_t cn_state_make_gid_dir(const char *root, gid_t g, char *out, size_t len) {
    cn_owned_dir d = gid_dir_of(&g);
    return make_owned(root, &d, out, len);
}
