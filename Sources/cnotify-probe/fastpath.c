/*
 * Probe roles for the fast-path tests (docs/PROTOCOL.md "Fast path"): a center driven line by line
 * from stdin (fp-peer), and hostile peers written from PROTOCOL.md alone with raw libdbus and
 * sockets: one that announces any token it is given (fp-announce), one that accepts connections
 * and never reads (fp-deaf), and one that connects to an observer's endpoint and sends frames of
 * its choosing, under its own name or another's (fp-forge). One line per event on stdout.
 */
#include <dbus/dbus.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <darwin_notify.h>
#include "probe.h"

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- fp-peer: a center driven from stdin ---- */

/* slow: each delivery takes this long first (µs, a busy wait), as a slower observer's do. */
static long peer_slow_us;
static void take_slow(void) {
    for (uint64_t until = now_us() + (uint64_t)peer_slow_us; peer_slow_us > 0 && now_us() < until;) {}
}

static void peer_cb(CNotify_center *c, void *observer, const char *name, const void *object, const void *info) {
    (void)observer; (void)object; (void)info;
    take_slow();
    CNotify_post_info post;
    if (CNotify_center_current_post(c, &post) == NOTIFY_STATUS_OK && post.has_sequence)
        out("got %s %llu", name, (unsigned long long)post.sequence);
    else
        out("got %s -", name);
}

/* observe-counted: as peer_cb, with the counters the callback itself reads: its own delivery is
 * counted before it runs, so whoever sees this line and then asks for stats sees it counted too. */
static void counted_cb(CNotify_center *c, void *observer, const char *name, const void *object, const void *info) {
    (void)observer; (void)object; (void)info;
    CNotify_fast_path_stats f;
    CNotify_stats s;
    CNotify_center_get_fast_path_stats(c, &f);
    CNotify_center_get_stats(c, &s);
    out("got %s delivered=%llu fast_delivered=%llu", name, (unsigned long long)s.delivered, (unsigned long long)f.delivered);
}

/* count: deliveries counted, not printed (a line each would slow the observer to its reader's
 * pace); "counted NAME N first_wrong=W" once N came, W the first out of order (0: none). */
static long count_expect, count_got, count_first_wrong;
static void count_cb(CNotify_center *c, void *observer, const char *name, const void *object, const void *info) {
    (void)observer; (void)object; (void)info;
    take_slow();
    CNotify_post_info post;
    int numbered = CNotify_center_current_post(c, &post) == NOTIFY_STATUS_OK && post.has_sequence;
    count_got++;
    if (!count_first_wrong && (!numbered || post.sequence != (uint64_t)count_got)) count_first_wrong = count_got;
    if (count_got == count_expect) out("counted %s %ld first_wrong=%ld", name, count_got, count_first_wrong);
}

/* relay: each delivery of the relayed name posts another from inside the callback (loop thread). */
static char relay_to[600];
static void relay_cb(CNotify_center *c, void *observer, const char *name, const void *object, const void *info) {
    (void)observer; (void)object; (void)info;
    CNotify_post_info post;
    int numbered = CNotify_center_current_post(c, &post) == NOTIFY_STATUS_OK && post.has_sequence;
    uint32_t st = CNotify_center_post(c, relay_to);
    out("relayed %s %llu status=%u", name, numbered ? (unsigned long long)post.sequence : 0ull, (unsigned)st);
}

static void print_stats(CNotify_center *c) {
    CNotify_fast_path_stats f;
    CNotify_fast_path_guards g;
    CNotify_stats s;
    CNotify_center_get_fast_path_stats(c, &f);
    CNotify_center_get_fast_path_guards(c, &g);
    CNotify_center_get_stats(c, &s);
    out("stats enabled=%d peers=%llu sent=%llu fast_delivered=%llu duplicates=%llu fallbacks=%llu refused=%llu "
        "bus_skipped=%llu delivered=%llu gaps=%llu rejected=%llu reconnects=%llu unverified_closed=%llu "
        "credential_asks=%llu answers=%llu answers_coalesced=%llu bus_kept=%llu drained=%llu",
        f.enabled, (unsigned long long)f.peers, (unsigned long long)f.sent, (unsigned long long)f.delivered,
        (unsigned long long)f.duplicates, (unsigned long long)f.fallbacks, (unsigned long long)f.refused,
        (unsigned long long)f.bus_skipped,
        (unsigned long long)s.delivered, (unsigned long long)s.gaps, (unsigned long long)s.rejected,
        (unsigned long long)s.reconnects, (unsigned long long)g.unverified_closed,
        (unsigned long long)g.credential_asks, (unsigned long long)g.answers, (unsigned long long)g.answers_coalesced,
        (unsigned long long)g.bus_kept, (unsigned long long)g.drained);
}

