/*
 * Probe roles for the fast path's bounds (issue 32; docs/PROTOCOL.md "Fast path", "Bounds"),
 * written from PROTOCOL.md alone with raw libdbus and sockets. Each is one hostile or scripted
 * peer; one line per event on stdout.
 *   fp-fakes N none|all [quiet]  N bus connections, each announcing an endpoint nobody listens on
 *   fp-burst NAME N         a poster that proves itself, posts 1 directly, waits for a line, posts
 *                           2..N directly (no bus copies), and leaves
 *   fp-reconnect NAME N M   a poster that posts 1..N on one connection, N+1..M on a second
 *   fp-orders PID NAME      every legal order of HELLO, SYNC frames and their Syncs, paced and
 *                           with the observer (PID) stopped
 *   fp-idle TOKEN N         N connections to the endpoint TOKEN ("all": every one in /proc/net/unix),
 *                           never a word
 *   fp-hello-storm TOKEN MS connect, HELLO as someone else, close, for MS milliseconds
 *   fp-query-flood N        N Queries from one bus connection that never reads
 *   dist-object BYTES NAME  a Distributed Post of NAME whose object is BYTES long, options all set
 *   plist-keys N            a dictionary of N keys built by the public API: the comparisons made
 */
#include <dbus/dbus.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <darwin_notify.h>
#include <darwin_notify_distributed.h>
#include "probe.h"

#define FP_INTERFACE "org.darwinnotify.FastPath"
#define FP_PATH "/org/darwinnotify"

void fp_random_hex(char out[33]) {
    unsigned char raw[16];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) memset(raw, 7, sizeof raw);
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

static uint64_t random_u64(void) {
    uint64_t v = 0;
    while (v == 0)
        if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) v = (uint64_t)time(NULL);
    return v;
}

static void put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }

/* A frame per PROTOCOL.md: type, version 1, two zero bytes, u32 text length, two u64, the text. */
size_t fp_frame(unsigned char *out, int type, uint64_t a, uint64_t b, const char *text) {
    size_t n = strlen(text);
    out[0] = (unsigned char)type;
    out[1] = 1;
    out[2] = out[3] = 0;
    for (int i = 0; i < 4; i++) out[4 + i] = (unsigned char)(n >> (8 * i));
    put64(out + 8, a);
    put64(out + 16, b);
    memcpy(out + 24, text, n);
    return 24 + n;
}

void fp_send_endpoint(DBusConnection *conn, const char *token, int all, const char *destination) {
    unsigned char bitmap[512];
    memset(bitmap, all ? 0xff : 0, sizeof bitmap);
    const unsigned char *bp = bitmap;
    dbus_uint32_t version = 1;
    DBusMessage *m = dbus_message_new_signal(FP_PATH, FP_INTERFACE, "Endpoint");
    if (destination) dbus_message_set_destination(m, destination);
    dbus_message_append_args(m, DBUS_TYPE_STRING, &token, DBUS_TYPE_ARRAY, DBUS_TYPE_BYTE, &bp, 512, DBUS_TYPE_UINT32,
                             &version, DBUS_TYPE_INVALID);
    dbus_connection_send(conn, m, NULL);
    dbus_message_unref(m);
}

static int stdin_closed(int timeout_ms) {
    struct pollfd p = { .fd = 0, .events = POLLIN };
    char buf[64];
    return poll(&p, 1, timeout_ms) > 0 && read(0, buf, sizeof buf) <= 0;
}

/* fp-fakes N none|all [quiet]: N bus connections, each announcing a random token nobody listens on,
 * for no bucket (none) or every bucket (all), again to each new asker (Query; quiet: no Query rule,
 * the announcement alone, again every second); "ready N"; "answered ASKER" once every fake has
 * answered ASKER (each fake answers each asker once: the attack is on the poster, not the bus; the
 * bus hands one Query to the N connections in no set order); until stdin closes. */
