/*
 * dbus-floor: the raw-libdbus floor for notify-bench. The same signal shape and routing as
 * DarwinNotify (docs/PROTOCOL.md: path /org/darwinnotify, the name's bucket interface
 * org.darwinnotify.Notify.Hxxx, member Post, body (s name, t seq), one exact arg0 rule for the
 * observed name) and no wrapper at all: one thread, blocking dispatch.
 * Usage: dbus-floor echo PING PONG | ping PING PONG N | sink NAME | flood NAME N
 *        | stamp NAME | fanout-post NAME M GAP_MS
 * (bus: the DARWIN_NOTIFY_BUS address)
 *
 * Two more floors with no bus between the processes, the candidates of a same-host fast path
 * (issue 23), with the same ping-pong (echo prints "ready", ping prints one round trip per line):
 *   peer-echo ADDRESS PING PONG | peer-ping ADDRESS PING PONG N
 *       a libdbus peer-to-peer connection (DBusServer at ADDRESS, no Hello, no daemon): the same
 *       Post signals, straight from one process to the other
 *   uds-echo PATH PING PONG | uds-ping PATH PING PONG N
 *       a plain Unix stream socket and a frame of our own (u32 length, the name, NUL, u64 seq):
 *       the least any socket transport can do
 *
 * And the fan-out with nothing of D-Bus or of ours (issue 36), for the fanout suite's reference row:
 *   bare-fanout N M GAP_MS [write | loop | broadcast | doorbell]
 *       N child processes, each blocked in recv on its own SOCK_SEQPACKET pair; M times, GAP_MS
 *       apart, one byte to each; a child stamps CLOCK_MONOTONIC into shared memory as it gets it.
 *       Prints, per post, the ns until the last child had it ("lost" for one a child missed).
 *       With `write`, each child also reports each arrival as the observers of the floor and of
 *       ours do (stamp, bench-stamp): the time formatted as a line and written to a pipe, which is
 *       read only after the last post. With `loop`, each child waits and reads in the shape of an
 *       event loop (ours, libdbus's main loops, GLib's) and writes its line too: a poll over four
 *       descriptors (an eventfd, an idle socket, an epoll set and its socket), then recvmmsg of up
 *       to 32 frames with MSG_DONTWAIT. No library code: what that shape costs by itself.
 *       With `broadcast`, one wake-up for every child instead of a frame to each: the poster adds
 *       one to a counter in shared memory and writes once to an eventfd that each child's epoll set
 *       holds edge-triggered; a child waits in the same shape (its epoll set ready), takes the edge
 *       (epoll_wait, no wait) and reads the counter: what a post costs its poster when one system
 *       call wakes every observer.
 *       With `doorbell`, the frames of `loop` and the wake-up of `broadcast`: the poster sends
 *       its byte to each child as in `loop`, then writes once to the eventfd; a child polls its
 *       pair for a hang-up only (so a frame alone wakes nobody), takes the edge from its epoll set
 *       and reads its frames with recvmmsg: what one wake-up for all costs when the frames still
 *       go each on its own socket (the kernel's credentials and bounds per reader kept).
 */
#define _GNU_SOURCE /* pipe2, F_SETPIPE_SZ */
#include <dbus/dbus.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static DBusConnection *conn;
static const char *want, *reply;
static const char *reply_to_ping; /* the pinger's ping, in the peer and uds floors */
static int seen;
static dbus_uint64_t seq;
/* sink: the end marker, counts, sequence gaps, first and last receipt */
static char end_name[600];
static int ended, stamping;
static long received, gaps;
static dbus_uint64_t last_seq;
static uint64_t first_at, last_at;
static uint64_t now_ns(void);

