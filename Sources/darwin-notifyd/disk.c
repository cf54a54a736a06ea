/*
 * disk.c: com.apple.system.lowdiskspace with .system (the root file system) or .user (any other)
 * (kNotifyVFSLowDiskSpace, kNotifyVFSLowDiskSpaceRootFS, kNotifyVFSLowDiskSpaceOtherFS). Every
 * interval, statvfs of each writable mounted file system that stores data (not proc, sysfs,
 * cgroup and their kind); one whose free space (blocks an unprivileged user may take) falls under
 * its threshold is posted once, and again only after it was back over the threshold plus a
 * margin. The mounts come from /proc/self/mounts at each round.
 */
#include <errno.h>
#include <limits.h>
#include <mntent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include "notifyd.h"

#define LOW_MAX 256

static nd_file disk_file;
static unsigned threshold_system, threshold_user;
static char *low[LOW_MAX]; /* mount points posted low and not back over since */
static size_t nlow;

static int is_low(const char *dir) {
    for (size_t i = 0; i < nlow; i++)
        if (strcmp(low[i], dir) == 0) return 1;
    return 0;
}

static void set_low(const char *dir, int on) {
    for (size_t i = 0; i < nlow; i++)
        if (strcmp(low[i], dir) == 0) {
            if (!on) { free(low[i]); low[i] = low[--nlow]; }
            return;
        }
    if (on && nlow < LOW_MAX && (low[nlow] = strdup(dir))) nlow++;
}

static int pseudo(const char *type) {
    static const char *const kinds[] = { "proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "debugfs", "tracefs",
                                         "securityfs", "pstore", "bpf", "configfs", "fusectl", "hugetlbfs", "autofs",
                                         "binfmt_misc", "nsfs", "devtmpfs", "efivarfs", "rpc_pipefs", "ramfs", NULL };
    for (int i = 0; kinds[i]; i++)
        if (strcmp(type, kinds[i]) == 0) return 1;
    return 0;
}

static void look(void) {
    FILE *m = setmntent("/proc/self/mounts", "r");
    if (!m) return;
    for (struct mntent *e; (e = getmntent(m));) {
        struct statvfs v;
        if (pseudo(e->mnt_type) || statvfs(e->mnt_dir, &v) != 0 || v.f_blocks == 0 || (v.f_flag & ST_RDONLY)) continue;
        int root = strcmp(e->mnt_dir, "/") == 0;
        unsigned threshold = root ? threshold_system : threshold_user;
        double percent = 100.0 * (double)v.f_bavail / (double)v.f_blocks;
        if (percent < threshold && !is_low(e->mnt_dir)) {
            set_low(e->mnt_dir, 1);
            char why[PATH_MAX + 64];
            snprintf(why, sizeof why, "%s has %.1f%% free, under %u%%", e->mnt_dir, percent, threshold);
            nd_post(root ? "com.apple.system.lowdiskspace.system" : "com.apple.system.lowdiskspace.user", why);
            nd_post("com.apple.system.lowdiskspace", why);
        } else if (percent >= threshold + 1.0 && is_low(e->mnt_dir)) {
            set_low(e->mnt_dir, 0); /* over again, with a margin: the next fall is posted */
        }
    }
    endmntent(m);
}

static void disk_ready(nd_file *f, uint32_t events) {
    (void)events;
    uint64_t expirations;
    if (read(f->fd, &expirations, sizeof expirations) != sizeof expirations) return;
    look();
}

int nd_disk_start(int interval_ms, unsigned system_percent, unsigned user_percent) {
    threshold_system = system_percent;
    threshold_user = user_percent;
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct timespec every = { interval_ms / 1000, (long)(interval_ms % 1000) * 1000000 };
    struct itimerspec spec = { every, every };
    if (fd < 0 || timerfd_settime(fd, 0, &spec, NULL) != 0) {
        nd_say("disk: timerfd: %s", strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    disk_file = (nd_file){ fd, disk_ready };
    look();
    return nd_watch(&disk_file, 0);
}
