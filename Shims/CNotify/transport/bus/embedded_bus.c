/*
 * embedded_bus.c: the embedded bus: a per-user dbus-daemon with our config, started on first use by
 * whichever process needs it (under a lock file in its runtime directory, so concurrent starters
 * agree), daemonised so it outlives the process that started it; stopped and queried by notifyutil.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
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

extern char **environ;

/* " (listening: pid N, COMM)" for the process that listens on `path`, from the kernel's peer
 * credentials of a connection (for a listening socket, the process that called listen: systemd). */
static void describe_listener(const char *path, char *out, size_t len) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sa.sun_path) { close(fd); return; } /* cannot be a socket's path */
    memcpy(sa.sun_path, path, strlen(path) + 1);
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

/* The one dbus-daemon configuration of the project (the tests' and the benchmark's private buses
 * ask for it too, through CNotify_bus_config). */
static const char *const default_policy =
    "  <policy context=\"default\">\n"
    "    <allow send_destination=\"*\" eavesdrop=\"true\"/>\n"
    "    <allow eavesdrop=\"true\"/>\n"
    "    <allow own=\"*\"/>\n"
    "  </policy>\n";
static const char *const embedded_limits =
    "  <limit name=\"max_match_rules_per_connection\">50000</limit>\n"
    "  <limit name=\"max_connections_per_user\">4096</limit>\n"
    "  <limit name=\"max_completed_connections\">4096</limit>\n";

