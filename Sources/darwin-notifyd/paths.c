/*
 * paths.c: the `monitor NAME PATH` lines of notify.conf, as notifyd's pathwatch.c watches a path:
 * NAME is posted when PATH is created, written, has its attributes changed, is deleted, or is
 * replaced (a rename over it, as `ln -sf` through a temporary name and timedatectl do to
 * /etc/localtime). By inotify: on the directory that holds PATH (entries appearing and leaving
 * under PATH's name), or on the nearest directory above it that exists while it does not, and
 * on PATH itself (what it resolves to: a symbolic link's target). After each event the watches
 * are made again, so a replaced file is watched as the new one.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>
#include "notifyd.h"

typedef struct {
    char *name, *path;
    int dir_wd, file_wd; /* -1: none */
    char *leaf;          /* the entry the directory watch looks for (PATH's, or an ancestor's) */
} nd_watched;

static nd_file inotify_file = { -1, NULL };
static nd_watched *watched;
static size_t nwatched;

#define FILE_EVENTS (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF)
#define DIR_EVENTS (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)

/* Watches are not removed: another path may share one (inotify gives one descriptor per inode,
 * masks added together), and the kernel drops a watch when its inode goes. Events of a watch no
 * path claims any more are ignored. */
static void drop_watches(nd_watched *w) {
    w->dir_wd = w->file_wd = -1;
    free(w->leaf);
    w->leaf = NULL;
}

/* Watches PATH's directory (or the nearest existing one above it) and PATH itself if it exists.
 * Two paths in one directory share its watch descriptor: inotify hands the same one back. */
static void make_watches(nd_watched *w) {
    drop_watches(w);
    w->file_wd = inotify_add_watch(inotify_file.fd, w->path, FILE_EVENTS | IN_MASK_ADD);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", w->path);
    for (;;) {
        char *slash = strrchr(dir, '/');
        if (!slash) return;
        free(w->leaf);
        w->leaf = strdup(slash + 1);
        if (slash == dir) slash[1] = '\0';
        else *slash = '\0';
        w->dir_wd = inotify_add_watch(inotify_file.fd, dir, DIR_EVENTS | IN_ONLYDIR | IN_MASK_ADD);
        if (w->dir_wd >= 0 || strcmp(dir, "/") == 0) return;
    }
}

static void paths_ready(nd_file *f, uint32_t events) {
    (void)events;
    char buf[64 * (sizeof(struct inotify_event) + NAME_MAX + 1)] __attribute__((aligned(__alignof__(struct inotify_event))));
    int *hit = calloc(nwatched ? nwatched : 1, sizeof *hit);
    for (;;) {
        ssize_t n = read(f->fd, buf, sizeof buf);
        if (n <= 0) break;
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *e = (struct inotify_event *)p;
            for (size_t i = 0; hit && i < nwatched; i++) {
                nd_watched *w = &watched[i];
                int about_file = e->wd == w->file_wd && !(e->len && e->wd == w->dir_wd);
                int about_entry = e->wd == w->dir_wd && e->len && w->leaf && strcmp(e->name, w->leaf) == 0;
                int dir_gone = e->wd == w->dir_wd && (e->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED));
                if (about_file || about_entry || dir_gone || (e->mask & IN_Q_OVERFLOW)) hit[i] = 1;
            }
            p += sizeof *e + e->len;
        }
    }
    for (size_t i = 0; hit && i < nwatched; i++) {
        if (!hit[i]) continue;
        make_watches(&watched[i]);
        /* An ancestor's entry changed but PATH did not come into being: nothing to say yet. */
        if (watched[i].file_wd < 0 && access(watched[i].path, F_OK) == 0) continue;
        char why[PATH_MAX + 32];
        snprintf(why, sizeof why, "%s changed", watched[i].path);
        nd_post(watched[i].name, why);
    }
    free(hit);
}

void nd_paths_set(size_t n, const char *const *names, const char *const *paths) {
    for (size_t i = 0; i < nwatched; i++) {
        drop_watches(&watched[i]);
        free(watched[i].name);
        free(watched[i].path);
    }
    free(watched);
    watched = calloc(n ? n : 1, sizeof *watched);
    nwatched = 0;
    for (size_t i = 0; watched && i < n; i++) {
        nd_watched *w = &watched[nwatched];
        *w = (nd_watched){ strdup(names[i]), strdup(paths[i]), -1, -1, NULL };
        if (!w->name || !w->path) { free(w->name); free(w->path); continue; }
        nwatched++;
        if (inotify_file.fd >= 0) make_watches(w);
    }
}

int nd_paths_start(void) {
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) {
        nd_say("monitor: inotify: %s", strerror(errno));
        return -1;
    }
    inotify_file = (nd_file){ fd, paths_ready };
    for (size_t i = 0; i < nwatched; i++) make_watches(&watched[i]);
    return nd_watch(&inotify_file, 0);
}
