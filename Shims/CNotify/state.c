/*
 * state.c: state storage. notify_set_state / notify_get_state: one 64-bit value per name, shared by every process on the
 * bus (docs/DESIGN.md, "State"; the layout is docs/PROTOCOL.md, "State files"). Each value is a
 * small file in the bus's state directory D, so it outlives the process that set it and any
 * restart of the bus, and reading it is an open and a pread with no bus round trip.
 *
 * D may be shared by every user (sticky, 1777). Nothing in it may let one user lock another out
 * of a name it may set, however the files were made:
 *   D/plain/<hash>      plain names. plain/ is 0777 and NOT sticky, owned by D's owner or root:
 *                       anyone may set a plain name, so anyone may replace its file (temporary
 *                       file + rename), and a writer replaces a file it cannot write in place.
 *   D/uid.N/<hash>      user.uid.N names. uid.N is owned by N (or root) and writable by it only,
 *                       so only N and root can make or replace files there. A uid.N made by
 *                       anyone else is ignored: root moves it aside, N makes uid.N.XXXXXX, and
 *                       readers take the first valid of uid.N, uid.N.* (in name order).
 * Every file is opened without following links or blocking, and trusted only if it is a regular
 * file, owned as its directory requires, holding the name it is for.
 * `self.` names keep their state in the process.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"

/* A directory others may share is safe only if root or we own it, and, if anyone may write in
 * it, it is sticky (nobody removes or replaces another's files). */