/* fp-peer: commands on stdin, one per line, each answered on stdout:
 *   observe NAME          -> "observing NAME"; then "got NAME SEQ" per delivery
 *   observe-ns NS         -> "observing-ns NS"; then "got NAME SEQ" per delivery of a name under NS
 *   observe-counted NAME  -> "observing-counted NAME"; then "got NAME delivered=D fast_delivered=F" per
 *                            delivery, D and F the center's counters as read inside the callback
 *   slow US               -> "slow US"; each delivery after it first takes US µs (a busy wait)
 *   count NAME N          -> "counting NAME N"; observes NAME (one name at most), printing nothing per
 *                            delivery; "counted NAME N first_wrong=W" once N came (W: the first
 *                            delivery whose number was not its place, 0 none)
 *   relay A B             -> "relaying A B"; then per delivery of A, B is posted inside the callback
 *                            and "relayed A SEQ status=S" printed
 *   post NAME N           -> posts N times; "posted NAME N us=ELAPSED"
 *   alternate A B N K     -> posts A, B, A, B ... N pairs, the fast path off and on again every K
 *                            pairs; "alternated N"
 *   rotate N A B ...      -> posts A, B, ... in turn, N rounds; "rotated N"
 *   fast on|off|direct    -> "fast on|off|direct"
 *   peers N               -> waits (posting nothing) up to 10 s for N connected peers; "peers P"
 *   stats                 -> "stats enabled=… peers=… sent=… fast_delivered=… duplicates=…
 *                            fallbacks=… refused=… delivered=… gaps=… rejected=… reconnects=…"
 * Ends when stdin closes. */