uint32_t CNotify_bus_config(const char *listen, const char *type, const char *pidfile, const char *policy, int limits,
                            char *out, size_t len) {
    cn_clear_error();
    CN_RETURN_IF_NULL(listen, "listen address");
    CN_RETURN_IF_NULL(type, "bus type");
    CN_RETURN_IF_NULL(out, "output buffer");
    char pid[PATH_MAX + 32] = "";
    if (pidfile) snprintf(pid, sizeof pid, "  <pidfile>%s</pidfile>\n", pidfile);
    int n = snprintf(out, len,
        "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
        " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
        "<busconfig>\n"
        "  <type>%s</type>\n"
        "  <listen>%s</listen>\n"
        "  <auth>EXTERNAL</auth>\n"
        "%s%s%s"
        "</busconfig>\n", type, listen, pid, policy ? policy : default_policy, limits ? embedded_limits : "");
    if (n < 0 || (size_t)n >= len) {
        cn_set_error("the configuration is %d bytes; the buffer holds %zu", n, len);
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    return NOTIFY_STATUS_OK;
}

/* The embedded bus: private to this user (its directory is 0700). */
static int write_config(const char *dir, char *conf_path, size_t len) {
    char listen[PATH_MAX + 16], pidfile[PATH_MAX + 16], text[4 * PATH_MAX];
    snprintf(listen, sizeof listen, "unix:path=%s/bus", dir);
    snprintf(pidfile, sizeof pidfile, "%s/bus.pid", dir);
    if (CNotify_bus_config(listen, "darwin-notify", pidfile, NULL, 1, text, sizeof text) != NOTIFY_STATUS_OK) {
        errno = ENAMETOOLONG;
        return -1;
    }
    char tmp[PATH_MAX + 32];
    int n = snprintf(conf_path, len, "%s/bus.conf", dir), m = snprintf(tmp, sizeof tmp, "%s/bus.conf.%d", dir, (int)getpid());
    if (n < 0 || (size_t)n >= len || m < 0 || (size_t)m >= sizeof tmp) { errno = ENAMETOOLONG; return -1; }
    FILE *f = fopen(tmp, "we");
    if (!f) return -1;
    fputs(text, f);
    if (fclose(f) != 0 || rename(tmp, conf_path) != 0) { unlink(tmp); return -1; }
    return 0;
}

/* Runs `daemon --fork` detached (its own session, no descriptor of ours but the pipe on 3). */
static int spawn_detached(char *daemon, const char *conf, int pipe_write, pid_t *pid) {
    char conf_arg[PATH_MAX + 32], fd_arg[32];
    snprintf(conf_arg, sizeof conf_arg, "--config-file=%s", conf);
    snprintf(fd_arg, sizeof fd_arg, "--print-address=%d", 3);
    char *argv[] = { daemon, conf_arg, "--fork", fd_arg, "--nosyslog", NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipe_write, 3);
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
    int rc = posix_spawn(pid, daemon, &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    return rc;
}

/* The readiness handshake: the address line on the pipe, within 10 s (generous, and reported). */
static int read_ready_line(int fd) {
    char buf[512];
    size_t got = 0;
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    while (got < sizeof buf - 1 && !memchr(buf, '\n', got)) {
        if (poll(&pfd, 1, 10000) <= 0) break;
        ssize_t r = read(fd, buf + got, sizeof buf - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    return memchr(buf, '\n', got) != NULL;
}

/* Starts dbus-daemon --fork and waits for it to print its address. */
static uint32_t spawn_daemon(const char *dir, const char *sock) {
    char *daemon = find_in_path("dbus-daemon");
    if (!daemon) {
        cn_set_error("dbus-daemon is not installed (not found in PATH); install it with "
                     "'apt-get install dbus-daemon' (Debian/Ubuntu) or 'dnf install dbus-daemon' (Fedora)");
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    char conf[PATH_MAX];
    uint32_t st = NOTIFY_STATUS_SERVER_NOT_FOUND;
    int pipefd[2] = { -1, -1 };
    if (write_config(dir, conf, sizeof conf) != 0) {
        cn_set_error("cannot write %s/bus.conf: %s", dir, strerror(errno));
    } else if (pipe2(pipefd, O_CLOEXEC) != 0) {
        cn_set_error("pipe: %s", strerror(errno));
        st = NOTIFY_STATUS_FAILED;
    } else {
        /* We hold the lock and the socket does not answer: a socket and pid file left here belong
         * to a dead daemon (dbus-daemon refuses to start while its pid file exists). */
        char pidfile[PATH_MAX + 16];
        snprintf(pidfile, sizeof pidfile, "%s/bus.pid", dir);
        unlink(sock);
        unlink(pidfile);
        pid_t pid;
        int rc = spawn_detached(daemon, conf, pipefd[1], &pid);
        close(pipefd[1]);
        int status = 0;
        if (rc != 0) cn_set_error("cannot start %s: %s", daemon, strerror(rc));
        int ready = rc == 0 && read_ready_line(pipefd[0]);
        if (rc == 0) waitpid(pid, &status, 0); /* the --fork parent exits once the daemon is ready */
        close(pipefd[0]);
        if (ready) st = NOTIFY_STATUS_OK;
        else if (rc == 0)
            cn_set_error("%s did not become ready (exit status %d); try: %s --config-file=%s --nofork",
                         daemon, WIFEXITED(status) ? WEXITSTATUS(status) : -1, daemon, conf);
    }
    free(daemon);
    return st;
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
    if (stopped || !cn_socket_answers(path)) unlink(path);
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
    uint32_t st = cn_embedded_paths(dir, sizeof dir, sock, sizeof sock, 1);
    if (st != NOTIFY_STATUS_OK) return st;
    if (!cn_socket_answers(sock)) {
        int lfd = lock_starters(dir);
        if (lfd < 0) return NOTIFY_STATUS_SERVER_NOT_FOUND;
        if (!cn_socket_answers(sock)) { /* nobody else started it */
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
    uint32_t st = cn_embedded_paths(dir, sizeof dir, sock, sizeof sock, 0);
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
    if (stopped == 0 && cn_socket_answers(sock)) {
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
    uint32_t st = cn_embedded_paths(dir, sizeof dir, sock, sizeof sock, 0); /* a query creates nothing */
    if (st != NOTIFY_STATUS_OK) return st;
    copy_out(out_dir, dir_len, dir);
    char addr[PATH_MAX + 32];
    snprintf(addr, sizeof addr, "unix:path=%s", sock);
    copy_out(out_address, out_len, addr);
    if (running) *running = cn_socket_answers(sock);
    return NOTIFY_STATUS_OK;
}

