/*
 * launch_files.c: the declaration directory (darwin-notify-launch(5)): /etc/darwin-notify/launch.d
 * for the system, $XDG_CONFIG_HOME/darwin-notify/launch.d (~/.config/...) for a user's launcher.
 * A file `LABEL.conf` is believed only if nobody but its owner can change it: a regular file, not
 * a link, root's (a user's launcher: that user's or root's), not writable by group or others, at
 * most 64 KiB; and the directory the same. A file that fails is refused whole, said in the log and
 * in List with why. A user's declaration runs its job as that user: a `user` line naming anyone
 * else refuses the file. The directory is read again when a file in it (or it) changes (inotify,
 * on it and on its parent, so a directory made later is found).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>
#include "launch.h"

static char dir[PATH_MAX];
static int user_mode;
static nd_file watch_file;
static int dir_wd = -1;

/* Whose files are believed: root's, and a user's launcher's own. */
static const char *owner_problem(const struct stat *st) {
    static char why[160];
    if (st->st_uid == 0 || (user_mode && st->st_uid == geteuid())) {
        if (!(st->st_mode & 022)) return NULL;
        snprintf(why, sizeof why, "writable by %s (mode %04o): only its owner may change a job's declaration (chmod go-w)",
                 st->st_mode & 002 ? "others" : "its group", (unsigned)(st->st_mode & 07777));
        return why;
    }
    snprintf(why, sizeof why, "owned by uid %u; this launcher believes only %s", (unsigned)st->st_uid,
             user_mode ? "its own user's files and root's" : "root's files");
    return why;
}

/* The user line of a user's declaration must name that user. */
static int is_self(const char *user) {
    if (!user[0]) return 1;
    struct passwd *pw = getpwuid(geteuid());
    char self[32];
    snprintf(self, sizeof self, "%u", (unsigned)geteuid());
    return strcmp(user, self) == 0 || (pw && strcmp(user, pw->pw_name) == 0);
}

static int add_refused(char ***list, size_t *n, const char *path, const char *why) {
    nd_say("launcher: %s: refused: %s", path, why);
    char **l = realloc(*list, (*n + 1) * sizeof *l), *line = NULL;
    if (!l) return -1;
    *list = l;
    if (asprintf(&line, "%s: %s", path, why) < 0) return -1;
    l[(*n)++] = line;
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void read_dir(void) {
    nd_decl *decls = NULL;
    size_t n = 0, n_refused = 0;
    char **refused = NULL;
    struct stat st;
    DIR *d = NULL;
    if (lstat(dir, &st) != 0) {
        if (errno != ENOENT) add_refused(&refused, &n_refused, dir, strerror(errno));
    } else if (!S_ISDIR(st.st_mode)) {
        add_refused(&refused, &n_refused, dir, "not a directory (a link to one is not followed)");
    } else if (owner_problem(&st)) {
        add_refused(&refused, &n_refused, dir, owner_problem(&st));
    } else if (!(d = opendir(dir))) {
        add_refused(&refused, &n_refused, dir, strerror(errno));
    }
    char **names = NULL;
    size_t n_names = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len <= 5 || strcmp(e->d_name + len - 5, ".conf") != 0 || e->d_name[0] == '.') continue;
        char **more = realloc(names, (n_names + 1) * sizeof *more);
        if (!more) break;
        names = more;
        if ((names[n_names] = strdup(e->d_name))) n_names++;
    }
    if (d) closedir(d);
    if (n_names) qsort(names, n_names, sizeof *names, by_name);
    for (size_t i = 0; i < n_names; i++) {
        char path[PATH_MAX + 256], label[NAME_MAX + 1], why[512];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(label, sizeof label, "%.*s", (int)(strlen(names[i]) - 5), names[i]);
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        const char *problem = NULL;
        if (fd < 0) problem = errno == ELOOP ? "a symbolic link: a declaration must be the file itself" : strerror(errno);
        else if (fstat(fd, &st) != 0) problem = strerror(errno);
        else if (!S_ISREG(st.st_mode)) problem = "not a regular file";
        else if (st.st_size > ND_DECL_FILE_MAX) problem = "larger than 64 KiB";
        else problem = owner_problem(&st);
        char *text = NULL;
        ssize_t got = 0;
        if (!problem && (!(text = malloc((size_t)st.st_size + 1)) || (got = read(fd, text, (size_t)st.st_size)) < 0))
            problem = "cannot be read";
        if (fd >= 0) close(fd);
        nd_decl decl;
        unsigned line = 0;
        char at[600];
        if (!problem && nd_decl_parse(label, text, (size_t)got, &decl, &line, why, sizeof why) != 0) {
            nd_decl_free(&decl);
            if (line) snprintf(at, sizeof at, "line %u: %s", line, why);
            else snprintf(at, sizeof at, "%s", why);
            problem = at;
        } else if (!problem && user_mode && !is_self(decl.user)) {
            nd_decl_free(&decl);
            snprintf(why, sizeof why, "user %s: a user's declaration runs its job as that user only", decl.user);
            problem = why;
        }
        free(text);
        if (problem) { add_refused(&refused, &n_refused, path, problem); continue; }
        snprintf(decl.file, sizeof decl.file, "%s", path);
        nd_decl *more = realloc(decls, (n + 1) * sizeof *more);
        if (!more) { nd_decl_free(&decl); continue; }
        decls = more;
        decls[n++] = decl;
    }
    for (size_t i = 0; i < n_names; i++) free(names[i]);
    free(names);
    nd_jobs_apply(decls, n, refused, n_refused);
    nd_say("launcher: %s: %zu job%s declared, %zu file%s refused", dir, n, n == 1 ? "" : "s", n_refused, n_refused == 1 ? "" : "s");
}