/* User and system time of this process so far, µs. */
static uint64_t cpu_us(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u + (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* The bucket interface of a name, per docs/PROTOCOL.md (FNV-1a 32, low 12 bits, 3 hex digits). */
static void bucket(const char *name, char out[32]) {
    uint32_t h = 2166136261u;
    for (const char *p = name; *p; p++) { h ^= (unsigned char)*p; h *= 16777619u; }
    snprintf(out, 32, "org.darwinnotify.Notify.H%03x", h & 0xfffu);
}

static void send_post(const char *name, int flush) {
    char iface[32];
    bucket(name, iface);
    DBusMessage *m = dbus_message_new_signal("/org/darwinnotify", iface, "Post");
    seq++;
    dbus_message_append_args(m, DBUS_TYPE_STRING, &name, DBUS_TYPE_UINT64, &seq, DBUS_TYPE_INVALID);
    dbus_connection_send(conn, m, NULL);
    dbus_message_unref(m);
    if (flush) dbus_connection_flush(conn);
}

static void post(const char *name) { send_post(name, 1); }

static DBusHandlerResult filter(DBusConnection *c, DBusMessage *msg, void *data) {
    (void)c; (void)data;
    const char *name = NULL;
    if (!dbus_message_has_member(msg, "Post") || !dbus_message_has_path(msg, "/org/darwinnotify"))
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    DBusMessageIter it;
    if (!dbus_message_iter_init(msg, &it) || dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_STRING)
        return DBUS_HANDLER_RESULT_HANDLED;
    dbus_message_iter_get_basic(&it, &name);
    if (end_name[0] && strcmp(name, end_name) == 0) {
        ended = 1;
    } else if (strcmp(name, want) == 0) {
        seen++;
        if (stamping) printf("%llu\n", (unsigned long long)now_ns()), fflush(stdout);
        if (reply) post(reply);
        if (end_name[0]) {
            uint64_t t = now_ns();
            if (!received++) first_at = t;
            last_at = t;
            dbus_uint64_t s = 0;
            if (dbus_message_iter_next(&it) && dbus_message_iter_get_arg_type(&it) == DBUS_TYPE_UINT64) {
                dbus_message_iter_get_basic(&it, &s);
                if (last_seq && s > last_seq + 1) gaps += (long)(s - last_seq - 1);
                last_seq = s;
            }
        }
    }
    return DBUS_HANDLER_RESULT_HANDLED;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The ping side of every floor: `n` round trips of post(ping) → pong, printed in ns. `round_trip`
 * posts and waits for the pong. */
static int print_round_trips(long n, int (*round_trip)(void *), void *context) {
    uint64_t *rtt = calloc((size_t)n, sizeof *rtt);
    if (!rtt) return 1;
    for (long i = 0; i < n; i++) {
        uint64_t t0 = now_ns();
        if (round_trip(context) != 0) return 1;
        rtt[i] = now_ns() - t0;
    }
    for (long i = 0; i < n; i++) printf("%llu\n", (unsigned long long)rtt[i]);
    free(rtt);
    return 0;
}

/* --- libdbus peer to peer --------------------------------------------------------------------- */

static DBusConnection *accepted;
static DBusWatch *server_watch;

static void on_new_connection(DBusServer *server, DBusConnection *c, void *data) {
    (void)server; (void)data;
    if (!accepted) accepted = dbus_connection_ref(c);
}
static dbus_bool_t add_server_watch(DBusWatch *w, void *data) { (void)data; if (dbus_watch_get_enabled(w)) server_watch = w; return TRUE; }
static void remove_server_watch(DBusWatch *w, void *data) { (void)data; if (server_watch == w) server_watch = NULL; }

static int peer_round_trip(void *context) {
    (void)context;
    int before = seen;
    post(reply_to_ping);
    while (seen == before && dbus_connection_read_write_dispatch(conn, -1)) {}
    return seen == before;
}

static int peer_main(int argc, char **argv) {
    int echo = strcmp(argv[1], "peer-echo") == 0;
    if (argc < (echo ? 5 : 6)) return 64;
    DBusError err;
    dbus_error_init(&err);
    if (echo) {
        DBusServer *server = dbus_server_listen(argv[2], &err);
        if (!server) { fprintf(stderr, "dbus-floor: listen: %s\n", err.message); return 1; }
        dbus_server_set_new_connection_function(server, on_new_connection, NULL, NULL);
        dbus_server_set_watch_functions(server, add_server_watch, remove_server_watch, NULL, NULL, NULL);
        printf("ready\n");
        fflush(stdout);
        while (!accepted && server_watch) { /* one client: the pinger */
            struct pollfd p = { dbus_watch_get_unix_fd(server_watch), POLLIN, 0 };
            if (poll(&p, 1, -1) < 0 && errno != EINTR) return 1;
            dbus_watch_handle(server_watch, DBUS_WATCH_READABLE);
        }
        conn = accepted;
        want = argv[3];
        reply = argv[4];
        dbus_connection_add_filter(conn, filter, NULL, NULL);
        while (dbus_connection_read_write_dispatch(conn, -1)) {}
        dbus_server_disconnect(server);
        dbus_server_unref(server);
    } else {
        conn = dbus_connection_open_private(argv[2], &err);
        if (!conn) { fprintf(stderr, "dbus-floor: %s\n", err.message); return 1; }
        reply_to_ping = argv[3];
        want = argv[4];
        dbus_connection_add_filter(conn, filter, NULL, NULL);
        if (print_round_trips(atol(argv[5]), peer_round_trip, NULL) != 0) return 1;
    }
    dbus_connection_close(conn);
    dbus_connection_unref(conn);
    return 0;
}

/* --- a plain Unix socket -------------------------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t len) {
    for (const char *p = buf; len > 0;) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t len) {
    for (char *p = buf; len > 0;) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* One frame: u32 length of what follows, the name, NUL, u64 seq. */
static int uds_send(int fd, const char *name) {
    char frame[4 + 600 + 8];
    uint32_t len = (uint32_t)strlen(name) + 1 + 8;
    if (len > 600 + 8) return -1;
    seq++;
    memcpy(frame, &len, 4);
    memcpy(frame + 4, name, len - 8);
    memcpy(frame + 4 + len - 8, &seq, 8);
    return write_all(fd, frame, 4 + len);
}

/* Reads one frame; returns 1 if it carries `name`, 0 if another, -1 at the end. */
static int uds_receive(int fd, const char *name) {
    char body[600 + 8];
    uint32_t len;
    if (read_all(fd, &len, 4) != 0 || len < 9 || len > sizeof body || read_all(fd, body, len) != 0) return -1;
    body[len - 9] = '\0';
    return strcmp(body, name) == 0;
}

static int uds_fd;
static int uds_round_trip(void *context) {
    (void)context;
    if (uds_send(uds_fd, reply_to_ping) != 0) return 1;
    for (int r; (r = uds_receive(uds_fd, want)) != 1;) if (r < 0) return 1;
    return 0;
}

static int uds_main(int argc, char **argv) {
    int echo = strcmp(argv[1], "uds-echo") == 0;
    if (argc < (echo ? 5 : 6)) return 64;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(argv[2]) >= sizeof sa.sun_path) return 64;
    strcpy(sa.sun_path, argv[2]);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 1;
    if (echo) {
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 1) != 0) { perror("dbus-floor: uds"); return 1; }
        printf("ready\n");
        fflush(stdout);
        int c = accept(fd, NULL, NULL);
        if (c < 0) return 1;
        for (int r; (r = uds_receive(c, argv[3])) >= 0;)
            if (r == 1 && uds_send(c, argv[4]) != 0) break;
        close(c);
        unlink(argv[2]);
    } else {
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) { perror("dbus-floor: uds"); return 1; }
        uds_fd = fd;
        reply_to_ping = argv[3];
        want = argv[4];
        if (print_round_trips(atol(argv[5]), uds_round_trip, NULL) != 0) return 1;
    }
    close(fd);
    return 0;
}