int cmd_fp_peer(int argc, char **argv) {
    (void)argc; (void)argv;
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    char line[1024];
    out("ready");
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        char a[600] = "", b[600] = "";
        long n = 0, k = 0;
        if (sscanf(line, "count %599s %ld", a, &n) == 2) {
            count_expect = n;
            uint32_t st = CNotify_center_add_observer(c, c, count_cb, a);
            if (st) return fail("add_observer", st);
            out("counting %s %ld", a, n);
        } else if (sscanf(line, "slow %ld", &n) == 1) {
            peer_slow_us = n;
            out("slow %ld", n);
        } else if (sscanf(line, "observe-counted %599s", a) == 1) {
            uint32_t st = CNotify_center_add_observer(c, c, counted_cb, a);
            if (st) return fail("add_observer", st);
            out("observing-counted %s", a);
        } else if (sscanf(line, "observe-ns %599s", a) == 1) {
            uint32_t st = CNotify_center_add_namespace_observer(c, c, peer_cb, a);
            if (st) return fail("add_namespace_observer", st);
            out("observing-ns %s", a);
        } else if (sscanf(line, "relay %599s %599s", a, b) == 2) {
            snprintf(relay_to, sizeof relay_to, "%s", b);
            uint32_t st = CNotify_center_add_observer(c, c, relay_cb, a);
            if (st) return fail("add_observer", st);
            out("relaying %s %s", a, b);
        } else if (sscanf(line, "observe %599s", a) == 1) {
            uint32_t st = CNotify_center_add_observer(c, c, peer_cb, a);
            if (st) return fail("add_observer", st);
            out("observing %s", a);
        } else if (sscanf(line, "post %599s %ld", a, &n) == 2) {
            uint64_t t0 = now_us();
            for (long i = 0; i < n; i++) {
                uint32_t st = CNotify_center_post(c, a);
                if (st) return fail("post", st);
            }
            CNotify_center_flush(c, 5000);
            out("posted %s %ld us=%llu", a, n, (unsigned long long)(now_us() - t0));
        } else if (sscanf(line, "alternate %599s %599s %ld %ld", a, b, &n, &k) == 4) {
            for (long i = 0; i < n; i++) {
                if (k > 0 && i % k == 0) CNotify_center_set_fast_path(c, (int)((i / k) % 2 == 0));
                if (CNotify_center_post(c, a) || CNotify_center_post(c, b)) return fail("post", NOTIFY_STATUS_FAILED);
            }
            CNotify_center_set_fast_path(c, 1);
            CNotify_center_flush(c, 5000);
            out("alternated %ld", n);
        } else if (sscanf(line, "rotate %ld", &n) == 1) {
            char *names[16];
            int count = 0;
            strtok(line, " ");
            strtok(NULL, " "); /* "rotate" and N */
            for (char *t; count < 16 && (t = strtok(NULL, " "));) names[count++] = t;
            for (long i = 0; i < n; i++)
                for (int j = 0; j < count; j++)
                    if (CNotify_center_post(c, names[j])) return fail("post", NOTIFY_STATUS_FAILED);
            CNotify_center_flush(c, 5000);
            out("rotated %ld", n);
        } else if (sscanf(line, "fast %599s", a) == 1) {
            CNotify_center_set_fast_path(c, strcmp(a, "on") == 0 ? CNOTIFY_FAST_PATH_ON
                                            : strcmp(a, "direct") == 0 ? CNOTIFY_FAST_PATH_DIRECT : CNOTIFY_FAST_PATH_OFF);
            out("fast %s", a);
        } else if (sscanf(line, "peers %ld", &n) == 1) {
            CNotify_fast_path_stats f = {0};
            for (int i = 0; i < 1000; i++) {
                CNotify_center_get_fast_path_stats(c, &f);
                if ((long)f.peers >= n) break;
                struct timespec ts = { 0, 10000000 }; /* polling a counter the loop thread sets */
                nanosleep(&ts, NULL);
            }
            out("peers %llu", (unsigned long long)f.peers);
        } else if (strcmp(line, "stats") == 0) {
            print_stats(c);
        } else {
            out("unknown command: %s", line);
        }
    }
    return 0;
}

/* ---- fp-swarm: many observer processes ---- */

/* What one observer of the swarm tells its parent, in one write (under PIPE_BUF: never split). */
typedef struct swarm_record {
    int index, ready;                   /* ready 1: it observes; 0: its result */
    long got, first_wrong;              /* posts delivered; the first out of order (-1: none) */
    unsigned long long direct;          /* of them, by the fast path */
} swarm_record;

static long swarm_got, swarm_first_wrong = -1, swarm_expect;
static pthread_mutex_t swarm_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t swarm_cond = PTHREAD_COND_INITIALIZER;

static void swarm_cb(CNotify_center *c, void *observer, const char *name, const void *object, const void *info) {
    (void)observer; (void)name; (void)object; (void)info;
    CNotify_post_info post;
    int numbered = CNotify_center_current_post(c, &post) == NOTIFY_STATUS_OK && post.has_sequence;
    pthread_mutex_lock(&swarm_lock);
    swarm_got++;
    if (swarm_first_wrong < 0 && (!numbered || post.sequence != (uint64_t)swarm_got)) swarm_first_wrong = swarm_got;
    pthread_cond_broadcast(&swarm_cond);
    pthread_mutex_unlock(&swarm_lock);
}

/* One observer: observes NAME until it has EXPECT posts (or 60 s), reports, exits. */
static int swarm_member(int index, int out, const char *name) {
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    if (CNotify_center_add_observer(c, c, swarm_cb, name) != NOTIFY_STATUS_OK) return 1;
    swarm_record r = { index, 1, 0, -1, 0 };
    if (write(out, &r, sizeof r) != (ssize_t)sizeof r) return 1;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    pthread_mutex_lock(&swarm_lock);
    while (swarm_got < swarm_expect && pthread_cond_timedwait(&swarm_cond, &swarm_lock, &deadline) != ETIMEDOUT) {}
    r.ready = 0;
    r.got = swarm_got;
    r.first_wrong = swarm_first_wrong;
    pthread_mutex_unlock(&swarm_lock);
    CNotify_fast_path_stats f;
    CNotify_center_get_fast_path_stats(c, &f);
    r.direct = (unsigned long long)f.delivered;
    if (write(out, &r, sizeof r) != (ssize_t)sizeof r) return 1;
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {} /* connected until the swarm's stdin closes */
    return 0;
}

