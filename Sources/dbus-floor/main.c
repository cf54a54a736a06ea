/*
 * dbus-floor: the raw-libdbus floor for notify-bench. The same signal shape and routing as
 * DarwinNotify (docs/PROTOCOL.md: path /org/darwinnotify, the name's bucket interface
 * org.darwinnotify.Notify.Hxxx, member Post, body (s name, t seq), one exact arg0 rule for the
 * observed name) and no wrapper at all: one thread, blocking dispatch.
 * Usage: dbus-floor echo PING PONG | ping PING PONG N | sink NAME | flood NAME N
 *        | stamp NAME | fanout-post NAME M GAP_MS
 * (bus: the DARWIN_NOTIFY_BUS address)
 */
#include <dbus/dbus.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static DBusConnection *conn;
static const char *want, *reply;
static int seen;
static dbus_uint64_t seq;
/* sink: the end marker, counts, sequence gaps, first and last receipt */
static char end_name[600];
static int ended, stamping;
static long received, gaps;
static dbus_uint64_t last_seq;
static uint64_t first_at, last_at;
static uint64_t now_ns(void);

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

int main(int argc, char **argv) {
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
        printf("received=%ld gaps=%ld elapsed_ns=%llu\n", received, gaps, (unsigned long long)(last_at - first_at));
    } else if (flood) {
        char end[600];
        snprintf(end, sizeof end, "%s.end", argv[2]);
        for (long i = 0, n = atol(argv[3]); i < n; i++) send_post(argv[2], 0); /* as fast as it goes */
        post(end);
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