/* bare-fanout's `loop`: the descriptors an event loop polls besides the connection (a wake
 * eventfd, a second connection, an epoll set), all idle; 0 when made. */
static int loop_shape(int fd, struct pollfd out[4]) {
    int other[2];
    int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), set = epoll_create1(EPOLL_CLOEXEC);
    if (wake < 0 || set < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, other) != 0) return -1;
    int fds[4] = { wake, other[0], set, fd };
    for (int i = 0; i < 4; i++) out[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
    return 0;
}

/* `broadcast`'s round in that shape: the poll, the edge taken from the epoll set, the counter
 * read: how many posts since *seen, 0 at the end (the pair hung up). */
static int broadcast_receive(struct pollfd fds[4], const _Atomic uint64_t *posted, uint64_t *seen) {
    for (;;) {
        if (poll(fds, 4, -1) < 0 && errno != EINTR) return 0;
        struct epoll_event ev[4];
        if (fds[2].revents && epoll_wait(fds[2].fd, ev, 4, 0) < 0 && errno != EINTR) return 0;
        uint64_t now = atomic_load_explicit(posted, memory_order_acquire);
        if (now != *seen) { /* all of them: the edge that told of the rest is taken (at most M) */
            int got = (int)(now - *seen);
            *seen = now;
            return got;
        }
        /* Nothing new: the edge of a post read with the one before, or the end. The pair carries
         * nothing after "ready", so anything on it is its hang-up, once every post was counted. */
        if (fds[3].revents) return 0;
    }
}