static int parent_wd = -1;
static char leaf[PATH_MAX];

/* Watches the directory itself, once it exists (again). */
static void rewatch(void) {
    if (dir_wd >= 0) return;
    dir_wd = inotify_add_watch(watch_file.fd, dir, IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE |
                                                   IN_ATTRIB | IN_ONLYDIR | IN_DONT_FOLLOW | IN_DELETE_SELF | IN_MOVE_SELF);
}

/* Whether an event concerns the declarations: a *.conf in the directory, the directory itself,
 * or its name in the parent. */
static int concerns(const struct inotify_event *e) {
    if (e->wd == dir_wd) {
        if (e->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
            if (e->mask & IN_IGNORED) dir_wd = -1;
            return 1;
        }
        size_t n = e->len ? strlen(e->name) : 0;
        return n > 5 && strcmp(e->name + n - 5, ".conf") == 0;
    }
    return e->wd == parent_wd && e->len && strcmp(e->name, leaf) == 0;
}

static void changed(nd_file *f, uint32_t events) {
    (void)events;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    int any = 0;
    while ((n = read(f->fd, buf, sizeof buf)) > 0)
        for (char *p = buf; p < buf + n; p += sizeof(struct inotify_event) + ((struct inotify_event *)p)->len)
            any |= concerns((struct inotify_event *)p);
    if (!any) return;
    rewatch();
    read_dir();
}

void nd_launch_reread(void) {
    if (dir[0]) {
        rewatch();
        read_dir();
    }
}

int nd_launch_start(const char *path, int user) {
    user_mode = user;
    snprintf(dir, sizeof dir, "%s", path);
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd >= 0) {
        watch_file = (nd_file){ fd, changed };
        char parent[PATH_MAX];
        snprintf(parent, sizeof parent, "%s", dir);
        char *slash = strrchr(parent, '/');
        snprintf(leaf, sizeof leaf, "%s", slash ? slash + 1 : parent);
        if (slash && slash != parent) *slash = '\0';
        parent_wd = inotify_add_watch(fd, parent, IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_ATTRIB | IN_ONLYDIR);
        rewatch();
        nd_watch(&watch_file, 0);
    }
    read_dir();
    return 0;
}
