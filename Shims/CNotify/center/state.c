/*
 * state.c: state storage. notify_set_state / notify_get_state: one 64-bit value per name, shared by every process on the
 * bus (docs/DESIGN.md, "State"; the layout is docs/PROTOCOL.md, "State files"). Each value is a
 * small file in the bus's state directory D, so it outlives the process that set it and any
 * restart of the bus, and reading it is an open and a pread with no bus round trip.
 *
 * Which directories (D, D/plain or a plain.*, D/uid.N or a uid.N.*) may hold values is
 * state_dirs.c's; this file reads and writes the values in them. Nothing anyone else puts there
 * may make a set fail or a get fail: a file that cannot be believed or opened reads as 0, and a
 * writer that may not write a file in place writes a new one under a random name and renames it
 * over. Every file is opened without following links or blocking, and trusted only if it is a
 * regular file, owned as its directory requires, holding the name it is for.
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
#include "center.h"

uint32_t CNotify_state_directory(const char *bus, char *out, size_t len) {
    cn_clear_error();
    CN_RETURN_IF_NULL(out, "output buffer");
    if (!len) { cn_set_error("output buffer has no room"); return NOTIFY_STATUS_NULL_INPUT; }
    cn_state_place place;
    char path[PATH_MAX];
    uint32_t rc = cn_transport_state_dir(bus, path, sizeof path, &place);
    if (rc != NOTIFY_STATUS_OK) return rc;
    char in_use[PATH_MAX];
    cn_state_root_in_use(path, place, in_use, sizeof in_use);
    if (strlen(in_use) >= len) {
        cn_set_error("the state directory's path (%zu bytes) does not fit the buffer (%zu)", strlen(in_use), len);
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    snprintf(out, len, "%s", in_use);
    return NOTIFY_STATUS_OK;
}

/* The center's D and plain directory, resolved, made and checked on first use (every get and
 * set needs them, and the answer holds while the center lives), or again after `forget`
 * (a write into a plain directory that someone changed since failed). */
static uint32_t cached_dirs(CNotify_center *c, char *root, size_t rlen, char *plain, size_t plen, int forget) {
    cn_mutex_lock(&c->state.lock);
    if (forget) { free(c->state.plain); c->state.plain = NULL; }
    int cached = c->state.dir && c->state.plain;
    if (cached) {
        snprintf(root, rlen, "%s", c->state.dir);
        snprintf(plain, plen, "%s", c->state.plain);
    }
    cn_mutex_unlock(&c->state.lock);
    if (cached) return NOTIFY_STATUS_OK;
    /* Resolved with no lock held (it makes and checks directories); two threads may both do it,
     * and they find the same answer. */
    char path[PATH_MAX], dir[PATH_MAX], found[PATH_MAX];
    cn_state_place place;
    int shared = 0;
    uint32_t rc = cn_transport_state_dir(c->bus_spec, path, sizeof path, &place);
    if (rc == NOTIFY_STATUS_OK) rc = cn_state_root(path, place, dir, sizeof dir, &shared);
    if (rc == NOTIFY_STATUS_OK) rc = cn_state_plain_dir(dir, shared, found, sizeof found);
    if (rc != NOTIFY_STATUS_OK) return rc;
    char *d = strdup(dir), *p = strdup(found);
    if (!d || !p) {
        free(d);
        free(p);
        cn_set_error("out of memory");
        return NOTIFY_STATUS_FAILED;
    }
    cn_mutex_lock(&c->state.lock);
    free(c->state.dir);
    free(c->state.plain);
    c->state.dir = d;
    c->state.plain = p;
    cn_mutex_unlock(&c->state.lock);
    snprintf(root, rlen, "%s", dir);
    snprintf(plain, plen, "%s", found);
    return NOTIFY_STATUS_OK;
}

/* The directory of uid N's state: a scan of D when uid.N is squatted, so the answer is kept while
 * D's mtime (which every entry made, removed or renamed in D moves) stays the same. */
