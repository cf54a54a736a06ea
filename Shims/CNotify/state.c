/*
 * notify_set_state / notify_get_state: one 64-bit value per name, shared by every process on the
 * bus (docs/DESIGN.md, "State"). Each value is a small file in the bus's state directory, so it
 * outlives the process that set it and any restart of the bus, and reading it is a pread with
 * no bus round trip. The kernel enforces who may write: `user.uid.N` files belong to N, mode
 * 0644; the others are 0666 in a sticky directory, where nobody can replace another's file.
 * `self.` names keep their state in the process.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"

int cn_restricted_uid(const char *name, uid_t *uid) {
    if (strncmp(name, "user.uid.", 9) != 0) return 0;
    /* As notifyd: the digits after the prefix (none: uid 0, root only). */
    unsigned long n = 0;
    for (const char *p = name + 9; *p >= '0' && *p <= '9'; p++) n = n * 10 + (unsigned long)(*p - '0');
    *uid = (uid_t)n;
    return 1;
}

uint32_t cn_may_write(const char *name) {
    uid_t owner;
    if (!cn_restricted_uid(name, &owner)) return NOTIFY_STATUS_OK;
    uid_t me = geteuid();
    if (me == owner || me == 0) return NOTIFY_STATUS_OK;
    cn_set_error("only uid %u or root may post or set the state of %s (this process is uid %u)",
                 (unsigned)owner, name, (unsigned)me);
    return NOTIFY_STATUS_NOT_AUTHORIZED;
}

/* A directory others may share is safe only if root or we own it, and, if anyone may write in
 * it, it is sticky (nobody removes or replaces another's files). */
static uint32_t check_state_dir(const char *dir) {
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
    return NOTIFY_STATUS_OK;
}

