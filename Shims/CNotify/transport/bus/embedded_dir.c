/*
 * embedded_dir.c: the embedded bus's runtime directory: $XDG_RUNTIME_DIR/darwin-notify, else
 * /tmp/darwin-notify-$UID, which must be ours and closed to others; when someone else took the
 * /tmp name first, our own /tmp/darwin-notify-$UID.XXXXXX beside it (usable_dirs.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "bus.h"

/* Why `dir` cannot be our private runtime directory, or NULL: it must be a real directory of
 * ours that nobody else may write in. */
static const char *private_dir_problem(const struct stat *st, const void *unused) {
    (void)unused;
    if (S_ISLNK(st->st_mode)) return "it is a symbolic link";
    if (!S_ISDIR(st->st_mode)) return "it is not a directory";
    if (st->st_uid != geteuid()) return "it is owned by another user";
    if (st->st_mode & (S_IWGRP | S_IWOTH)) return "others can write to it";
    return NULL;
}

static uint32_t check_private_dir(const char *dir) {
    struct stat st;
    if (lstat(dir, &st) != 0) {
        cn_set_error("cannot inspect runtime directory %s: %s", dir, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    const char *why = private_dir_problem(&st, NULL);
    if (!why) return NOTIFY_STATUS_OK;
    if (st.st_uid != geteuid() && S_ISDIR(st.st_mode))
        cn_set_error("refusing runtime directory %s: it is owned by uid %u, not by you (uid %u)",
                     dir, (unsigned)st.st_uid, (unsigned)geteuid());
    else if (S_ISDIR(st.st_mode) && st.st_uid == geteuid() && !S_ISLNK(st.st_mode))
        cn_set_error("refusing runtime directory %s: others can write to it (mode %03o); chmod 700 it or remove it",
                     dir, (unsigned)(st.st_mode & 0777));
    else
        cn_set_error("refusing runtime directory %s: %s", dir, why);
    /* Not SERVER_NOT_FOUND: a refused directory is not a stopped bus (--bus-stop must say so). */
    return NOTIFY_STATUS_FAILED;
}

/* /tmp/darwin-notify-<uid> was made by someone else (or is a link, or a file): sticky /tmp lets
 * us neither use nor remove it. Our own /tmp/darwin-notify-<uid>.XXXXXX is used instead, the
 * first valid one in byte order, so every process of ours finds the same; made if there is none
 * and `create`. 1 if `out` names one, else 0. */
static int fallback_runtime_dir(const char *primary, int create, char *out, size_t len) {
    const char *base = strrchr(primary, '/') + 1;
    if (cn_first_usable_dir("/tmp", base, private_dir_problem, NULL, out, len)) return 1;
    return create && cn_make_usable_dir_beside("/tmp", base, 0700, private_dir_problem, NULL, out, len) == 0;
}

uint32_t cn_embedded_runtime_dir(char *out, size_t len, int create) {
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int n;
    if (xdg && xdg[0] == '/') {
        uint32_t st = check_private_dir(xdg);
        if (st != NOTIFY_STATUS_OK) return st;
        n = snprintf(out, len, "%s/darwin-notify", xdg);
    } else {
        n = snprintf(out, len, "/tmp/darwin-notify-%u", (unsigned)geteuid());
    }
    if (n < 0 || (size_t)n + 8 >= len || (size_t)n > sizeof(((struct sockaddr_un *)0)->sun_path) - 16) {
        cn_set_error("runtime directory path is too long for a unix socket");
        return NOTIFY_STATUS_FAILED;
    }
    if (create && mkdir(out, 0700) != 0 && errno != EEXIST) {
        cn_set_error("cannot create runtime directory %s: %s", out, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    struct stat st;
    if (lstat(out, &st) != 0 && errno == ENOENT && !create) return NOTIFY_STATUS_OK; /* a query creates nothing */
    uint32_t rc = check_private_dir(out);
    if (rc == NOTIFY_STATUS_OK || (xdg && xdg[0] == '/')) return rc;
    if (lstat(out, &st) == 0 && st.st_uid == geteuid() && S_ISDIR(st.st_mode)) return rc; /* ours: chmod 700 fixes it */
    /* Taken in /tmp by someone else: our own beside it. */
    char primary[PATH_MAX];
    snprintf(primary, sizeof primary, "%s", out);
    if (!fallback_runtime_dir(primary, create, out, len)) {
        if (!create) { snprintf(out, len, "%s", primary); return NOTIFY_STATUS_OK; } /* nothing of ours runs */
        cn_set_error("%s is taken by another user and %s.XXXXXX cannot be made: %s", primary, primary, strerror(errno));
        return NOTIFY_STATUS_FAILED;
    }
    cn_clear_error();
    cn_notice("%s is not ours (%s); using %s instead", primary, private_dir_problem(&st, NULL), out);
    return NOTIFY_STATUS_OK;
}


uint32_t cn_embedded_paths(char *dir, size_t dlen, char *sock, size_t slen, int create) {
    uint32_t st = cn_embedded_runtime_dir(dir, dlen, create);
    if (st != NOTIFY_STATUS_OK) return st;
    snprintf(sock, slen, "%s/bus", dir);
    return NOTIFY_STATUS_OK;
}