/* Every frame there is on fd (at most 32): how many, 0 at the end, -1 for none yet. */
static int loop_frames(int fd) {
    static unsigned char frames[32][540];
    struct iovec iov[32];
    struct mmsghdr msgs[32];
    for (int i = 0; i < 32; i++) {
        iov[i] = (struct iovec){ frames[i], sizeof frames[i] };
        msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
    }
    int got = recvmmsg(fd, msgs, 32, MSG_DONTWAIT | MSG_TRUNC, NULL);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return -1;
    return got > 0 && msgs[0].msg_len > 0 ? got : 0;
}

/* `doorbell`'s round: the poll (the pair for its hang-up only), the edge taken from the epoll
 * set, then every frame there is: how many came, 0 at the end. */
static int doorbell_receive(struct pollfd fds[4]) {
    static int full; /* the last read filled its batch: the rest came with the edge already taken */
    if (full) {
        int got = loop_frames(fds[3].fd);
        full = got == 32;
        if (got != -1) return got;
    }
    for (;;) {
        if (poll(fds, 4, -1) < 0 && errno != EINTR) return 0;
        struct epoll_event ev[4];
        if (fds[2].revents && epoll_wait(fds[2].fd, ev, 4, 0) < 0 && errno != EINTR) return 0;
        if (!fds[2].revents && !fds[3].revents) continue;
        int got = loop_frames(fds[3].fd);
        full = got == 32;
        if (got != -1) return got;
        if (fds[3].revents) return 0; /* a hang-up with no frame left */
    }
}

/* One round of that loop: the poll, then every frame there is (at most 32): how many came, 0 at
 * the end. */
static int loop_receive(struct pollfd fds[4]) {
    for (;;) {
        if (poll(fds, 4, -1) < 0 && errno != EINTR) return 0;
        if (!fds[3].revents) continue; /* an error or a hang-up is read too: recvmmsg says which */
        int got = loop_frames(fds[3].fd);
        if (got != -1) return got;
    }
}

/* bare-fanout N M GAP_MS (above). Each child says it is ready with a byte on its pair (a
 * handshake, no sleep); each exits when its pair closes, and is waited for. */
