/*
 * darwin-notifyd: the system around notify(3), as macOS's notifyd: reads notify.conf(5)
 * (`monitor` and `set` lines; every process enforces `reserve` itself) and posts the system's
 * names of <notify_keys.h> from Linux's own event sources. Run as root on the system bus it makes
 * them genuine reserved posts; `--bus` runs it in the foreground on any bus (tests, a single
 * user). darwin-notifyd(8).
 *
 * One thread, one epoll set (loop.c): each polled file carries its own callback (notifyd.h).
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <pwd.h>
#include "launch.h"

static nd_file signal_file, conf_file;
static int stopping;

/* ---- notify.conf ---- */

static void conf_problem(void *ctx, const char *file, unsigned line, const char *why) {
    (void)ctx;
    if (line) nd_say("%s:%u: %s (the line is skipped; the rest applies)", file, line, why);
    else nd_say("%s %s", file, why);
}

typedef struct {
    const char **names, **paths;
    size_t n, cap;
} lines_seen;

static void on_line(void *ctx, const char *kind, const char *name, const char *arg, uint64_t value) {
    lines_seen *l = ctx;
    if (strcmp(kind, "set") == 0) {
        nd_set_state(name, value);
        return;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        const char **n = realloc(l->names, cap * sizeof *n), **p = n ? realloc(l->paths, cap * sizeof *p) : NULL;
        if (n) l->names = n;
        if (!n || !p) return;
        l->paths = p;
        l->cap = cap;
    }
    l->names[l->n] = strdup(name);
    l->paths[l->n] = strdup(arg);
    if (l->names[l->n] && l->paths[l->n]) l->n++;
}

/* Reads notify.conf now: its problems said, its `set` states set, its `monitor` paths watched. */
static void load_conf(const char *why) {
    size_t bad = 0, reserves = 0, monitors = 0, sets = 0;
    CNotify_conf_reload();
    CNotify_conf_check(NULL, conf_problem, NULL, &bad, &reserves, &monitors, &sets);
    lines_seen l = { 0 };
    CNotify_conf_lines(on_line, &l);
    nd_paths_set(l.n, l.names, l.paths);
    for (size_t i = 0; i < l.n; i++) { free((void *)l.names[i]); free((void *)l.paths[i]); }
    free(l.names);
    free(l.paths);
    nd_say("notify.conf %s: %zu reserve, %zu monitor, %zu set line%s, %zu skipped", why, reserves, monitors, sets,
           sets == 1 ? "" : "s", bad);
}

/* The directories notify.conf's files live in, watched for a change of one of them: `conf_leaf`
 * (the file's own name) in its directory, or a *.conf in a .d directory (`conf_d_wd`). */
static char conf_leaf[4096];
static int conf_d_wd = -1;

static int is_conf_event(const struct inotify_event *e) {
    if (!e->len) return e->wd == conf_d_wd;
    size_t n = strlen(e->name);
    if (e->wd == conf_d_wd) return n > 5 && strcmp(e->name + n - 5, ".conf") == 0;
    return strcmp(e->name, conf_leaf) == 0 || strcmp(e->name, "notify.conf.d") == 0;
}

static void conf_ready(nd_file *f, uint32_t events) {
    (void)events;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int any = 0;
    ssize_t n;
    while ((n = read(f->fd, buf, sizeof buf)) > 0)
        for (char *p = buf; p < buf + n; p += sizeof(struct inotify_event) + ((struct inotify_event *)p)->len)
            any |= is_conf_event((struct inotify_event *)p);
    if (any) load_conf("changed");
}

static int watch_conf(void) {
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return -1;
    const uint32_t mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB;
    const char *env = getenv("DARWIN_NOTIFY_CONF");
    if (env && *env) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", env);
        if ((conf_d_wd = inotify_add_watch(fd, dir, mask | IN_ONLYDIR)) < 0) { /* a file: its directory */
            char *slash = strrchr(dir, '/');
            snprintf(conf_leaf, sizeof conf_leaf, "%s", slash ? slash + 1 : dir);
            if (slash && slash != dir) *slash = '\0';
            inotify_add_watch(fd, slash ? dir : ".", mask);
        }
    } else {
        snprintf(conf_leaf, sizeof conf_leaf, "notify.conf");
        inotify_add_watch(fd, "/etc/darwin-notify", mask);
        conf_d_wd = inotify_add_watch(fd, "/etc/darwin-notify/notify.conf.d", mask);
    }
    conf_file = (nd_file){ fd, conf_ready };
    return nd_watch(&conf_file, 0);
}