/* fp-swarm N NAME EXPECT: N observer processes, forked before any center exists (a connection
 * never crosses fork), each observing NAME until it has EXPECT posts of it, in order numbered
 * 1..EXPECT from one poster (or 60 s). Prints "ready N" once all observe, then a line "bad I got=G
 * first_wrong=W" per observer that did not get exactly that, and "done ok=K of N direct=D"
 * (D: posts delivered by the fast path, over all). The observers stay (connected, observing)
 * until its stdin closes, and share its process group. */
int cmd_fp_swarm(int argc, char **argv) {
    if (argc < 3) return fail("usage: fp-swarm N NAME EXPECT", NOTIFY_STATUS_INVALID_REQUEST);
    int n = atoi(argv[0]);
    swarm_expect = atol(argv[2]);
    int pipefd[2];
    if (n <= 0 || swarm_expect <= 0 || pipe(pipefd) != 0) return fail("fp-swarm: bad arguments or no pipe", NOTIFY_STATUS_FAILED);
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) return fail("fp-swarm: fork", NOTIFY_STATUS_FAILED);
        if (pid == 0) {
            close(pipefd[0]);
            _exit(swarm_member(i, pipefd[1], argv[1]));
        }
    }
    close(pipefd[1]);
    int ready = 0, results = 0, ok = 0;
    unsigned long long direct = 0;
    swarm_record r;
    while (results < n && read(pipefd[0], &r, sizeof r) == (ssize_t)sizeof r) {
        if (r.ready) {
            if (++ready == n) out("ready %d", n);
            continue;
        }
        results++;
        direct += r.direct;
        if (r.got == swarm_expect && r.first_wrong < 0) ok++;
        else out("bad %d got=%ld first_wrong=%ld", r.index, r.got, r.first_wrong);
    }
    out("done ok=%d of %d direct=%llu", ok, n, direct);
    while (waitpid(-1, NULL, 0) > 0) {} /* they leave once our stdin closes */
    return 0;
}

/* ---- hostile peers: raw libdbus and sockets, from PROTOCOL.md ---- */

/* Answers each Query with `token` until stdin closes, running `each` (may be NULL) per round. */
static void serve(DBusConnection *conn, const char *token, void (*each)(void *), void *arg) {
    dbus_bus_add_match(conn, "type='signal',interface='org.darwinnotify.FastPath',member='Query'", NULL);
    dbus_connection_flush(conn);
    for (;;) {
        struct pollfd p = { .fd = 0, .events = POLLIN };
        if (poll(&p, 1, 0) > 0) {
            char buf[64];
            if (read(0, buf, sizeof buf) <= 0) return;
        }
        dbus_connection_read_write(conn, 20);
        DBusMessage *m;
        while ((m = dbus_connection_pop_message(conn))) {
            if (dbus_message_is_signal(m, "org.darwinnotify.FastPath", "Query")) fp_send_endpoint(conn, token, 1, dbus_message_get_sender(m));
            dbus_message_unref(m);
        }
        if (each) each(arg);
    }
}

/* fp-announce TOKEN: announces TOKEN (any string: a path, an abstract name; "steal": the token of
 * the first endpoint another process announces) for every bucket; "ready UNIQUE". */
int cmd_fp_announce(int argc, char **argv) {
    if (argc < 1) return fail("usage: fp-announce TOKEN", NOTIFY_STATUS_INVALID_REQUEST);
    DBusConnection *conn = raw_connect();
    if (!conn) return fail("connect", NOTIFY_STATUS_SERVER_NOT_FOUND);
    char token[64], owner[256];
    snprintf(token, sizeof token, "%s", argv[0]);
    if (strcmp(argv[0], "steal") == 0 && fp_find_endpoint(conn, token, owner) != 0) return fail("nothing to steal", NOTIFY_STATUS_FAILED);
    fp_send_endpoint(conn, token, 1, NULL);
    dbus_connection_flush(conn);
    out("ready %s", dbus_bus_get_unique_name(conn));
    serve(conn, token, NULL, NULL);
    return 0;
}

