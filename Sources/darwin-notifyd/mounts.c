/*
 * mounts.c: com.apple.system.kernel.mount, .unmount and .mountupdate (kNotifyVFSMount,
 * kNotifyVFSUnmount, kNotifyVFSUpdate). /proc/self/mountinfo polls with POLLPRI|POLLERR when this
 * mount namespace's table changes; it is read again and compared with the last reading, each
 * mount keyed by its mount ID (the first field): a new ID is a mount, a gone one an unmount, and
 * the same ID with other options (a remount) an update.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "notifyd.h"

typedef struct {
    unsigned long id;
    char *line; /* the rest of its mountinfo line */
} nd_mount;

static nd_file mounts_file;
static nd_mount *table;
static size_t ntable;

static void free_table(nd_mount *t, size_t n) {
    for (size_t i = 0; i < n; i++) free(t[i].line);
    free(t);
}

/* The whole file, read from the start. NULL on failure. */
static char *read_all(int fd) {
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) return NULL;
        if (len + 4096 > cap) {
            char *n = realloc(buf, cap *= 2);
            if (!n) { free(buf); return NULL; }
            buf = n;
        }
        ssize_t r = pread(fd, buf + len, cap - len - 1, (off_t)len);
        if (r < 0) { free(buf); return NULL; }
        if (r == 0) break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    return buf;
}

static int parse(char *text, nd_mount **out, size_t *n) {
    size_t cap = 64, count = 0;
    nd_mount *t = malloc(cap * sizeof *t);
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); t && l; l = strtok_r(NULL, "\n", &save)) {
        char *rest;
        unsigned long id = strtoul(l, &rest, 10);
        if (rest == l) continue;
        if (count == cap) {
            nd_mount *g = realloc(t, (cap *= 2) * sizeof *t);
            if (!g) break;
            t = g;
        }
        t[count].id = id;
        t[count].line = strdup(rest);
        if (t[count].line) count++;
    }
    if (!t) return -1;
    *out = t;
    *n = count;
    return 0;
}

static const nd_mount *find(const nd_mount *t, size_t n, unsigned long id) {
    for (size_t i = 0; i < n; i++)
        if (t[i].id == id) return &t[i];
    return NULL;
}

/* The mount point, the fifth field of a mountinfo line (the fourth after the ID). */
static void mount_point(const char *rest, char *out, size_t len) {
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", rest);
    char *save = NULL, *f = strtok_r(copy, " ", &save);
    for (int i = 0; f && i < 3; i++) f = strtok_r(NULL, " ", &save);
    snprintf(out, len, "%s", f ? f : "?");
}

static void mounts_ready(nd_file *f, uint32_t events) {
    (void)events;
    char *text = read_all(f->fd);
    nd_mount *now;
    size_t n;
    if (!text || parse(text, &now, &n) != 0) {
        free(text);
        return;
    }
    free(text);
    char where[1024], why[1200];
    int mounted = 0, unmounted = 0, updated = 0;
    for (size_t i = 0; i < n; i++) {
        const nd_mount *was = find(table, ntable, now[i].id);
        if (!was) {
            if (!mounted++) { mount_point(now[i].line, where, sizeof where); snprintf(why, sizeof why, "%s mounted", where); }
        } else if (strcmp(was->line, now[i].line) != 0) {
            if (!updated++) mount_point(now[i].line, where, sizeof where);
        }
    }
    if (mounted) nd_post("com.apple.system.kernel.mount", why);
    for (size_t i = 0; i < ntable; i++)
        if (!find(now, n, table[i].id) && !unmounted++) {
            mount_point(table[i].line, where, sizeof where);
            snprintf(why, sizeof why, "%s unmounted", where);
        }
    if (unmounted) nd_post("com.apple.system.kernel.unmount", why);
    if (updated) {
        snprintf(why, sizeof why, "%d mount%s changed", updated, updated == 1 ? "" : "s");
        nd_post("com.apple.system.kernel.mountupdate", why);
    }
    free_table(table, ntable);
    table = now;
    ntable = n;
}

int nd_mounts_start(void) {
    int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        nd_say("mounts: /proc/self/mountinfo: %s", strerror(errno));
        return -1;
    }
    mounts_file = (nd_file){ fd, mounts_ready };
    char *text = read_all(fd);
    if (!text || parse(text, &table, &ntable) != 0) {
        free(text);
        nd_say("mounts: cannot read /proc/self/mountinfo");
        close(fd);
        return -1;
    }
    free(text);
    return nd_watch(&mounts_file, 1);
}