static uint32_t uid_dir(CNotify_center *c, const char *root, uid_t n, int create, char *out, size_t len, int *found) {
    struct stat d;
    if (lstat(root, &d) != 0) {
        cn_set_error("cannot inspect state directory %s: %s", root, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    cn_mutex_lock(&c->state.lock);
    int cached = c->state.uid_dir[0] && c->state.uid_dir_owner == n &&
                 c->state.uid_dir_stamp.tv_sec == d.st_mtim.tv_sec && c->state.uid_dir_stamp.tv_nsec == d.st_mtim.tv_nsec;
    if (cached) snprintf(out, len, "%s", c->state.uid_dir);
    cn_mutex_unlock(&c->state.lock);
    *found = 1;
    if (cached) return NOTIFY_STATUS_OK;
    uint32_t rc = NOTIFY_STATUS_OK;
    if (create) rc = cn_state_make_uid_dir(root, n, out, len);
    else *found = cn_state_find_uid_dir(root, n, out, len);
    if (rc != NOTIFY_STATUS_OK || !*found || lstat(root, &d) != 0) return rc;
    cn_mutex_lock(&c->state.lock);
    snprintf(c->state.uid_dir, sizeof c->state.uid_dir, "%s", out);
    c->state.uid_dir_owner = n;
    c->state.uid_dir_stamp = d.st_mtim;
    cn_mutex_unlock(&c->state.lock);
    return NOTIFY_STATUS_OK;
}

/* Whose state `name` is, for a name only some may set: STATE_OF_UID with its owner (user.uid.N:
 * N; a name notify.conf reserves: the reserve's owner), kept in the owner's uid.N directory; or
 * STATE_OF_GROUP with the group a reserve lets write it, kept in gid.G (members and root write
 * there; the owner through the group too). 0 for a plain name. */
enum { STATE_OF_UID = 1, STATE_OF_GROUP = 2 };
static int state_keeper(const char *name, uid_t *owner, gid_t *group) {
    cn_guard g;
    if (cn_name_guard(name, &g) != 1) return 0;
    *owner = g.reserve.uid;
    *group = g.reserve.gid;
    int group_writes = !g.uid_name && (g.reserve.access & ((uint32_t)CNOTIFY_ACCESS_WRITE << CN_ACCESS_GROUP_SHIFT));
    return group_writes ? STATE_OF_GROUP : STATE_OF_UID;
}


/* Where the state of `name` lives: its directory (made if `create`), and the file in it named by
 * two 64-bit hashes of the name (the name itself may exceed NAME_MAX). *found is 0 when reading a
 * restricted name whose uid has no directory yet: never set. */
static uint32_t state_location(CNotify_center *c, const char *name, int create, int forget, char *dir_out, size_t dlen,
                               char *path, size_t plen, int *found) {
    char root[PATH_MAX];
    uint32_t rc = cached_dirs(c, root, sizeof root, dir_out, dlen, forget);
    if (rc != NOTIFY_STATUS_OK) return rc;
    *found = 1;
    uid_t owner;
    gid_t group;
    int keeper = state_keeper(name, &owner, &group);
    if (keeper == STATE_OF_UID) {
        rc = uid_dir(c, root, owner, create, dir_out, dlen, found);
        if (rc != NOTIFY_STATUS_OK) return rc;
    } else if (keeper == STATE_OF_GROUP) {
        if (create) rc = cn_state_make_gid_dir(root, group, dir_out, dlen);
        else *found = cn_state_find_gid_dir(root, group, dir_out, dlen);
        if (rc != NOTIFY_STATUS_OK) return rc;
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
    gid_t group;
    int keeper = state_keeper(name, &owner, &group);
    if (keeper == STATE_OF_UID) return st.st_uid == owner || st.st_uid == 0;
    /* In gid.G only G's members and root can have made it; others must not be able to write it. */
    if (keeper == STATE_OF_GROUP)
        return st.st_gid == group && !(st.st_mode & S_IWOTH) && (!for_writing || (st.st_mode & 0660) == 0660);
    return !for_writing || (st.st_mode & 0666) == 0666;
}

static void encode(unsigned char *buf, uint64_t value) {
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(value >> (8 * i));
}

/* Reads the value of `name` from `path`: 0 if absent or not to be believed. A file we may not
 * open (someone's 0600 file planted in plain/) is not to be believed either: 0. Only a failure
 * of this process (no descriptors, no memory, an I/O error) is an error. */
static uint32_t read_value(const char *path, const char *name, uint64_t *out) {
    *out = 0; /* never set: 0, as on macOS */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ELOOP || errno == ENXIO || errno == EISDIR || errno == EACCES ||
            errno == EPERM || errno == ENOTDIR || errno == ETXTBSY)
            return NOTIFY_STATUS_OK;
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

/* Writes a fresh file for `name` and renames it over `path`: the way past a file we may not
 * write in place (another's, a wrong mode, not a regular file). Allowed in plain/ (not sticky)
 * and in a uid directory that is ours or when we are root. */
static uint32_t replace_file(const char *dir, const char *path, const char *name, uint64_t value, mode_t mode, uid_t chown_to) {
    char temp[PATH_MAX];
    int fd = cn_state_temp_file(dir, temp, sizeof temp); /* a random name: a predictable one can be squatted */
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
    if (ok && lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) cn_state_move_aside(dir, path); /* rename cannot replace a directory */
    if (!ok || rename(temp, path) != 0) {
        if (ok) e = errno;
        unlink(temp);
        cn_set_error("cannot write state of %s (%s): %s", name, path, strerror(e));
        return e == EACCES || e == EPERM ? NOTIFY_STATUS_NOT_AUTHORIZED : NOTIFY_STATUS_FAILED;
    }
    return NOTIFY_STATUS_OK;
}

static uint32_t self_state(CNotify_center *c, const char *name, uint64_t *value, int set) {
    cn_mutex_lock(&c->state.lock);
    uint32_t st = NOTIFY_STATUS_OK;
    void **slot = cn_map_upsert(&c->state.self_states, name);
    if (!slot) st = NOTIFY_STATUS_FAILED;
    else if (set) *slot = (void *)(uintptr_t)*value;
    else *value = (uint64_t)(uintptr_t)*slot;
    cn_mutex_unlock(&c->state.lock);
    if (st) cn_set_error("out of memory");
    return st;
}

uint32_t cn_state_get(CNotify_center *c, const char *name, uint64_t *out) {
    uint32_t st;
    if (cn_is_self_name(name)) return self_state(c, name, out, 0);
    *out = 0;
    uid_t owner;
    if (cn_restricted_uid(name, &owner) < 0) return NOTIFY_STATUS_OK; /* nobody can have set it */
    char dir[PATH_MAX], path[PATH_MAX + 40];
    int found;
    if ((st = state_location(c, name, 0, 0, dir, sizeof dir, path, sizeof path, &found)) != NOTIFY_STATUS_OK) return st;
    return found ? read_value(path, name, out) : NOTIFY_STATUS_OK;
}

/* Writes `value` for `name` into `path` in `dir`: in place when the file may be believed and
 * written, otherwise a new file renamed over it. */
static uint32_t write_value(const char *dir, const char *path, const char *name, uint64_t value, int restricted) {
    uid_t owner = 0;
    gid_t group = 0;
    int keeper = restricted ? state_keeper(name, &owner, &group) : 0;
    mode_t mode = keeper == STATE_OF_GROUP ? 0664 : restricted ? 0644 : 0666;
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
    uid_t chown_to = keeper == STATE_OF_UID && geteuid() != owner ? owner : (uid_t)-1;
    return replace_file(dir, path, name, value, mode, chown_to);
}

uint32_t cn_state_set(CNotify_center *c, const char *name, uint64_t value) {
    uint32_t st;
    if (cn_is_self_name(name)) return self_state(c, name, &value, 1);
    int restricted;
    if ((st = cn_may_write(name, &restricted)) != NOTIFY_STATUS_OK) return st;
    char dir[PATH_MAX], path[PATH_MAX + 40];
    int found;
    if ((st = state_location(c, name, 1, 0, dir, sizeof dir, path, sizeof path, &found)) != NOTIFY_STATUS_OK) return st;
    st = write_value(dir, path, name, value, restricted);
    if (st == NOTIFY_STATUS_OK || restricted) return st;
    /* plain/ may have changed under us since it was found (its owner took away our write
     * permission): find the usable one again, once. */
    if (state_location(c, name, 1, 1, dir, sizeof dir, path, sizeof path, &found) != NOTIFY_STATUS_OK) return st;
    return write_value(dir, path, name, value, restricted);
}

void cn_state_init(cn_state_store *s) { cn_mutex_init(&s->lock, CN_LOCK_STATE); }

void cn_state_free(cn_state_store *s) {
    cn_map_clear(&s->self_states, NULL);
    free(s->dir);
    free(s->plain);
    cn_mutex_destroy(&s->lock);
}