static int bare_fanout(int argc, char **argv) {
    int doorbell = argc == 6 && strcmp(argv[5], "doorbell") == 0;
    int broadcasting = argc == 6 && strcmp(argv[5], "broadcast") == 0;
    int ringing = broadcasting || doorbell; /* the eventfd wakes every child */
    int looping = ringing || (argc == 6 && strcmp(argv[5], "loop") == 0);
    int writing = looping || (argc == 6 && strcmp(argv[5], "write") == 0);
    if (argc < 5 || argc > 6 || (argc == 6 && !writing)) {
        fprintf(stderr, "usage: dbus-floor bare-fanout N M GAP_MS [write | loop | broadcast | doorbell]\n");
        return 64;
    }
    long n = atol(argv[2]), m = atol(argv[3]), gap = atol(argv[4]);
    if (n < 1 || n > 1000 || m < 1 || m > 10000 || gap < 0 || gap > 10000) {
        fprintf(stderr, "usage: dbus-floor bare-fanout N (1-1000) M (1-10000) GAP_MS (0-10000) [write | loop | broadcast | doorbell]\n");
        return 64;
    }
    size_t bytes = (size_t)n * (size_t)m * sizeof(uint64_t);
    uint64_t *stamps = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int *fds = calloc((size_t)n, sizeof *fds), *readers = calloc((size_t)n, sizeof *readers);
    pid_t *kids = calloc((size_t)n, sizeof *kids);
    /* `broadcast`: the posts so far, and the eventfd every child's epoll set holds. */
    _Atomic uint64_t *posted = mmap(NULL, sizeof *posted, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int wake_all = ringing ? eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK) : -1;
    if (stamps == MAP_FAILED || posted == MAP_FAILED || (ringing && wake_all < 0) || !fds || !readers || !kids) {
        fprintf(stderr, "dbus-floor: bare-fanout: %s\n", strerror(errno));
        return 1;
    }
    long started = 0;
    int failed = 0;
    for (; started < n; started++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) { failed = 1; break; }
        /* `write`: the child's lines, never read while posting (one per post, at most 21 bytes
         * each: room made for all of them, so no write ever waits). */
        int lines[2] = { -1, -1 };
        if (writing && (pipe2(lines, O_CLOEXEC) != 0 || fcntl(lines[1], F_SETPIPE_SZ, (int)(m * 24 + 4096)) < 0)) {
            close(sv[0]); close(sv[1]);
            if (lines[0] >= 0) { close(lines[0]); close(lines[1]); }
            failed = 1;
            break;
        }
        pid_t pid = fork();
        if (pid < 0) {
            close(sv[0]); close(sv[1]);
            if (writing) { close(lines[0]); close(lines[1]); }
            failed = 1;
            break;
        }
        if (pid == 0) {
            for (long k = 0; k < started; k++) {
                close(fds[k]);
                if (writing) close(readers[k]);
            }
            close(sv[0]);
            if (writing) close(lines[0]);
            char b = 'r';
            struct pollfd shape[4];
            if (looping && loop_shape(sv[1], shape) != 0) _exit(1);
            struct epoll_event edge = { .events = EPOLLIN | EPOLLET };
            if (ringing && epoll_ctl(shape[2].fd, EPOLL_CTL_ADD, wake_all, &edge) != 0) _exit(1);
            if (doorbell) shape[3].events = 0; /* a frame alone wakes nobody: the eventfd does */
            if (send(sv[1], &b, 1, 0) != 1) _exit(1);
            uint64_t seen = 0;
            for (long post = 0; post < m;) {
                int got = broadcasting ? broadcast_receive(shape, posted, &seen)
                          : doorbell   ? doorbell_receive(shape)
                          : looping    ? loop_receive(shape)
                                       : recv(sv[1], &b, 1, 0) == 1;
                if (got <= 0) _exit(0);
                uint64_t t = now_ns();
                for (int k = 0; k < got && post < m; k++, post++) { /* each post a line, as an observer's callback */
                    if (writing) {
                        char line[32];
                        int len = snprintf(line, sizeof line, "%llu\n", (unsigned long long)t);
                        if (write(lines[1], line, (size_t)len) != len) _exit(1);
                    }
                    stamps[post * n + started] = t;
                }
            }
            _exit(0);
        }
        if (writing) { close(lines[1]); readers[started] = lines[0]; }
        close(sv[1]);
        fds[started] = sv[0];
        kids[started] = pid;
    }
    for (long k = 0; k < started && !failed; k++) {
        char b;
        if (recv(fds[k], &b, 1, 0) != 1) failed = 1; /* ready */
    }
    uint64_t *sent = calloc((size_t)m, sizeof *sent);
    for (long post = 0; post < m && !failed && sent; post++) {
        sent[post] = now_ns();
        if (broadcasting) {
            uint64_t one = 1;
            atomic_fetch_add_explicit(posted, 1, memory_order_release);
            if (write(wake_all, &one, sizeof one) != sizeof one) failed = 1;
        }
        for (long k = 0; k < n && !broadcasting; k++)
            if (send(fds[k], "p", 1, MSG_NOSIGNAL) != 1) failed = 1;
        if (doorbell) { /* after every frame is in place */
            uint64_t one = 1;
            if (write(wake_all, &one, sizeof one) != sizeof one) failed = 1;
        }
        struct timespec ts = { gap / 1000, (gap % 1000) * 1000000L };
        nanosleep(&ts, NULL); /* pacing between posts, not synchronisation */
    }
    for (long k = 0; k < started; k++) close(fds[k]);
    for (long k = 0; k < started; k++) waitpid(kids[k], NULL, 0);
    for (long k = 0; writing && k < started; k++) close(readers[k]); /* the lines: their cost was the point */
    if (failed || !sent) {
        fprintf(stderr, "dbus-floor: bare-fanout: %s\n", strerror(errno));
        return 1;
    }
    for (long post = 0; post < m; post++) {
        uint64_t last = 0;
        int lost = 0;
        for (long k = 0; k < n; k++) {
            uint64_t t = stamps[post * n + k];
            if (!t) lost = 1;
            else if (t > last) last = t;
        }
        if (lost) printf("lost\n");
        else printf("%llu\n", (unsigned long long)(last - sent[post]));
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "bare-fanout") == 0) return bare_fanout(argc, argv);
    if (argc >= 2 && strncmp(argv[1], "peer-", 5) == 0) return peer_main(argc, argv);
    if (argc >= 2 && strncmp(argv[1], "uds-", 4) == 0) return uds_main(argc, argv);
    const char *address = getenv("DARWIN_NOTIFY_BUS");
    if (argc < 3 || !address) {
        fprintf(stderr, "usage: DARWIN_NOTIFY_BUS=ADDRESS dbus-floor echo PING PONG | ping PING PONG N | sink NAME | flood NAME N\n");
        return 64;
    }
    DBusError err;
    dbus_error_init(&err);
    conn = dbus_connection_open_private(address, &err);
    if (!conn || !dbus_bus_register(conn, &err)) {
        fprintf(stderr, "dbus-floor: %s\n", err.message ? err.message : "cannot connect");
        return 1;
    }
    dbus_connection_set_exit_on_disconnect(conn, FALSE);
    const char *role = argv[1];
    int echo = strcmp(role, "echo") == 0, sink = strcmp(role, "sink") == 0, flood = strcmp(role, "flood") == 0;
    int stamp = strcmp(role, "stamp") == 0, fanout = strcmp(role, "fanout-post") == 0;
    const char *observed = (echo || sink || stamp) ? argv[2] : (flood || fanout) ? NULL : argv[3];
    char iface[32], rule[1024];
    if (observed) {
        bucket(observed, iface);
        snprintf(rule, sizeof rule, "type='signal',path='/org/darwinnotify',interface='%s',member='Post',arg0='%s'", iface, observed);
        dbus_bus_add_match(conn, rule, &err);
        if (sink) {
            snprintf(end_name, sizeof end_name, "%s.end", observed);
            bucket(end_name, iface);
            snprintf(rule, sizeof rule, "type='signal',path='/org/darwinnotify',interface='%s',member='Post',arg0='%s'", iface, end_name);
            dbus_bus_add_match(conn, rule, &err);
        }
        if (dbus_error_is_set(&err)) {
            fprintf(stderr, "dbus-floor: AddMatch: %s\n", err.message);
            return 1;
        }
    }
    dbus_connection_add_filter(conn, filter, NULL, NULL);
    if (echo) {
        want = argv[2];
        reply = argv[3];
        printf("ready\n");
        fflush(stdout);
        while (dbus_connection_read_write_dispatch(conn, -1)) {}
    } else if (stamp) {
        want = argv[2];
        stamping = 1;
        printf("ready\n");
        fflush(stdout);
        while (dbus_connection_read_write_dispatch(conn, -1)) {}
    } else if (fanout) {
        long m = argc > 3 ? atol(argv[3]) : 10, gap = argc > 4 ? atol(argv[4]) : 100;
        for (long i = 0; i < m; i++) {
            uint64_t t = now_ns();
            post(argv[2]);
            printf("%llu\n", (unsigned long long)t);
            fflush(stdout);
            struct timespec ts = { gap / 1000, (gap % 1000) * 1000000L };
            nanosleep(&ts, NULL); /* pacing between rounds, not synchronisation */
        }
    } else if (sink) {
        want = argv[2];
        printf("ready\n");
        fflush(stdout);
        long before = -1;
        uint64_t progress_at = now_ns();
        while (!ended && dbus_connection_read_write_dispatch(conn, 1000)) {
            if (received != before) { before = received; progress_at = now_ns(); }
            else if (now_ns() - progress_at > 5000000000ull) break; /* 5 s with nothing new */
        }
        printf("received=%ld gaps=%ld elapsed_ns=%llu cpu_us=%llu\n", received, gaps, (unsigned long long)(last_at - first_at),
               (unsigned long long)cpu_us());
    } else if (flood) {
        char end[600];
        snprintf(end, sizeof end, "%s.end", argv[2]);
        for (long i = 0, n = atol(argv[3]); i < n; i++) send_post(argv[2], 0); /* as fast as it goes */
        post(end);
        printf("cpu_us=%llu\n", (unsigned long long)cpu_us());
    } else {
        want = argv[3];
        long n = argc > 4 ? atol(argv[4]) : 1000;
        uint64_t *rtt = calloc((size_t)n, sizeof *rtt);
        for (long i = 0; i < n; i++) {
            int before = seen;
            uint64_t t0 = now_ns();
            post(argv[2]);
            while (seen == before && dbus_connection_read_write_dispatch(conn, -1)) {}
            rtt[i] = now_ns() - t0;
        }
        for (long i = 0; i < n; i++) printf("%llu\n", (unsigned long long)rtt[i]);
    }
    dbus_connection_close(conn);
    dbus_connection_unref(conn);
    return 0;
}