static uint32_t check_state_dir(const char *dir, struct stat *out) {
    struct stat st;
    if (lstat(dir, &st) != 0) {
        cn_set_error("cannot inspect state directory %s: %s", dir, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    if (!S_ISDIR(st.st_mode)) {
        cn_set_error("refusing state directory %s: not a directory (or a symbolic link)", dir);
        return NOTIFY_STATUS_FAILED;
    }
    if (st.st_uid != 0 && st.st_uid != geteuid()) {
        cn_set_error("refusing state directory %s: owned by uid %u", dir, (unsigned)st.st_uid);
        return NOTIFY_STATUS_FAILED;
    }
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
        cn_set_error("refusing state directory %s: writable by everyone but not sticky", dir);
        return NOTIFY_STATUS_FAILED;
    }
    if (out) *out = st;
    return NOTIFY_STATUS_OK;
}

static uint32_t make_dir(const char *dir, mode_t mode, struct stat *out) {
    if (mkdir(dir, mode) == 0) {
        if (chmod(dir, mode) != 0) { /* the umask must not narrow a shared directory */
            cn_set_error("cannot chmod state directory %s: %s", dir, strerror(errno));
            return NOTIFY_STATUS_FAILED;
        }
    } else if (errno != EEXIST) {
        cn_set_error("cannot create state directory %s: %s", dir, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    return check_state_dir(dir, out);
}

/* Where the state directory of bus `spec` is (docs/PROTOCOL.md, "State files"): DARWIN_NOTIFY_STATE_DIR;
 * the embedded bus's runtime directory; /run/darwin-notify/state (installed with the policy) or a
 * sticky /tmp directory for the system bus; a sticky /tmp directory named after any other address.
 * *make_mode is 0700 (private), 01777 (shared) or 0 (installed: only checked). */
static uint32_t state_dir_path(const char *spec, char *out, size_t len, mode_t *make_mode) {
    const char *env = getenv("DARWIN_NOTIFY_STATE_DIR");
    if (env && env[0] == '/') {
        snprintf(out, len, "%s", env);
        *make_mode = 0700;
        return NOTIFY_STATUS_OK;
    }
    cn_bus_kind kind;
    char *address = NULL;
    uint32_t rc = cn_resolve_bus(spec, &kind, &address);
    if (rc != NOTIFY_STATUS_OK) return rc;
    if (kind == CN_BUS_EMBEDDED) {
        char runtime[PATH_MAX];
        if ((rc = cn_embedded_runtime_dir(runtime, sizeof runtime)) != NOTIFY_STATUS_OK) return rc;
        snprintf(out, len, "%s/state", runtime);
        *make_mode = 0700;
        return NOTIFY_STATUS_OK;
    }
    int is_system = strcmp(address, cn_system_bus_address()) == 0;
    *make_mode = 01777;
    if (is_system && access(cn_system_state_dir(), F_OK) == 0) {
        snprintf(out, len, "%s", cn_system_state_dir());
        *make_mode = 0;
    } else if (is_system) {
        snprintf(out, len, "/tmp/darwin-notify-state-system");
    } else { /* the address without guid= (cn_resolve_bus): every form of it finds the same one */
        snprintf(out, len, "/tmp/darwin-notify-state-%016llx", (unsigned long long)cn_fnv1a64(address, CN_FNV64_OFFSET_BASIS));
    }
    free(address);
    return NOTIFY_STATUS_OK;
}

static uint32_t state_dir(CNotify_center *c, char *out, size_t len, struct stat *st) {
    mode_t mode;
    uint32_t rc = state_dir_path(c->bus_spec, out, len, &mode);
    if (rc != NOTIFY_STATUS_OK) return rc;
    return mode ? make_dir(out, mode, st) : check_state_dir(out, st);
}

uint32_t CNotify_state_directory(const char *bus, char *out, size_t len) {
    cn_clear_error();
    CN_RETURN_IF_NULL(out, "output buffer");
    if (!len) { cn_set_error("output buffer has no room"); return NOTIFY_STATUS_NULL_INPUT; }
    mode_t mode;
    return state_dir_path(bus, out, len, &mode);
}

static _Atomic unsigned long stale_counter;

/* Moves an entry that must not be where it is out of the way (root, or anyone in plain/). */
static int move_aside(const char *dir, const char *path) {
    char stale[PATH_MAX];
    snprintf(stale, sizeof stale, "%s/.stale.%d.%lu", dir, (int)getpid(), atomic_fetch_add(&stale_counter, 1));
    return rename(path, stale);
}

/* plain/ in a shared D: a real directory, 0777 without the sticky bit, owned by D's owner or
 * root (whom nobody else can make change its mode). In a private D: ours, 0700. */
static int plain_dir_valid(const struct stat *st, const struct stat *d, int shared) {
    if (!S_ISDIR(st->st_mode)) return 0;
    if (shared) return (st->st_mode & 07777) == 0777 && (st->st_uid == d->st_uid || st->st_uid == 0);
    return st->st_uid == geteuid() && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* Makes sure D/plain is valid, repairing it if we own D or are root. Under state.lock. */
static uint32_t ensure_plain_dir(const char *dir, const struct stat *d) {
    int shared = (d->st_mode & S_IWOTH) != 0;
    mode_t mode = shared ? 0777 : 0700;
    int may_repair = geteuid() == 0 || geteuid() == d->st_uid;
    char plain[PATH_MAX];
    snprintf(plain, sizeof plain, "%s/plain", dir);
    struct stat st;
    if (lstat(plain, &st) == 0 && plain_dir_valid(&st, d, shared)) return NOTIFY_STATUS_OK;
    if (!may_repair) {
        cn_set_error("state directory %s has no usable plain/ (it must be a directory, mode %o, owned by uid %u or root); "
                     "its owner makes it on first use, or run: install -d -m %o %s",
                     dir, (unsigned)mode, (unsigned)d->st_uid, (unsigned)mode, plain);
        return NOTIFY_STATUS_FAILED;
    }
    if (errno != ENOENT && lstat(plain, &st) == 0 && move_aside(dir, plain) != 0) {
        cn_set_error("cannot move the unusable %s aside: %s", plain, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    if ((mkdir(plain, mode) != 0 && errno != EEXIST) || chmod(plain, mode) != 0 ||
        lstat(plain, &st) != 0 || !plain_dir_valid(&st, d, shared)) {
        cn_set_error("cannot make %s (mode %o): %s", plain, (unsigned)mode, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    return NOTIFY_STATUS_OK;
}

/* The center's state directory, resolved, created and checked on first use only: every get
 * and set needs it, and the answer does not change while the center lives. */
static uint32_t cached_state_dir(CNotify_center *c, char *out, size_t len) {
    pthread_mutex_lock(&c->state.lock);
    uint32_t rc = NOTIFY_STATUS_OK;
    if (!c->state.dir) {
        char dir[PATH_MAX];
        struct stat d;
        rc = state_dir(c, dir, sizeof dir, &d);
        if (rc == NOTIFY_STATUS_OK) rc = ensure_plain_dir(dir, &d);
        if (rc == NOTIFY_STATUS_OK && !(c->state.dir = strdup(dir))) {
            cn_set_error("out of memory");
            rc = NOTIFY_STATUS_FAILED;
        }
    }
    if (rc == NOTIFY_STATUS_OK) snprintf(out, len, "%s", c->state.dir);
    pthread_mutex_unlock(&c->state.lock);
    return rc;
}

/* A uid.N directory that only N and root can write in. */
static int uid_dir_valid(const char *path, uid_t n) {
    struct stat st;
    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_uid == n || st.st_uid == 0) &&
           !(st.st_mode & (S_IWGRP | S_IWOTH));
}

/* The first valid directory of uid N in name order: uid.N, then uid.N.* (made by N when someone
 * else had taken uid.N). 0 if there is none. */
static int find_uid_dir(const char *dir, uid_t n, char *out, size_t len) {
    snprintf(out, len, "%s/uid.%u", dir, (unsigned)n);
    if (uid_dir_valid(out, n)) return 1;
    char prefix[32];
    int plen = snprintf(prefix, sizeof prefix, "uid.%u.", (unsigned)n);
    DIR *d = opendir(dir);
    if (!d) return 0;
    char best[NAME_MAX + 1] = "";
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, (size_t)plen) != 0) continue;
        if (best[0] && strcmp(e->d_name, best) >= 0) continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (uid_dir_valid(path, n)) snprintf(best, sizeof best, "%s", e->d_name);
    }
    closedir(d);
    if (!best[0]) return 0;
    snprintf(out, len, "%s/%s", dir, best);
    return 1;
}

/* Makes a valid directory for uid N's state (we are N or root) and returns the one readers find. */
static uint32_t make_uid_dir(const char *dir, uid_t n, char *out, size_t len) {
    if (find_uid_dir(dir, n, out, len)) return NOTIFY_STATUS_OK;
    char primary[PATH_MAX];
    snprintf(primary, sizeof primary, "%s/uid.%u", dir, (unsigned)n);
    struct stat st;
    if (geteuid() == 0 && lstat(primary, &st) == 0) move_aside(dir, primary); /* root may: it is taken wrongly */
    char made[PATH_MAX];
    int ok;
    if (lstat(primary, &st) != 0) { /* free: take it */
        snprintf(made, sizeof made, "%s", primary);
        ok = mkdir(made, 0755) == 0 || errno == EEXIST;
    } else { /* someone else holds uid.N and we may not move it: a name of our own beside it */
        snprintf(made, sizeof made, "%s/uid.%u.XXXXXX", dir, (unsigned)n);
        ok = mkdtemp(made) != NULL;
    }
    if (ok && lstat(made, &st) == 0 && st.st_uid == geteuid()) {
        if (chmod(made, 0755) != 0 || (geteuid() != n && chown(made, n, (gid_t)-1) != 0)) ok = 0;
    }
    if (!ok) {
        cn_set_error("cannot make the state directory of uid %u in %s: %s", (unsigned)n, dir, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    /* Another process of N may have made one at the same moment: all agree on the first. */
    if (find_uid_dir(dir, n, out, len)) return NOTIFY_STATUS_OK;
    cn_set_error("no usable state directory for uid %u in %s", (unsigned)n, dir);
    return NOTIFY_STATUS_FAILED;
}

/* Where the state of `name` lives: its directory (made if `create`), and the file in it named by
 * two 64-bit hashes of the name (the name itself may exceed NAME_MAX). *found is 0 when reading a
 * restricted name whose uid has no directory yet: never set. */
static uint32_t state_location(CNotify_center *c, const char *name, int create, char *dir_out, size_t dlen,
                               char *path, size_t plen, int *found) {
    char dir[PATH_MAX];
    uint32_t rc = cached_state_dir(c, dir, sizeof dir);
    if (rc != NOTIFY_STATUS_OK) return rc;
    *found = 1;
    uid_t owner;
    if (cn_restricted_uid(name, &owner) == 1) {
        if (create) rc = make_uid_dir(dir, owner, dir_out, dlen);
        else *found = find_uid_dir(dir, owner, dir_out, dlen);
        if (rc != NOTIFY_STATUS_OK) return rc;
    } else {
        snprintf(dir_out, dlen, "%s/plain", dir);
    }
    char file[33];
    CNotify_state_file_name(name, file);
    snprintf(path, plen, "%s/%s", dir_out, file);
    return NOTIFY_STATUS_OK;
}

/* Whether an open state file may be believed: a regular file with one link; for a restricted
 * name, owned by its uid or root (its directory lets nobody else in, but a file is checked too).
 * For writing in place, a plain file must also stay writable by everyone: one that is not (made
 * 0644 by someone) is replaced, so it locks nobody out. */
static int file_trusted(int fd, const char *name, int for_writing) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) return 0;
    uid_t owner;
    int restricted = cn_restricted_uid(name, &owner) == 1;
    if (restricted) return st.st_uid == owner || st.st_uid == 0;
    return !for_writing || (st.st_mode & 0666) == 0666;
}

static void encode(unsigned char *buf, uint64_t value) {
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(value >> (8 * i));
}

/* Reads the value of `name` from `path`: 0 if absent or not to be believed. */
static uint32_t read_value(const char *path, const char *name, uint64_t *out) {
    *out = 0; /* never set: 0, as on macOS */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ELOOP || errno == ENXIO || errno == EISDIR) return NOTIFY_STATUS_OK;
        cn_set_error("cannot read state of %s (%s): %s", name, path, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    size_t nlen = strlen(name);
    unsigned char buf[8 + CNOTIFY_NAME_MAX + 1];
    ssize_t n = file_trusted(fd, name, 0) ? pread(fd, buf, 8 + nlen + 1, 0) : -1;
    close(fd);
    if (n == (ssize_t)(8 + nlen) && memcmp(buf + 8, name, nlen) == 0) {
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--) v = (v << 8) | buf[i];
        *out = v;
    }
    return NOTIFY_STATUS_OK;
}

static _Atomic unsigned long temp_counter;

/* Writes a fresh file for `name` and renames it over `path`: the way past a file we may not
 * write in place (another's, a wrong mode, not a regular file). Allowed in plain/ (not sticky)
 * and in a uid directory that is ours or when we are root. */
static uint32_t replace_file(const char *dir, const char *path, const char *name, uint64_t value, mode_t mode, uid_t chown_to) {
    char temp[PATH_MAX];
    snprintf(temp, sizeof temp, "%s/.tmp.%d.%lu", dir, (int)getpid(), atomic_fetch_add(&temp_counter, 1));
    int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) {
        int e = errno;
        cn_set_error("cannot write state of %s (in %s): %s", name, dir, strerror(e));
        return e == EACCES || e == EPERM ? NOTIFY_STATUS_NOT_AUTHORIZED : NOTIFY_STATUS_FAILED;
    }
    size_t nlen = strlen(name);
    unsigned char buf[8 + CNOTIFY_NAME_MAX];
    encode(buf, value);
    memcpy(buf + 8, name, nlen);
    int ok = fchmod(fd, mode) == 0 && write(fd, buf, 8 + nlen) == (ssize_t)(8 + nlen) &&
             (chown_to == (uid_t)-1 || fchown(fd, chown_to, (gid_t)-1) == 0);
    int e = errno;
    close(fd);
    struct stat st;
    if (ok && lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) move_aside(dir, path); /* rename cannot replace a directory */
    if (!ok || rename(temp, path) != 0) {
        if (ok) e = errno;
        unlink(temp);
        cn_set_error("cannot write state of %s (%s): %s", name, path, strerror(e));
        return e == EACCES || e == EPERM ? NOTIFY_STATUS_NOT_AUTHORIZED : NOTIFY_STATUS_FAILED;
    }
    return NOTIFY_STATUS_OK;
}

static uint32_t self_state(CNotify_center *c, const char *name, uint64_t *value, int set) {
    pthread_mutex_lock(&c->state.lock);
    uint32_t st = NOTIFY_STATUS_OK;
    void **slot = cn_map_upsert(&c->state.self_states, name);
    if (!slot) st = NOTIFY_STATUS_FAILED;
    else if (set) *slot = (void *)(uintptr_t)*value;
    else *value = (uint64_t)(uintptr_t)*slot;
    pthread_mutex_unlock(&c->state.lock);
    if (st) cn_set_error("out of memory");
    return st;
}

uint32_t CNotify_center_get_state(CNotify_center *c, const char *name, uint64_t *out) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    CN_RETURN_IF_NULL(out, "state pointer");
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    CN_RETURN_IF_FORKED();
    if (cn_is_self_name(name)) return self_state(c, name, out, 0);
    *out = 0;
    uid_t owner;
    if (cn_restricted_uid(name, &owner) < 0) return NOTIFY_STATUS_OK; /* nobody can have set it */
    char dir[PATH_MAX], path[PATH_MAX + 40];
    int found;
    if ((st = state_location(c, name, 0, dir, sizeof dir, path, sizeof path, &found)) != NOTIFY_STATUS_OK) return st;
    return found ? read_value(path, name, out) : NOTIFY_STATUS_OK;
}

uint32_t CNotify_center_set_state(CNotify_center *c, const char *name, uint64_t value) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    CN_RETURN_IF_FORKED();
    if (cn_is_self_name(name)) return self_state(c, name, &value, 1);
    int restricted;
    if ((st = cn_may_write(name, &restricted)) != NOTIFY_STATUS_OK) return st;
    char dir[PATH_MAX], path[PATH_MAX + 40];
    int found;
    if ((st = state_location(c, name, 1, dir, sizeof dir, path, sizeof path, &found)) != NOTIFY_STATUS_OK) return st;
    uid_t owner;
    cn_restricted_uid(name, &owner);
    mode_t mode = restricted ? 0644 : 0666;
    /* The common case: the file is there and ours to write: one pwrite of the value, which a
     * reader sees whole (old or new). */
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
        size_t nlen = strlen(name);
        unsigned char buf[8 + CNOTIFY_NAME_MAX + 1];
        int usable = file_trusted(fd, name, 1) && pread(fd, buf + 8, nlen + 1, 8) == (ssize_t)nlen &&
                     memcmp(buf + 8, name, nlen) == 0;
        if (usable) {
            encode(buf, value);
            ssize_t n = pwrite(fd, buf, 8, 0);
            int e = errno;
            close(fd);
            if (n == 8) return NOTIFY_STATUS_OK;
            cn_set_error("cannot write state of %s (%s): %s", name, path, n < 0 ? strerror(e) : "short write");
            return NOTIFY_STATUS_FAILED;
        }
        close(fd);
    }
    /* Absent, or not one we may write in place: a new file renamed over it. */
    uid_t chown_to = restricted && geteuid() != owner ? owner : (uid_t)-1;
    return replace_file(dir, path, name, value, mode, chown_to);
}

void cn_state_init(CNotify_center *c) { pthread_mutex_init(&c->state.lock, NULL); }

void cn_state_free(CNotify_center *c) {
    cn_map_clear(&c->state.self_states, NULL);
    free(c->state.dir);
    pthread_mutex_destroy(&c->state.lock);
}
