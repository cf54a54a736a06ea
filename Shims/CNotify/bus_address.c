/*
 * bus_address.c: which bus a center talks to, and the embedded bus: a per-user dbus-daemon with our config,
 * started on first use by whichever process needs it (under a lock file, so concurrent starters
 * agree), daemonised so it outlives the process that started it.
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
#include "internal.h"

extern char **environ;

static uint32_t validate_address(const char *address, const char *origin) {
    DBusAddressEntry **entries = NULL;
    int n = 0;
    DBusError err;
    dbus_error_init(&err);
    if (!dbus_parse_address(address, &entries, &n, &err)) {
        cn_set_error("%s '%s' is not a D-Bus address (%s); use an address such as "
                     "unix:path=/run/user/1000/bus, or session, system, embedded",
                     origin, address, err.message ? err.message : "parse error");
        dbus_error_free(&err);
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    dbus_address_entries_free(entries);
    return NOTIFY_STATUS_OK;
}

const char *cn_system_state_dir(void) {
    const char *dir = getenv("DARWIN_NOTIFY_SYSTEM_STATE_DIR");
    return dir && dir[0] == '/' ? dir : "/run/darwin-notify/state";
}

const char *cn_system_bus_address(void) {
    const char *address = getenv("DBUS_SYSTEM_BUS_ADDRESS");
    return address && address[0] ? address : "unix:path=/run/dbus/system_bus_socket";
}

static int socket_answers(const char *path);

/* Installed system-wide (the policy file and the tmpfiles.d entry that makes the shared state
 * directory) and with the system bus up, the default is the system bus, as Apple's Darwin center
 * is system-wide; otherwise the per-user embedded bus. Only unix:path= system addresses are
 * probed (a connect, no D-Bus traffic); another form counts as reachable. */