typedef struct { int listen_fd; int accepted; } deaf_state;

static void deaf_accept(void *arg) {
    deaf_state *d = arg;
    int fd;
    while ((fd = accept(d->listen_fd, NULL, NULL)) >= 0) { /* kept open, never read */
        d->accepted++;
        out("accepted %d", d->accepted);
    }
}

/* fp-deaf: a real endpoint for every bucket whose connections are accepted and never read. */
int cmd_fp_deaf(int argc, char **argv) {
    (void)argc; (void)argv;
    DBusConnection *conn = raw_connect();
    if (!conn) return fail("connect", NOTIFY_STATUS_SERVER_NOT_FOUND);
    char token[33];
    fp_random_hex(token);
    deaf_state d = { socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0), 0 };
    struct sockaddr_un sa;
    socklen_t len;
    fp_address(token, &sa, &len);
    if (d.listen_fd < 0 || bind(d.listen_fd, (struct sockaddr *)&sa, len) != 0 || listen(d.listen_fd, 16) != 0)
        return fail("listen", NOTIFY_STATUS_FAILED);
    fp_send_endpoint(conn, token, 1, NULL);
    dbus_connection_flush(conn);
    out("ready %s", dbus_bus_get_unique_name(conn));
    serve(conn, token, deaf_accept, &d);
    return 0;
}

/* fp-forge CLAIM NAME... [+]: asks for endpoints (Query), takes the first one announced, connects
 * to it, says HELLO as CLAIM ("-": its own unique name), sends the Sync on the bus, then one POST
 * of each NAME (seq 1); "sent N". With a last "+", then one POST per line of stdin, on the same
 * connection, numbered 2, 3, ... across the lines, each answered "sent NAME SEQ", until an empty line.
 * Then a frame that is no frame at all ("hung up" if the endpoint hung up); idles until stdin
 * closes. */
int cmd_fp_forge(int argc, char **argv) {
    if (argc < 2) return fail("usage: fp-forge CLAIM NAME... [+]", NOTIFY_STATUS_INVALID_REQUEST);
    DBusConnection *conn = raw_connect();
    if (!conn) return fail("connect", NOTIFY_STATUS_SERVER_NOT_FOUND);
    char token[64] = "", owner[256] = "";
    if (fp_find_endpoint(conn, token, owner) != 0) return fail("no endpoint announced", NOTIFY_STATUS_FAILED);
    int fd = fp_connect_endpoint(token, 0);
    if (fd < 0) return fail("connect to the endpoint", NOTIFY_STATUS_FAILED);
    const char *claim = strcmp(argv[0], "-") == 0 ? dbus_bus_get_unique_name(conn) : argv[0];
    uint64_t sync = 0x5eed5eed5eed5eedull;
    unsigned char buf[1024];
    size_t n = fp_frame(buf, 1, 0x0123456789abcdefull, sync, claim);
    int sent = send(fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n;
    fp_send_sync(conn, owner, sync);
    int more = strcmp(argv[argc - 1], "+") == 0;
    if (more) argc--;
    int count = 0;
    for (int i = 1; i < argc && sent; i++) {
        n = fp_frame(buf, 2, 1, 0, argv[i]);
        if (send(fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n) count++;
    }
    out("sent %d to %s", count, owner);
    char line[512];
    uint64_t seq = 1;
    while (more && fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        if (!line[0]) break;
        n = fp_frame(buf, 2, ++seq, 0, line);
        if (send(fd, buf, n, MSG_NOSIGNAL) != (ssize_t)n) break;
        out("sent %s %llu", line, (unsigned long long)seq);
    }
    /* Then garbage: a frame of an unknown type. The endpoint must hang up, nothing else. */
    n = fp_frame(buf, 9, 0, 0, "x");
    send(fd, buf, n, MSG_NOSIGNAL);
    char c;
    struct pollfd p = { .fd = fd, .events = POLLIN };
    /* 0, or ECONNRESET when it hung up on frames it had not read */
    if (poll(&p, 1, 10000) > 0 && recv(fd, &c, 1, 0) <= 0) out("hung up");
    serve(conn, "", NULL, NULL);
    return 0;
}