#define FAKES_ASKERS 64
int cmd_fp_fakes(int argc, char **argv) {
    if (argc < 2) return fail("usage: fp-fakes N none|all [quiet]", NOTIFY_STATUS_INVALID_REQUEST);
    int n = atoi(argv[0]), all = strcmp(argv[1], "all") == 0, quiet = argc > 2 && strcmp(argv[2], "quiet") == 0;
    if (n <= 0) return fail("fp-fakes: N must be a positive count", NOTIFY_STATUS_INVALID_REQUEST);
    char asked[FAKES_ASKERS][256];
    int nasked = 0, answers[FAKES_ASKERS] = { 0 };
    unsigned char *answered = calloc((size_t)n * FAKES_ASKERS, 1); /* [fake][asker] */
    DBusConnection **conns = calloc((size_t)n, sizeof *conns);
    char (*tokens)[33] = calloc((size_t)n, sizeof *tokens);
    if (!answered || !conns || !tokens) return fail("fp-fakes: out of memory", NOTIFY_STATUS_FAILED);
    int made = 0;
    for (; made < n; made++) {
        if (!(conns[made] = raw_connect())) break;
        fp_random_hex(tokens[made]);
        if (!quiet) dbus_bus_add_match(conns[made], "type='signal',interface='" FP_INTERFACE "',member='Query'", NULL);
        fp_send_endpoint(conns[made], tokens[made], all, NULL);
        dbus_connection_flush(conns[made]);
    }
    out("ready %d", made);
    for (int round = 1; !stdin_closed(20); round++)
        for (int i = 0; i < made; i++) {
            dbus_connection_read_write(conns[i], 0);
            DBusMessage *m;
            while ((m = dbus_connection_pop_message(conns[i]))) {
                const char *asker = dbus_message_get_sender(m);
                if (dbus_message_is_signal(m, FP_INTERFACE, "Query") && asker && strlen(asker) < sizeof asked[0]) {
                    int a = 0;
                    while (a < nasked && strcmp(asked[a], asker) != 0) a++;
                    if (a == nasked && nasked < FAKES_ASKERS) snprintf(asked[nasked++], sizeof asked[0], "%s", asker);
                    if (a < nasked && !answered[(size_t)i * FAKES_ASKERS + a]) {
                        fp_send_endpoint(conns[i], tokens[i], all, asker);
                        answered[(size_t)i * FAKES_ASKERS + a] = 1;
                        if (++answers[a] == made) {
                            dbus_connection_flush(conns[i]);
                            out("answered %s", asker);
                        }
                    }
                }
                dbus_message_unref(m);
            }
            if (quiet && round % 50 == 0) fp_send_endpoint(conns[i], tokens[i], all, NULL);
            dbus_connection_flush(conns[i]);
        }
    return 0;
}

/* Asks for endpoints (Query) and takes the first announced one's token and owner. */
int fp_find_endpoint(DBusConnection *conn, char token[64], char owner[256]) {
    dbus_bus_add_match(conn, "type='signal',interface='" FP_INTERFACE "',member='Endpoint'", NULL);
    DBusMessage *q = dbus_message_new_signal(FP_PATH, FP_INTERFACE, "Query");
    dbus_uint32_t version = 1;
    dbus_message_append_args(q, DBUS_TYPE_UINT32, &version, DBUS_TYPE_INVALID);
    dbus_connection_send(conn, q, NULL);
    dbus_message_unref(q);
    token[0] = '\0';
    while (!token[0] && dbus_connection_read_write(conn, 10000)) {
        DBusMessage *m;
        while ((m = dbus_connection_pop_message(conn))) {
            const char *t;
            const unsigned char *bits;
            int nbits;
            dbus_uint32_t v;
            if (!token[0] && dbus_message_is_signal(m, FP_INTERFACE, "Endpoint")
                && dbus_message_get_args(m, NULL, DBUS_TYPE_STRING, &t, DBUS_TYPE_ARRAY, DBUS_TYPE_BYTE, &bits, &nbits,
                                         DBUS_TYPE_UINT32, &v, DBUS_TYPE_INVALID)) {
                snprintf(token, 64, "%s", t);
                snprintf(owner, 256, "%s", dbus_message_get_sender(m));
            }
            dbus_message_unref(m);
        }
    }
    dbus_bus_remove_match(conn, "type='signal',interface='" FP_INTERFACE "',member='Endpoint'", NULL);
    return token[0] ? 0 : -1;
}