static int system_bus_is_default(void) {
    struct stat st;
    if (stat(cn_system_state_dir(), &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    const char *address = cn_system_bus_address();
    if (strncmp(address, "unix:path=", 10) != 0) return 1;
    char path[PATH_MAX];
    size_t n = strcspn(address + 10, ",;");
    if (n >= sizeof path) return 0;
    memcpy(path, address + 10, n);
    path[n] = '\0';
    return socket_answers(path);
}

uint32_t cn_resolve_bus(const char *spec, cn_bus_kind *kind, char **out_address) {
    const char *origin = "bus address";
    if (spec == NULL || spec[0] == '\0') {
        spec = getenv("DARWIN_NOTIFY_BUS");
        origin = "DARWIN_NOTIFY_BUS";
        if (spec == NULL || spec[0] == '\0') spec = system_bus_is_default() ? "system" : "embedded";
    }
    *out_address = NULL;
    if (strcmp(spec, "embedded") == 0) {
        *kind = CN_BUS_EMBEDDED;
        return NOTIFY_STATUS_OK;
    }
    *kind = CN_BUS_ADDRESS;
    const char *address = spec;
    if (strcmp(spec, "session") == 0) {
        address = getenv("DBUS_SESSION_BUS_ADDRESS");
        if (address == NULL || address[0] == '\0') {
            cn_set_error("%s is 'session' but DBUS_SESSION_BUS_ADDRESS is not set", origin);
            return NOTIFY_STATUS_SERVER_NOT_FOUND;
        }
    } else if (strcmp(spec, "system") == 0) {
        address = cn_system_bus_address();
    }
    uint32_t st = validate_address(address, origin);
    if (st != NOTIFY_STATUS_OK) return st;
    *out_address = cn_address_without_guid(address);
    return *out_address ? NOTIFY_STATUS_OK : NOTIFY_STATUS_FAILED;
}

/* `address` with every guid=... key removed. A guid pins one daemon instance: libdbus refuses a
 * server with another, and a restarted dbus-daemon has a new one, so an address copied from
 * `dbus-daemon --print-address` or dbus-launch would never reconnect after a restart. We trust the
 * socket's path (and the daemon's credentials), not the instance. Malloc'd; NULL when out of memory. */
char *cn_address_without_guid(const char *address) {
    /* In an address ';' separates entries "method:key=value,..."; inside values ',' ';' and ':'
     * are always %-escaped (D-Bus specification, "Server Addresses"), so the text can be cut. */
    char *out = malloc(strlen(address) + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (const char *p = address; *p;) {
        size_t entry = strcspn(p, ";");
        const char *end = p + entry, *colon = memchr(p, ':', entry);
        const char *kv = colon ? colon + 1 : end;
        memcpy(out + o, p, (size_t)(kv - p)); /* "method:" */
        o += (size_t)(kv - p);
        int first = 1;
        while (kv < end) {
            size_t n = strcspn(kv, ",;");
            if (n > end - kv) n = (size_t)(end - kv);
            if (!(n >= 5 && strncmp(kv, "guid=", 5) == 0)) {
                if (!first) out[o++] = ',';
                memcpy(out + o, kv, n);
                o += n;
                first = 0;
            }
            kv += n;
            if (kv < end && *kv == ',') kv++;
        }
        p = end;
        if (*p == ';') out[o++] = *p++;
    }
    out[o] = '\0';
    return out;
}

/* ---- the runtime directory ---- */

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

/* ---- the embedded daemon ---- */

static int socket_answers(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    strncpy(sa.sun_path, path, sizeof sa.sun_path - 1);
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

/* " (listening: pid N, COMM)" for the process that listens on `path`, from the kernel's peer
 * credentials of a connection (for a listening socket, the process that called listen: systemd). */
static void describe_listener(const char *path, char *out, size_t len) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    strncpy(sa.sun_path, path, sizeof sa.sun_path - 1);
    struct ucred cred;
    socklen_t clen = sizeof cred;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 && cred.pid > 0) {
        char comm_path[64], comm[32] = "?";
        snprintf(comm_path, sizeof comm_path, "/proc/%d/comm", (int)cred.pid);
        int cfd = open(comm_path, O_RDONLY | O_CLOEXEC);
        if (cfd >= 0) {
            ssize_t n = read(cfd, comm, sizeof comm - 1);
            comm[n > 0 ? n : 0] = '\0';
            comm[strcspn(comm, "\n")] = '\0';
            close(cfd);
        }
        snprintf(out, len, " (listening: pid %d, %s)", (int)cred.pid, comm);
    }
    close(fd);
}

static char *find_in_path(const char *prog) {
    const char *path = getenv("PATH");
    if (!path) return NULL;
    char buf[PATH_MAX];
    const char *p = path;
    while (*p) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        if (n > 0 && n + strlen(prog) + 2 < sizeof buf) {
            memcpy(buf, p, n);
            buf[n] = '/';
            strcpy(buf + n + 1, prog);
            if (access(buf, X_OK) == 0) return strdup(buf);
        }
        if (!colon) break;
        p = colon + 1;
    }
    return NULL;
}

static int write_config(const char *dir, char *conf_path, size_t len) {
    snprintf(conf_path, len, "%s/bus.conf", dir);
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/bus.conf.%d", dir, (int)getpid());
    FILE *f = fopen(tmp, "we");
    if (!f) return -1;
    fprintf(f,
        "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
        " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
        "<!-- The DarwinNotify embedded bus: private to this user (its directory is 0700). -->\n"
        "<busconfig>\n"
        "  <type>darwin-notify</type>\n"
        "  <listen>unix:path=%s/bus</listen>\n"
        "  <auth>EXTERNAL</auth>\n"
        "  <pidfile>%s/bus.pid</pidfile>\n"
        "  <policy context=\"default\">\n"
        "    <allow send_destination=\"*\" eavesdrop=\"true\"/>\n"
        "    <allow eavesdrop=\"true\"/>\n"
        "    <allow own=\"*\"/>\n"
        "  </policy>\n"
        "  <limit name=\"max_match_rules_per_connection\">50000</limit>\n"
        "  <limit name=\"max_connections_per_user\">4096</limit>\n"
        "  <limit name=\"max_completed_connections\">4096</limit>\n"
        "</busconfig>\n", dir, dir);
    if (fclose(f) != 0 || rename(tmp, conf_path) != 0) { unlink(tmp); return -1; }
    return 0;
}

/* Starts dbus-daemon --fork and waits for it to print its address (the readiness handshake). */
static uint32_t spawn_daemon(const char *dir, const char *sock) {
    char *daemon = find_in_path("dbus-daemon");
    if (!daemon) {
        cn_set_error("dbus-daemon is not installed (not found in PATH); install it with "
                     "'apt-get install dbus-daemon' (Debian/Ubuntu) or 'dnf install dbus-daemon' (Fedora)");
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    char conf[PATH_MAX];
    if (write_config(dir, conf, sizeof conf) != 0) {
        cn_set_error("cannot write %s/bus.conf: %s", dir, strerror(errno));
        free(daemon);
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    /* We hold the lock and the socket does not answer: a socket and pid file left here belong
     * to a dead daemon (dbus-daemon refuses to start while its pid file exists). */
    unlink(sock);
    char pidfile[PATH_MAX + 16];
    snprintf(pidfile, sizeof pidfile, "%s/bus.pid", dir);
    unlink(pidfile);
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) { free(daemon); return NOTIFY_STATUS_FAILED; }
    char conf_arg[PATH_MAX + 32], fd_arg[32];
    snprintf(conf_arg, sizeof conf_arg, "--config-file=%s", conf);
    snprintf(fd_arg, sizeof fd_arg, "--print-address=%d", 3);
    char *argv[] = { daemon, conf_arg, "--fork", fd_arg, "--nosyslog", NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 3);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    /* The daemon outlives us: hand it none of our descriptors (a pipe whose reader waits for end
     * of file, a lock, a socket). dbus-daemon --fork keeps whatever it inherits. */
    posix_spawn_file_actions_addclosefrom_np(&fa, 4);
    /* Never hand the daemon our stdout/stderr: a pipe reader would wait for it forever. */
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none; sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSID);
    pid_t pid;
    int rc = posix_spawn(&pid, daemon, &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(pipefd[1]);
    if (rc != 0) {
        cn_set_error("cannot start %s: %s", daemon, strerror(rc));
        close(pipefd[0]);
        free(daemon);
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    char buf[512];
    size_t got = 0;
    struct pollfd pfd = { .fd = pipefd[0], .events = POLLIN };
    while (got < sizeof buf - 1 && !memchr(buf, '\n', got)) {
        if (poll(&pfd, 1, 10000) <= 0) break; /* 10 s: generous, and we report it */
        ssize_t r = read(pipefd[0], buf + got, sizeof buf - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0); /* the --fork parent exits once the daemon is ready */
    buf[got] = '\0';
    if (!memchr(buf, '\n', got)) {
        cn_set_error("%s did not become ready (exit status %d); try: %s --config-file=%s --nofork",
                     daemon, WIFEXITED(status) ? WEXITSTATUS(status) : -1, daemon, conf);
        free(daemon);
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    free(daemon);
    return NOTIFY_STATUS_OK;
}

static uint32_t embedded_paths(char *dir, size_t dlen, char *sock, size_t slen, int create) {
    uint32_t st = cn_embedded_runtime_dir(dir, dlen, create);
    if (st != NOTIFY_STATUS_OK) return st;
    snprintf(sock, slen, "%s/bus", dir);
    return NOTIFY_STATUS_OK;
}

static pid_t read_pid(const char *dir) {
    char path[PATH_MAX + 16], buf[32] = {0};
    snprintf(path, sizeof path, "%s/bus.pid", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    long pid = strtol(buf, NULL, 10);
    return pid > 1 ? (pid_t)pid : -1;
}

/* Whether `pid` is the dbus-daemon started with this directory's bus.conf: a pid file can outlive
 * its daemon and the number be reused, by another user's bus or the system bus (which root could
 * kill). */
static int is_our_daemon(pid_t pid, const char *dir) {
    char path[64], cmdline[PATH_MAX * 2];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, cmdline, sizeof cmdline - 1);
    close(fd);
    if (n <= 0) return 0;
    cmdline[n] = '\0';
    char want[PATH_MAX + 32];
    snprintf(want, sizeof want, "--config-file=%s/bus.conf", dir);
    for (ssize_t i = 0; i < n; i += (ssize_t)strlen(cmdline + i) + 1)
        if (strcmp(cmdline + i, want) == 0) return 1;
    return 0;
}

/* Stops the daemon of `dir` if one runs, and removes its socket and pid file. The caller holds
 * the lock file, so nobody starts another meanwhile and nobody else's socket is removed.
 * Returns 1 if a daemon was stopped, 0 if none ran, -1 with the error set. */
static int stop_daemon_locked(const char *dir) {
    pid_t pid = read_pid(dir);
    int stopped = 0;
    if (pid > 0 && is_our_daemon(pid, dir)) {
        if (kill(pid, SIGTERM) != 0 && errno != ESRCH) {
            cn_set_error("cannot stop dbus-daemon pid %d: %s", (int)pid, strerror(errno));
            return -1;
        }
        for (int i = 0; i < 500 && kill(pid, 0) == 0; i++) { /* up to 5 s for it to go */
            struct timespec ts = { 0, 10 * 1000 * 1000 };
            nanosleep(&ts, NULL);
        }
        if (kill(pid, 0) == 0) kill(pid, SIGKILL);
        stopped = 1;
    }
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/bus", dir);
    /* A socket that still answers is someone else's (systemd listening for socket activation):
     * removing it would leave that listener deaf. Only ours, or a dead one, goes. */
    if (stopped || !socket_answers(path)) unlink(path);
    snprintf(path, sizeof path, "%s/bus.pid", dir);
    unlink(path); /* the pid file is only ever ours */
    return stopped;
}

/* Takes the lock that starters and stoppers of the embedded bus of `dir` hold (flock on
 * `dir`/lock); returns its descriptor (closing it releases the lock), or -1 with the error set. */
static int lock_starters(const char *dir) {
    char lockpath[PATH_MAX + 8];
    snprintf(lockpath, sizeof lockpath, "%s/lock", dir);
    int lfd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lfd < 0) {
        cn_set_error("cannot open lock file %s: %s", lockpath, strerror(errno));
        return -1;
    }
    while (flock(lfd, LOCK_EX) != 0 && errno == EINTR) {}
    return lfd;
}

uint32_t cn_embedded_ensure(char **out_address) {
    char dir[PATH_MAX], sock[PATH_MAX + 8];
    uint32_t st = embedded_paths(dir, sizeof dir, sock, sizeof sock, 1);
    if (st != NOTIFY_STATUS_OK) return st;
    if (!socket_answers(sock)) {
        int lfd = lock_starters(dir);
        if (lfd < 0) return NOTIFY_STATUS_SERVER_NOT_FOUND;
        if (!socket_answers(sock)) { /* nobody else started it */
            /* One daemon per runtime directory: a daemon of ours that is alive but unreachable
             * (its socket removed) would otherwise run on beside the new one. */
            stop_daemon_locked(dir);
            st = spawn_daemon(dir, sock);
        }
        flock(lfd, LOCK_UN);
        close(lfd);
        if (st != NOTIFY_STATUS_OK) return st;
    }
    char addr[PATH_MAX + 32];
    snprintf(addr, sizeof addr, "unix:path=%s", sock);
    *out_address = strdup(addr);
    return *out_address ? NOTIFY_STATUS_OK : NOTIFY_STATUS_FAILED;
}

static void copy_out(char *out, size_t len, const char *s) {
    if (out && len) snprintf(out, len, "%s", s);
}

uint32_t CNotify_embedded_bus_start(char *out_address, size_t out_len) {
    cn_clear_error();
    char *addr = NULL;
    uint32_t st = cn_embedded_ensure(&addr);
    if (st == NOTIFY_STATUS_OK) copy_out(out_address, out_len, addr);
    free(addr);
    return st;
}

uint32_t CNotify_embedded_bus_stop(void) {
    cn_clear_error();
    char dir[PATH_MAX], sock[PATH_MAX + 8];
    uint32_t st = embedded_paths(dir, sizeof dir, sock, sizeof sock, 0);
    if (st != NOTIFY_STATUS_OK) return st;
    struct stat exists;
    if (lstat(dir, &exists) != 0) { /* never made: nothing runs, and a stop creates nothing */
        cn_set_error("the embedded bus is not running (%s)", sock);
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    /* Under the starters' lock: a client that lost the bus and wants it back waits until the old
     * daemon is gone and its socket removed, then starts one daemon; we never remove a socket that
     * a new daemon made (which left that daemon unreachable, and the next client started a second). */
    int lfd = lock_starters(dir);
    if (lfd < 0) return NOTIFY_STATUS_FAILED;
    int stopped = stop_daemon_locked(dir);
    flock(lfd, LOCK_UN);
    close(lfd);
    if (stopped < 0) return NOTIFY_STATUS_FAILED;
    if (stopped == 0 && socket_answers(sock)) {
        char who[64] = "";
        describe_listener(sock, who, sizeof who);
        cn_set_error("the bus at %s answers, but DarwinNotify did not start it: it is socket-activated%s; "
                     "stop it with: systemctl --user stop darwin-notify.socket darwin-notify.service", sock, who);
        return NOTIFY_STATUS_FAILED;
    }
    if (stopped == 0) {
        cn_set_error("the embedded bus is not running (%s)", sock);
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_embedded_bus_status(int *running, char *out_address, size_t out_len, char *out_dir, size_t dir_len) {
    cn_clear_error();
    char dir[PATH_MAX], sock[PATH_MAX + 8];
    if (running) *running = 0;
    uint32_t st = embedded_paths(dir, sizeof dir, sock, sizeof sock, 0); /* a query creates nothing */
    if (st != NOTIFY_STATUS_OK) return st;
    copy_out(out_dir, dir_len, dir);
    char addr[PATH_MAX + 32];
    snprintf(addr, sizeof addr, "unix:path=%s", sock);
    copy_out(out_address, out_len, addr);
    if (running) *running = socket_answers(sock);
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_default_bus(char *out_scope, size_t scope_len, char *out_address, size_t address_len) {
    cn_clear_error();
    const char *env = getenv("DARWIN_NOTIFY_BUS");
    cn_bus_kind kind;
    char *address = NULL;
    uint32_t st = cn_resolve_bus(NULL, &kind, &address); /* decides system or embedded, once */
    if (st != NOTIFY_STATUS_OK) return st;
    copy_out(out_scope, scope_len, env && env[0] ? "DARWIN_NOTIFY_BUS" : kind == CN_BUS_EMBEDDED ? "embedded" : "system");
    if (kind == CN_BUS_EMBEDDED) {
        char dir[PATH_MAX], sock[PATH_MAX + 8];
        if ((st = embedded_paths(dir, sizeof dir, sock, sizeof sock, 0)) != NOTIFY_STATUS_OK) return st;
        char addr[PATH_MAX + 32];
        snprintf(addr, sizeof addr, "unix:path=%s", sock);
        copy_out(out_address, address_len, addr);
    } else {
        copy_out(out_address, address_len, address);
    }
    free(address);
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_bus_address(const char *bus, char *out, size_t len) {
    cn_clear_error();
    if (!out || !len) { cn_set_error("output buffer is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    cn_bus_kind kind;
    char *address = NULL;
    uint32_t st = cn_resolve_bus(bus, &kind, &address);
    if (st == NOTIFY_STATUS_OK && kind == CN_BUS_EMBEDDED) st = cn_embedded_ensure(&address);
    if (st == NOTIFY_STATUS_OK) copy_out(out, len, address);
    free(address);
    return st;
}
