/*
 * credentials.c: credentials of restricted posts: who posted a `user.uid.N` name, provable after the poster
 * has exited. A receiver that asks the bus (GetConnectionUnixUser) learns nothing once the
 * sender is gone, and a short-lived poster is usually gone (notifyutil -p exits at once).
 *
 * So the poster attaches a sealed memfd to the post (docs/PROTOCOL.md, "Credentials"):
 *   - the kernel sets the file's owner to the creating process's uid, and only root can change it;
 *   - F_SEAL_WRITE|SHRINK|GROW|SEAL make its content final before it leaves the process;
 *   - the content binds it to one post: the bus instance (its id, new after a restart), the
 *     sender's unique name (set by the bus, unforgeable while that instance lives), the name
 *     and the sequence number.
 * Anyone who receives the fd may send it again, but from another unique name: the binding no
 * longer matches. Reading it with pread consumes nothing, so one receiver cannot spoil it for
 * the next.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base.h"

#define CN_CREDENTIAL_MAGIC "darwin-notify-credential 1\n"
#define CN_CREDENTIAL_SEALS (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static int format_binding(char *buf, size_t len, const char *bus_id, const char *sender, const char *name, uint64_t seq) {
    int n = snprintf(buf, len, CN_CREDENTIAL_MAGIC "%s\n%s\n%s\n%llu\n", bus_id, sender, name, (unsigned long long)seq);
    return n > 0 && (size_t)n < len ? n : -1;
}

/* A reserve that lets its group write `name`, and this process in that group only through a
 * supplementary group: the credential is given that group (chown(2) lets an owner give a file a
 * group it is in, and no other), so that it proves the group after this process has exited. Not
 * given (a failure, out of groups): the receiver asks the bus while this process is connected. */
static void give_group(int fd, const char *name) {
    cn_guard g;
    if (cn_name_guard_cached(name, &g) != 1 || g.uid_name) return; /* cached: the caller may hold a lock */
    gid_t stack[CN_GROUPS_MAX], *gids, gid = getegid();
    uid_t me = geteuid();
    if (cn_guard_allows(&g, me, &gid, 1) || !cn_guard_allows(&g, me, &g.reserve.gid, 1)) return; /* as it is, or never */
    size_t n = cn_self_groups(stack, &gids);
    for (size_t i = 1; i < n; i++)
        if (gids[i] == g.reserve.gid) {
            if (fchown(fd, (uid_t)-1, g.reserve.gid) != 0) {} /* the bus decides instead */
            break;
        }
    if (gids != stack) free(gids);
}

int cn_credential_create(const char *bus_id, const char *sender, const char *name, uint64_t seq) {
    char buf[sizeof CN_CREDENTIAL_MAGIC + CN_BUS_ID_LEN + 256 + CNOTIFY_NAME_MAX + 32];
    int n = format_binding(buf, sizeof buf, bus_id, sender, name, seq);
    if (n < 0) { cn_set_error("credential of %s does not fit", name); return -1; }
    int fd = memfd_create("darwin-notify-credential", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) { cn_set_error("memfd_create for the credential of %s: %s", name, strerror(errno)); return -1; }
    if (write(fd, buf, (size_t)n) != n || fcntl(fd, F_ADD_SEALS, CN_CREDENTIAL_SEALS) != 0) {
        cn_set_error("cannot seal the credential of %s: %s", name, strerror(errno));
        close(fd);
        return -1;
    }
    give_group(fd, name);
    return fd;
}

int cn_credential_verify(int fd, const char *bus_id, const char *sender, const char *name, uint64_t seq, uid_t owner) {
    uid_t uid;
    gid_t gid;
    return cn_credential_identity(fd, bus_id, sender, name, seq, &uid, &gid) && (uid == owner || uid == 0);
}

/* The file's owner and group are the creator's (fsuid, fsgid), set by the kernel. Only root
 * changes the owner, and root may post anything; the owner may change the group only to a group
 * it is in (give_group), which proves that membership. */
int cn_credential_identity(int fd, const char *bus_id, const char *sender, const char *name, uint64_t seq, uid_t *uid,
                           gid_t *gid) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    *uid = st.st_uid;
    *gid = st.st_gid;
    /* Only a memfd made with MFD_ALLOW_SEALING can carry F_SEAL_WRITE: a root-owned file that
     * others may write (a 0666 state file, /dev/shm) never has it. */
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & CN_CREDENTIAL_SEALS) != CN_CREDENTIAL_SEALS) return 0;
    char want[sizeof CN_CREDENTIAL_MAGIC + CN_BUS_ID_LEN + 256 + CNOTIFY_NAME_MAX + 32];
    int n = format_binding(want, sizeof want, bus_id, sender, name, seq);
    if (n < 0 || st.st_size != n) return 0;
    char got[sizeof want];
    return pread(fd, got, (size_t)n, 0) == n && memcmp(got, want, (size_t)n) == 0;
}