void fp_address(const char *token, struct sockaddr_un *sa, socklen_t *len) {
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    int n = snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "darwin-notify/fp/%s", token);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int fp_connect_endpoint(const char *token, int nonblock) {
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | (nonblock ? SOCK_NONBLOCK : 0), 0);
    struct sockaddr_un sa;
    socklen_t len;
    fp_address(token, &sa, &len);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, len) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

void fp_send_sync(DBusConnection *conn, const char *owner, uint64_t token) {
    DBusMessage *s = dbus_message_new_signal(FP_PATH, FP_INTERFACE, "Sync");
    dbus_message_set_destination(s, owner);
    dbus_uint64_t t = token;
    dbus_message_append_args(s, DBUS_TYPE_UINT64, &t, DBUS_TYPE_INVALID);
    dbus_connection_send(conn, s, NULL);
    dbus_message_unref(s);
    dbus_connection_flush(conn);
}

/* Peer.Ping, answered by the observer's libdbus in its dispatch: once it returns, the observer has
 * handled every message this connection sent it before. */
static void ping(DBusConnection *conn, const char *owner) {
    DBusMessage *m = dbus_message_new_method_call(owner, "/", "org.freedesktop.DBus.Peer", "Ping");
    DBusMessage *r = dbus_connection_send_with_reply_and_block(conn, m, 5000, NULL);
    dbus_message_unref(m);
    if (r) dbus_message_unref(r);
}

/* fp-burst NAME N: proves itself to the first endpoint announced (HELLO, Sync), posts NAME 1
 * directly, says "first", waits for a line on stdin, then posts 2..N directly, non-blocking (no bus
 * copy of any), says "sent K" (the last number written) and leaves the bus and the socket. */