static void signal_ready(nd_file *f, uint32_t events) {
    (void)events;
    struct signalfd_siginfo si;
    while (read(f->fd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGHUP) { load_conf("reloaded on SIGHUP"); nd_launch_reread(); }
        else if (si.ssi_signo == SIGCHLD) nd_jobs_reap();
        else stopping = 1;
    }
}

/* systemd's Type=notify: READY=1 on $NOTIFY_SOCKET (a datagram; "@" is the abstract namespace). */
static void tell_systemd(void) {
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) return;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    memcpy(sa.sun_path, path, strlen(path));
    if (sa.sun_path[0] == '@') sa.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    sendto(fd, "READY=1", 7, MSG_NOSIGNAL, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path)));
    close(fd);
}

static void usage(FILE *to) {
    fprintf(to,
            "usage: darwin-notifyd [--bus ADDRESS] [--system-bus ADDRESS] [--network-settle MS] [--disk-interval MS]\n"
            "                      [--disk-free PERCENT] [--disk-free-system PERCENT]\n"
            "                      [--launch-dir DIR] [--launch-bus ADDRESS] [--no-launch]\n"
            "       darwin-notifyd --user [--bus ADDRESS] [--launch-dir DIR] [--launch-bus ADDRESS]\n"
            "       darwin-notifyd --list [--user] [--launch-bus ADDRESS]\n"
            "       darwin-notifyd --check-config [PATH]\n"
            "       darwin-notifyd --help | --version\n"
            "Posts the system's notification names (<notify_keys.h>) from Linux's event sources and serves\n"
            "notify.conf(5)'s monitor and set lines. ADDRESS: a D-Bus address, or session, system,\n"
            "embedded [default: $DARWIN_NOTIFY_BUS, else the process's default bus]. SIGHUP, or a change\n"
            "of notify.conf, reads it again. It also starts the jobs of /etc/darwin-notify/launch.d when a\n"
            "name they declared is posted (darwin-notify-launch(5)); --user runs only that, for one user's\n"
            "~/.config/darwin-notify/launch.d; --list shows a running launcher's jobs. See darwin-notifyd(8).\n");
}

static int number(const char *s, long min, long max, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) return 0;
    *out = v;
    return 1;
}

/* The user's declaration directory: $XDG_CONFIG_HOME/darwin-notify/launch.d, else ~/.config/... */
static void user_launch_dir(char *out, size_t len) {
    const char *config = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    struct passwd *pw = getpwuid(geteuid());
    if (config && config[0] == '/') snprintf(out, len, "%s/darwin-notify/launch.d", config);
    else snprintf(out, len, "%s/.config/darwin-notify/launch.d", home && home[0] == '/' ? home : pw ? pw->pw_dir : "/");
}