static uint32_t make_dir(const char *dir, mode_t mode) {
    if (mkdir(dir, mode) == 0) {
        if (chmod(dir, mode) != 0) { /* the umask must not narrow a shared directory */
            cn_set_error("cannot chmod state directory %s: %s", dir, strerror(errno));
            return NOTIFY_STATUS_FAILED;
        }
    } else if (errno != EEXIST) {
        cn_set_error("cannot create state directory %s: %s", dir, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    return check_state_dir(dir);
}

static uint64_t fnv1a64(const char *s, uint64_t h) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The directory of the center's bus: DARWIN_NOTIFY_STATE_DIR; the embedded bus's runtime
 * directory; /run/darwin-notify/state (installed with the policy) or a sticky /tmp directory for
 * the system bus; a sticky /tmp directory named after any other address. */
static uint32_t state_dir(CNotify_center *c, char *out, size_t len) {
    const char *env = getenv("DARWIN_NOTIFY_STATE_DIR");
    if (env && env[0] == '/') {
        snprintf(out, len, "%s", env);
        return make_dir(out, 0700);
    }
    cn_bus_kind kind;
    char *address = NULL;
    uint32_t st = cn_resolve_bus(c->bus_spec, &kind, &address);
    if (st != NOTIFY_STATUS_OK) return st;
    if (kind == CN_BUS_EMBEDDED) {
        char runtime[PATH_MAX];
        if ((st = cn_embedded_runtime_dir(runtime, sizeof runtime)) != NOTIFY_STATUS_OK) return st;
        snprintf(out, len, "%s/state", runtime);
        return make_dir(out, 0700);
    }
    const char *system = getenv("DBUS_SYSTEM_BUS_ADDRESS");
    if (!system || !system[0]) system = "unix:path=/run/dbus/system_bus_socket";
    int is_system = strcmp(address, system) == 0;
    if (is_system && access("/run/darwin-notify/state", F_OK) == 0) {
        snprintf(out, len, "/run/darwin-notify/state");
        free(address);
        return check_state_dir(out);
    }
    if (is_system) snprintf(out, len, "/tmp/darwin-notify-state-system");
    else snprintf(out, len, "/tmp/darwin-notify-state-%016llx", (unsigned long long)fnv1a64(address, 14695981039346656037ull));
    free(address);
    return make_dir(out, 01777);
}

/* <dir>/<two 64-bit hashes of the name>: the name itself may exceed NAME_MAX. The file holds the
 * value (8 bytes, little-endian) and then the name, which a reader checks. */
/* The center's state directory, resolved, created and checked on first use only: every get
 * and set needs it, and the answer does not change while the center lives. */
static uint32_t cached_state_dir(CNotify_center *c, char *out, size_t len) {
    pthread_mutex_lock(&c->local_lock);
    uint32_t st = NOTIFY_STATUS_OK;
    if (!c->state_dir) {
        char dir[PATH_MAX];
        st = state_dir(c, dir, sizeof dir);
        if (st == NOTIFY_STATUS_OK && !(c->state_dir = strdup(dir))) {
            cn_set_error("out of memory");
            st = NOTIFY_STATUS_FAILED;
        }
    }
    if (st == NOTIFY_STATUS_OK) snprintf(out, len, "%s", c->state_dir);
    pthread_mutex_unlock(&c->local_lock);
    return st;
}

static uint32_t state_path(CNotify_center *c, const char *name, char *out, size_t len) {
    char dir[PATH_MAX];
    uint32_t st = cached_state_dir(c, dir, sizeof dir);
    if (st != NOTIFY_STATUS_OK) return st;
    uint64_t a = fnv1a64(name, 14695981039346656037ull), b = fnv1a64(name, 0x84222325cbf29ce4ull ^ 0x5bd1e995);
    snprintf(out, len, "%s/%016llx%016llx", dir, (unsigned long long)a, (unsigned long long)b);
    return NOTIFY_STATUS_OK;
}

/* A restricted name's file must belong to its uid (or root): anyone can create a file first. */
static uint32_t check_owner(int fd, const char *name, const char *path) {
    uid_t owner;
    if (!cn_restricted_uid(name, &owner)) return NOTIFY_STATUS_OK;
    struct stat st;
    if (fstat(fd, &st) != 0) { cn_set_error("fstat %s: %s", path, strerror(errno)); return NOTIFY_STATUS_FAILED; }
    if (st.st_uid != owner && st.st_uid != 0) {
        cn_set_error("state file %s of %s belongs to uid %u, not %u: ignored", path, name, (unsigned)st.st_uid, (unsigned)owner);
        return NOTIFY_STATUS_NOT_AUTHORIZED;
    }
    return NOTIFY_STATUS_OK;
}

static uint32_t self_state(CNotify_center *c, const char *name, uint64_t *value, int set) {
    pthread_mutex_lock(&c->local_lock);
    uint32_t st = NOTIFY_STATUS_OK;
    void **slot = cn_map_upsert(&c->self_states, name);
    if (!slot) st = NOTIFY_STATUS_FAILED;
    else if (set) *slot = (void *)(uintptr_t)*value;
    else *value = (uint64_t)(uintptr_t)*slot;
    pthread_mutex_unlock(&c->local_lock);
    if (st) cn_set_error("out of memory");
    return st;
}

uint32_t CNotify_center_get_state(CNotify_center *c, const char *name, uint64_t *out) {
    cn_clear_error();
    if (!c || !out) { cn_set_error("center or state pointer is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    if (cn_is_self_name(name)) return self_state(c, name, out, 0);
    char path[PATH_MAX + 40];
    if ((st = state_path(c, name, path, sizeof path)) != NOTIFY_STATUS_OK) return st;
    *out = 0; /* never set: 0, as on macOS */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return NOTIFY_STATUS_OK;
        cn_set_error("cannot read state of %s (%s): %s", name, path, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    size_t nlen = strlen(name);
    unsigned char buf[8 + CNOTIFY_NAME_MAX + 1];
    ssize_t n = pread(fd, buf, 8 + nlen + 1, 0);
    st = check_owner(fd, name, path);
    close(fd);
    if (st != NOTIFY_STATUS_OK) return st;
    if (n == (ssize_t)(8 + nlen) && memcmp(buf + 8, name, nlen) == 0) {
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--) v = (v << 8) | buf[i];
        *out = v;
    }
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_center_set_state(CNotify_center *c, const char *name, uint64_t value) {
    cn_clear_error();
    if (!c) { cn_set_error("center is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    if ((st = cn_fork_check()) != NOTIFY_STATUS_OK) return st;
    if (cn_is_self_name(name)) return self_state(c, name, &value, 1);
    if ((st = cn_may_write(name)) != NOTIFY_STATUS_OK) return st;
    char path[PATH_MAX + 40];
    if ((st = state_path(c, name, path, sizeof path)) != NOTIFY_STATUS_OK) return st;
    uid_t owner;
    int restricted = cn_restricted_uid(name, &owner);
    mode_t mode = restricted ? 0644 : 0666;
    int created = 1;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0 && errno == EEXIST) {
        created = 0;
        fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) {
        int e = errno;
        cn_set_error("cannot write state of %s (%s): %s", name, path, strerror(e));
        return e == EACCES || e == EPERM ? NOTIFY_STATUS_NOT_AUTHORIZED : NOTIFY_STATUS_FAILED;
    }
    if (created) {
        fchmod(fd, mode); /* past the umask, so other users can set a shared name */
        if (restricted && owner != geteuid() && fchown(fd, owner, (gid_t)-1) != 0) {
            cn_set_error("cannot give the state file of %s to uid %u: %s", name, (unsigned)owner, strerror(errno));
            close(fd);
            unlink(path);
            return NOTIFY_STATUS_FAILED;
        }
    } else if ((st = check_owner(fd, name, path)) != NOTIFY_STATUS_OK) {
        close(fd);
        return st;
    }
    size_t nlen = strlen(name);
    unsigned char buf[8 + CNOTIFY_NAME_MAX];
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(value >> (8 * i));
    memcpy(buf + 8, name, nlen);
    /* One pwrite of the value and the name: a reader sees the old value or the new one. */
    ssize_t n = pwrite(fd, buf, created ? 8 + nlen : 8, 0);
    int e = errno;
    close(fd);
    if (n != (ssize_t)(created ? 8 + nlen : 8)) {
        cn_set_error("cannot write state of %s (%s): %s", name, path, n < 0 ? strerror(e) : "short write");
        return NOTIFY_STATUS_FAILED;
    }
    return NOTIFY_STATUS_OK;
}