int cmd_fp_burst(int argc, char **argv) {
    if (argc < 2) return fail("usage: fp-burst NAME N", NOTIFY_STATUS_INVALID_REQUEST);
    long n = atol(argv[1]);
    DBusConnection *conn = raw_connect();
    char token[64], owner[256];
    if (!conn || fp_find_endpoint(conn, token, owner) != 0) return fail("no endpoint", NOTIFY_STATUS_FAILED);
    int fd = fp_connect_endpoint(token, 0);
    if (fd < 0) return fail("connect to the endpoint", NOTIFY_STATUS_FAILED);
    unsigned char buf[1024];
    uint64_t sync = random_u64();
    size_t len = fp_frame(buf, 1, random_u64(), sync, dbus_bus_get_unique_name(conn));
    if (send(fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len) return fail("HELLO", NOTIFY_STATUS_FAILED);
    fp_send_sync(conn, owner, sync);
    len = fp_frame(buf, 2, 1, 0, argv[0]);
    if (send(fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len) return fail("POST", NOTIFY_STATUS_FAILED);
    out("first");
    char line[64];
    if (!fgets(line, sizeof line, stdin)) return 0;
    long last = 1;
    for (long seq = 2; seq <= n; seq++) {
        len = fp_frame(buf, 2, (uint64_t)seq, 0, argv[0]);
        if (send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)len) break;
        last = seq;
    }
    out("sent %ld", last);
    dbus_connection_close(conn);
    dbus_connection_unref(conn);
    close(fd);
    return 0;
}

/* fp-orders PID NAME: every order in which a poster may write HELLO, P1, SYNC1, P2, SYNC2, P3 on its
 * socket and Sync0..2 on the bus (each frame before its own Sync), twice: paced (each Sync handled
 * by the observer, Peer.Ping, before the next step) and all at once with the observer (PID)
 * stopped. Each run is a new poster (bus connection and socket) posting NAME.K 1..3 directly;
 * "order K STEPS" for each, "orders N" at the end. The observer must deliver each NAME.K 1, 2, 3. */
int cmd_fp_orders(int argc, char **argv) {
    if (argc < 2) return fail("usage: fp-orders PID NAME", NOTIFY_STATUS_INVALID_REQUEST);
    pid_t observer = (pid_t)atol(argv[0]);
    static const char *const socket_steps[] = { "H", "P1", "Y1", "P2", "Y2", "P3" };
    int count = 0;
    /* Every poster stays connected, on the bus and to the endpoint, until stdin closes: leaving
     * would pass its barriers (a departed poster's frames are all delivered) and hide a stall. */
    DBusConnection *kept[64];
    int kept_fds[64];
    for (int stopped = 0; stopped <= 1; stopped++)
        for (int g2 = 5; g2 <= 6; g2++) /* Sync k goes after the first g_k socket steps */
            for (int g1 = 3; g1 <= g2; g1++)
                for (int g0 = 1; g0 <= g1; g0++) {
                    DBusConnection *conn = raw_connect();
                    char token[64], owner[256], name[300], steps[128] = "";
                    if (!conn || fp_find_endpoint(conn, token, owner) != 0) return fail("no endpoint", NOTIFY_STATUS_FAILED);
                    int fd = fp_connect_endpoint(token, 0);
                    if (fd < 0) return fail("connect to the endpoint", NOTIFY_STATUS_FAILED);
                    snprintf(name, sizeof name, "%s.%d", argv[1], count);
                    uint64_t syncs[3] = { random_u64(), random_u64(), random_u64() };
                    int gaps[3] = { g0, g1, g2 }, next_sync = 0;
                    if (stopped) kill(observer, SIGSTOP);
                    for (int s = 0; s <= 6; s++) {
                        while (next_sync < 3 && gaps[next_sync] == s) {
                            fp_send_sync(conn, owner, syncs[next_sync]);
                            if (!stopped) ping(conn, owner);
                            snprintf(steps + strlen(steps), sizeof steps - strlen(steps), "S%d ", next_sync);
                            next_sync++;
                        }
                        if (s == 6) break;
                        unsigned char buf[600];
                        size_t len;
                        const char *step = socket_steps[s];
                        if (step[0] == 'H') len = fp_frame(buf, 1, random_u64(), syncs[0], dbus_bus_get_unique_name(conn));
                        else if (step[0] == 'P') len = fp_frame(buf, 2, (uint64_t)(step[1] - '0'), 0, name);
                        else len = fp_frame(buf, 3, syncs[step[1] - '0'], 0, "");
                        if (send(fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len) return fail("send", NOTIFY_STATUS_FAILED);
                        snprintf(steps + strlen(steps), sizeof steps - strlen(steps), "%s ", step);
                    }
                    if (stopped) kill(observer, SIGCONT);
                    out("order %d %s%s", count, stopped ? "stopped " : "paced ", steps);
                    count++;
                    kept[count - 1] = conn;
                    kept_fds[count - 1] = fd;
                    if (count == 64) return fail("more orders than kept", NOTIFY_STATUS_FAILED);
                }
    out("orders %d", count);
    while (!stdin_closed(1000)) {}
    for (int i = 0; i < count; i++) {
        close(kept_fds[i]);
        dbus_connection_close(kept[i]);
        dbus_connection_unref(kept[i]);
    }
    return 0;
}

/* The tokens of the endpoints listening on this host (/proc/net/unix, "@darwin-notify/fp/…"). */
static int endpoints_listed(char tokens[][33], int cap) {
    FILE *f = fopen("/proc/net/unix", "r");
    if (!f) return 0;
    char line[512];
    int n = 0;
    while (n < cap && fgets(line, sizeof line, f)) {
        char *at = strstr(line, "@darwin-notify/fp/");
        if (!at || strstr(line, " 00010000 ") == NULL) continue; /* listening sockets only (__SO_ACCEPTCON) */
        at += strlen("@darwin-notify/fp/");
        if (strlen(at) < 32) continue;
        memcpy(tokens[n], at, 32);
        tokens[n][32] = '\0';
        int dup = 0;
        for (int k = 0; k < n; k++) dup |= strcmp(tokens[k], tokens[n]) == 0;
        n += !dup;
    }
    fclose(f);
    return n;
}

/* The endpoint `which` names (its token), or with "all" every one on this host: how many. */
static int endpoints_named(const char *which, char tokens[64][33]) {
    if (strcmp(which, "all") == 0) return endpoints_listed(tokens, 64);
    snprintf(tokens[0], 33, "%s", which);
    return 1;
}

/* fp-idle TOKEN N: N connections to the endpoint TOKEN ("all": every endpoint on this host), never a
 * byte sent; "idle K" with the connections made; "closed C" once C of them were closed by the
 * other end; until stdin closes. */
int cmd_fp_idle(int argc, char **argv) {
    if (argc < 2) return fail("usage: fp-idle TOKEN|all N", NOTIFY_STATUS_INVALID_REQUEST);
    int n = atoi(argv[1]);
    char tokens[64][33];
    int endpoints = endpoints_named(argv[0], tokens);
    int *fds = calloc((size_t)(n * (endpoints ? endpoints : 1)), sizeof *fds), made = 0;
    /* The listen backlog holds 128: connections are tried again while the endpoint accepts (and
     * closes what it will), for at most 10 s. */
    for (int e = 0; e < endpoints; e++)
        for (int i = 0, tries = 0; i < n && tries < 1000; tries++) {
            int fd = fp_connect_endpoint(tokens[e], 1);
            if (fd >= 0) { fds[made++] = fd; i++; continue; }
            struct timespec pause = { 0, 10000000 };
            nanosleep(&pause, NULL);
        }
    out("idle %d to %d endpoints", made, endpoints);
    int reported = -1;
    while (!stdin_closed(100)) {
        int closed = 0;
        for (int i = 0; i < made; i++) {
            char c;
            ssize_t r = recv(fds[i], &c, 1, MSG_DONTWAIT | MSG_PEEK);
            closed += r == 0 || (r < 0 && errno != EAGAIN);
        }
        if (closed != reported) out("closed %d", reported = closed);
    }
    return 0;
}

/* fp-hello-storm TOKEN MS: for MS milliseconds, connects to the endpoint TOKEN ("all": every
 * endpoint on this host), says HELLO as a unique name that is not its own (it need not be on the
 * bus at all) and hangs up; "stormed N". */
int cmd_fp_hello_storm(int argc, char **argv) {
    if (argc < 2) return fail("usage: fp-hello-storm TOKEN|all MS", NOTIFY_STATUS_INVALID_REQUEST);
    long ms = atol(argv[1]);
    char tokens[64][33];
    int endpoints = endpoints_named(argv[0], tokens);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long n = 0;
    unsigned char buf[128];
    do {
        for (int e = 0; e < endpoints; e++) {
            int fd = fp_connect_endpoint(tokens[e], 1);
            if (fd < 0) continue;
            char claim[32];
            snprintf(claim, sizeof claim, ":1.%ld", 1 + n % 50);
            size_t len = fp_frame(buf, 1, random_u64(), random_u64(), claim);
            if (send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)len) n++;
            close(fd);
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms && endpoints > 0);
    out("stormed %ld to %d endpoints", n, endpoints);
    return 0;
}

/* fp-query-flood N: N Query signals from one bus connection, which never reads what comes back;
 * "queried N UNIQUE"; stays connected until stdin closes. */
int cmd_fp_query_flood(int argc, char **argv) {
    long n = argc > 0 ? atol(argv[0]) : 10000;
    DBusConnection *conn = raw_connect();
    if (!conn) return fail("connect", NOTIFY_STATUS_SERVER_NOT_FOUND);
    dbus_uint32_t version = 1;
    for (long i = 0; i < n; i++) {
        DBusMessage *q = dbus_message_new_signal(FP_PATH, FP_INTERFACE, "Query");
        dbus_message_append_args(q, DBUS_TYPE_UINT32, &version, DBUS_TYPE_INVALID);
        dbus_connection_send(conn, q, NULL);
        dbus_message_unref(q);
        if (i % 256 == 255) dbus_connection_flush(conn);
    }
    dbus_connection_flush(conn);
    out("queried %ld %s", n, dbus_bus_get_unique_name(conn));
    while (!stdin_closed(1000)) {}
    return 0;
}

/* dist-object BYTES NAME: a Distributed Post of NAME (raw libdbus, as PROTOCOL.md writes it) with an
 * object of BYTES 'o's, an empty userInfo, sequence 1, origin 1 and every option bit set; "sent". */
int cmd_dist_object(int argc, char **argv) {
    if (argc < 2) return fail("usage: dist-object BYTES NAME", NOTIFY_STATUS_INVALID_REQUEST);
    size_t bytes = (size_t)atol(argv[0]);
    DBusConnection *conn = raw_connect();
    if (!conn) return fail("connect", NOTIFY_STATUS_SERVER_NOT_FOUND);
    char *object = malloc(bytes + 1);
    memset(object, 'o', bytes);
    object[bytes] = '\0';
    DBusMessage *m = dbus_message_new_signal("/org/darwinnotify", "org.darwinnotify.Distributed", "Post");
    DBusMessageIter it, dict;
    const char *name = argv[1], *obj = object;
    dbus_uint64_t seq = 1, origin = 1;
    dbus_uint32_t options = 0xffffffffu;
    dbus_message_iter_init_append(m, &it);
    dbus_message_iter_append_basic(&it, DBUS_TYPE_STRING, &name);
    dbus_message_iter_append_basic(&it, DBUS_TYPE_STRING, &obj);
    dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "{sv}", &dict);
    dbus_message_iter_close_container(&it, &dict);
    dbus_message_iter_append_basic(&it, DBUS_TYPE_UINT64, &seq);
    dbus_message_iter_append_basic(&it, DBUS_TYPE_UINT64, &origin);
    dbus_message_iter_append_basic(&it, DBUS_TYPE_UINT32, &options);
    dbus_connection_send(conn, m, NULL);
    dbus_connection_flush(conn);
    dbus_message_unref(m);
    free(object);
    out("sent");
    return 0;
}

extern _Thread_local unsigned long cn_test_plist_compares; /* the core's (this thread's), linked into this probe */

/* plist-keys N: a dictionary of N distinct keys, each set through CNotify_plist_set, then each looked
 * up once; "keys N compares C" (C: key comparisons the core made). */
int cmd_plist_keys(int argc, char **argv) {
    long n = argc > 0 ? atol(argv[0]) : 5000;
    CNotify_plist *dict = CNotify_plist_dictionary();
    unsigned long before = cn_test_plist_compares;
    for (long i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%ld", i);
        CNotify_plist *v = CNotify_plist_integer(i);
        if (CNotify_plist_set(dict, key, v) != NOTIFY_STATUS_OK) return fail("set", NOTIFY_STATUS_FAILED);
    }
    for (long i = 0; i < n; i++) {
        char key[32];
        int64_t got = -1;
        snprintf(key, sizeof key, "k%ld", i);
        if (CNotify_plist_get_integer(CNotify_plist_lookup(dict, key), &got) != NOTIFY_STATUS_OK || got != i)
            return fail("lookup", NOTIFY_STATUS_FAILED);
    }
    out("keys %zu compares %lu", CNotify_plist_count(dict), cn_test_plist_compares - before);
    CNotify_plist_free(dict);
    return 0;
}

static void dist_watch_cb(void *context, const CNotify_distributed_note *note) {
    (void)context;
    out("got %s objectlen=%zu options=%u", note->name, note->object ? strlen(note->object) : 0, note->options);
}

/* dist-watch NAME: a C handler of NAME's distributed notifications; "watching"; then "got NAME
 * objectlen=L options=O" per delivery and, at "stats" on stdin, "dropped D" (posts dropped on
 * receipt); until stdin closes. */
int cmd_dist_watch(int argc, char **argv) {
    if (argc < 1) return fail("usage: dist-watch NAME", NOTIFY_STATUS_INVALID_REQUEST);
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    uint64_t handle = 0;
    uint32_t st = CNotify_distributed_add_handler(c, argv[0], NULL, dist_watch_cb, NULL, NULL, &handle);
    if (st) return fail("add_handler", st);
    out("watching");
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        CNotify_distributed_stats s;
        CNotify_distributed_get_stats(c, &s);
        out("dropped %llu", (unsigned long long)s.dropped);
    }
    return 0;
}