int main(int argc, char **argv) {
    const char *bus = NULL, *system_bus = NULL, *launch_dir = NULL, *launch_bus = NULL;
    int user = 0, launch = 1, list = 0;
    long settle = 200, interval = 60000, free_user = 5, free_system = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { usage(stdout); return 0; }
        if (strcmp(a, "--version") == 0) { printf("darwin-notifyd %s\n", CNotify_version()); return 0; }
        if (strcmp(a, "--check-config") == 0) {
            size_t bad = 0, r = 0, m = 0, s = 0;
            CNotify_conf_check(v, conf_problem, NULL, &bad, &r, &m, &s);
            printf("%zu reserve, %zu monitor, %zu set line%s; %zu skipped\n", r, m, s, s == 1 ? "" : "s", bad);
            return bad ? 1 : 0;
        }
        long *target = strcmp(a, "--network-settle") == 0 ? &settle
                       : strcmp(a, "--disk-interval") == 0 ? &interval
                       : strcmp(a, "--disk-free") == 0 ? &free_user
                       : strcmp(a, "--disk-free-system") == 0 ? &free_system : NULL;
        if (strcmp(a, "--bus") == 0 && v && *v) { bus = v; i++; continue; }
        if (strcmp(a, "--system-bus") == 0 && v && *v) { system_bus = v; i++; continue; }
        if (strcmp(a, "--launch-dir") == 0 && v && v[0] == '/') { launch_dir = v; i++; continue; }
        if (strcmp(a, "--launch-bus") == 0 && v && *v) { launch_bus = v; i++; continue; }
        if (strcmp(a, "--user") == 0) { user = 1; continue; }
        if (strcmp(a, "--no-launch") == 0) { launch = 0; continue; }
        if (strcmp(a, "--list") == 0) { list = 1; continue; }
        if (target && v && number(v, target == &settle ? 0 : target == &interval ? 10 : 0,
                                  target == &settle ? 60000 : target == &interval ? 86400000 : 100, target)) {
            i++;
            continue;
        }
        fprintf(stderr, "darwin-notifyd: %s%s%s: not an option or a bad value\n", a, v ? " " : "", v ? v : "");
        usage(stderr);
        return 64;
    }
    if (list) return nd_list(launch_bus ? launch_bus : bus ? bus : user ? "session" : "system");
    /* A daemon outlives whoever reads its stderr (a log reader that died): a line written to that
     * pipe fails, and never kills it. Apple's notifyd ignores SIGPIPE too; jobs get it back
     * (launch_spawn.c). */
    signal(SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (nd_loop_init() != 0 || sfd < 0) { nd_say("epoll or signalfd: %s", strerror(errno)); return 1; }
    signal_file = (nd_file){ sfd, signal_ready };
    nd_watch(&signal_file, 0);

    uint32_t status = 0;
    CNotify_center *center = bus ? CNotify_center_create(bus, &status) : CNotify_center_get_darwin_notify_center();
    if (!center) { nd_say("--bus %s: %s", bus, CNotify_last_error()); return 64; }
    nd_post_init(center);
    if (!launch_bus) launch_bus = bus ? bus : user ? "session" : "system";
    if (launch) {
        char dir[4096];
        if (launch_dir) snprintf(dir, sizeof dir, "%s", launch_dir);
        else if (user) user_launch_dir(dir, sizeof dir);
        else snprintf(dir, sizeof dir, "/etc/darwin-notify/launch.d");
        if (nd_jobs_init(center, launch_bus, user) == 0) {
            nd_launch_start(dir, user);
        } else {
            nd_say("the launcher does not run (said above): no job is started on a post");
            if (user) return 1;
        }
    }
    if (user) {
        nd_say("ready: the launcher of uid %u", (unsigned)geteuid());
        tell_systemd();
        while (!stopping && nd_loop_once() == 0) nd_bus_flush();
        nd_say("stopping");
        if (bus) CNotify_center_destroy(center);
        return 0;
    }
    load_conf("read");
    watch_conf();
    /* Each source on its own: one the machine does not allow (no rtnetlink in a sandbox) is said,
     * and the others run. */
    int started = 0, failed = 0;
    int (*const starts[])(void) = { nd_clock_start, nd_hostname_start, nd_mounts_start, nd_paths_start };
    for (size_t i = 0; i < sizeof starts / sizeof *starts; i++) *(starts[i]() == 0 ? &started : &failed) += 1;
    *(nd_network_start((int)settle) == 0 ? &started : &failed) += 1;
    *(nd_disk_start((int)interval, (unsigned)free_system, (unsigned)free_user) == 0 ? &started : &failed) += 1;
    *(nd_services_start(system_bus) == 0 ? &started : &failed) += 1;
    nd_say("ready: %d event sources running, %d not (said above)", started, failed);
    tell_systemd();
    while (!stopping && nd_loop_once() == 0) nd_bus_flush();
    nd_say("stopping");
    CNotify_center_flush(center, 5000);
    if (bus) CNotify_center_destroy(center);
    return 0;
}
