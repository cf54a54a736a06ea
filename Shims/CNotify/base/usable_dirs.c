/*
 * usable_dirs.c: finding a directory under a name anyone could have taken first. The directory
 * meant is `parent`/`base`; when that one is unusable (someone else's, a link, a wrong mode) and
 * may not be repaired, every client takes instead the first usable `base`.* in byte order, and
 * makes `base`.XXXXXX (mkdtemp: a random name nobody can take in advance) when there is none.
 * Used for the shared state directory, its plain/ and uid.N/ (state_dirs.c) and the embedded
 * bus's runtime directory (bus_address.c); what "usable" means is the caller's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "base.h"

/* DARWIN_NOTIFY_TEST_REPORT_SCANS=1: says on stderr each time a directory is read to find a
 * squatted directory's replacement (a test counts them); inert otherwise. */
static void report_scan(const char *dir, const char *prefix) {
    const char *on = getenv("DARWIN_NOTIFY_TEST_REPORT_SCANS");
    if (on && *on == '1') fprintf(stderr, "darwin-notify-test: scanned %s for %s*\n", dir, prefix);
}

int cn_first_usable_dir(const char *parent, const char *base, cn_dir_problem_fn problem, const void *arg,
                        char *out, size_t len) {
    struct stat st;
    snprintf(out, len, "%s/%s", parent, base);
    if (lstat(out, &st) == 0 && !problem(&st, arg)) return 1;
    char prefix[NAME_MAX + 2];
    int plen = snprintf(prefix, sizeof prefix, "%s.", base);
    DIR *d = opendir(parent);
    if (!d) return 0;
    report_scan(parent, prefix);
    char best[NAME_MAX + 1] = "";
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, (size_t)plen) != 0) continue;
        if (best[0] && strcmp(e->d_name, best) >= 0) continue;
        if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !problem(&st, arg))
            snprintf(best, sizeof best, "%s", e->d_name);
    }
    closedir(d);
    if (!best[0]) return 0;
    snprintf(out, len, "%s/%s", parent, best);
    return 1;
}

int cn_make_usable_dir_beside(const char *parent, const char *base, mode_t mode, cn_dir_problem_fn problem,
                              const void *arg, char *out, size_t len) {
    char made[PATH_MAX];
    snprintf(made, sizeof made, "%s/%s.XXXXXX", parent, base);
    if (!mkdtemp(made)) return -1;
    if (chmod(made, mode) != 0) return -1; /* the umask must not narrow a shared directory */
    /* Another process may have made one at the same moment: everyone takes the first. */
    if (cn_first_usable_dir(parent, base, problem, arg, out, len)) return 0;
    errno = ENOENT;
    return -1;
}