static _Atomic long self_got, self_wrong;
static void self_cb(CNotify_center *c, void *observer, const char *name, const void *object, const void *info) {
    (void)observer; (void)name; (void)object; (void)info;
    CNotify_post_info post;
    long n = ++self_got;
    if (CNotify_center_current_post(c, &post) != NOTIFY_STATUS_OK || !post.has_sequence || post.sequence != (uint64_t)n) self_wrong++;
}

/* fp-self N MODE: two centers of this process on DARWIN_NOTIFY_BUS, one observing fp.self, the other
 * posting it N times with the fast path MODE (on|direct) once connected to it; exits 0 when all N
 * (and the connecting post) came once and in order within 30 s. For the sanitizer lane: the frame
 * reader, the peer table and the endpoint's proof, all in one instrumented process. */
int cmd_fp_self(int argc, char **argv) {
    long n = argc > 0 ? atol(argv[0]) : 1000;
    int direct = argc > 1 && strcmp(argv[1], "direct") == 0;
    uint32_t st;
    CNotify_center *observer = CNotify_center_create(NULL, &st), *poster = CNotify_center_create(NULL, &st);
    if (!observer || !poster) return fail("center_create", st);
    if ((st = CNotify_center_add_observer(observer, observer, self_cb, "fp.self"))) return fail("add_observer", st);
    CNotify_center_set_fast_path(poster, direct ? CNOTIFY_FAST_PATH_DIRECT : CNOTIFY_FAST_PATH_ON);
    if ((st = CNotify_center_post(poster, "fp.self"))) return fail("post", st);
    CNotify_fast_path_stats f = {0};
    for (int i = 0; i < 1000 && f.peers < 1; i++) {
        CNotify_center_get_fast_path_stats(poster, &f);
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    for (long i = 0; i < n; i++)
        if ((st = CNotify_center_post(poster, "fp.self"))) return fail("post", st);
    CNotify_center_flush(poster, 5000);
    for (int i = 0; i < 3000 && self_got < n + 1; i++) {
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    CNotify_center_get_fast_path_stats(observer, &f);
    out("got %ld wrong %ld direct %llu", (long)self_got, (long)self_wrong, (unsigned long long)f.delivered);
    int ok = self_got == n + 1 && self_wrong == 0 && f.delivered > 0;
    CNotify_center_destroy(poster);
    CNotify_center_destroy(observer);
    return ok ? 0 : 1;
}

/* fp-reconnect NAME N M: one poster (one bus connection) finds the endpoint (Query), says "found",
 * waits for a line, proves a first connection (HELLO, Sync) and posts NAME 1..N on it directly,
 * then connects again, as a poster does when an observer's
 * buckets grow (a second HELLO and Sync), and posts N+1..M on the new connection; the first is left
 * open with what it holds. No bus copies. "posted M"; stays until stdin closes. */
int cmd_fp_reconnect(int argc, char **argv) {
    if (argc < 3) return fail("usage: fp-reconnect NAME N M", NOTIFY_STATUS_INVALID_REQUEST);
    long n = atol(argv[1]), m = atol(argv[2]);
    DBusConnection *conn = raw_connect();
    char token[64], owner[256];
    if (!conn || fp_find_endpoint(conn, token, owner) != 0) return fail("no endpoint", NOTIFY_STATUS_FAILED);
    out("found");
    char line[64];
    if (!fgets(line, sizeof line, stdin)) return 0; /* "go" */
    uint64_t origin = random_u64();
    int fds[2] = { -1, -1 };
    unsigned char buf[1024];
    for (int c = 0; c < 2; c++) {
        if ((fds[c] = fp_connect_endpoint(token, 0)) < 0) return fail("connect to the endpoint", NOTIFY_STATUS_FAILED);
        uint64_t sync = random_u64();
        size_t len = fp_frame(buf, 1, origin, sync, dbus_bus_get_unique_name(conn));
        if (send(fds[c], buf, len, MSG_NOSIGNAL) != (ssize_t)len) return fail("HELLO", NOTIFY_STATUS_FAILED);
        fp_send_sync(conn, owner, sync);
        for (long seq = c ? n + 1 : 1; seq <= (c ? m : n); seq++) {
            len = fp_frame(buf, 2, (uint64_t)seq, 0, argv[0]);
            if (send(fds[c], buf, len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)len) return fail("POST", NOTIFY_STATUS_FAILED);
        }
    }
    out("posted %ld", m);
    while (!stdin_closed(1000)) {}
    close(fds[0]);
    close(fds[1]);
    dbus_connection_close(conn);
    dbus_connection_unref(conn);
    return 0;
}
