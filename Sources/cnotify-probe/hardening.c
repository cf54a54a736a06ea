/*
 * Probe roles for the hardening tests: an observer that reports the center's counters, raw
 * libdbus senders that forge, replay or renumber posts the way an outsider on the bus could, a
 * flood against a stopped bus, and lifetime checks. Each speaks one line per event on stdout.
 */
#include <dbus/dbus.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <darwin_notify.h>
#include <notify.h>
#include "probe.h"

void out(const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    say("%s\n", buf);
}

/* Waits up to `ms` for stdin to close; 1 once it has. */
static int stdin_closed(int ms) {
    struct pollfd p = { .fd = 0, .events = POLLIN };
    if (poll(&p, 1, ms) <= 0) return 0;
    char buf[64];
    return read(0, buf, sizeof buf) <= 0;
}

static void stats_cb(CNotify_center *c, void *observer, const char *name, const void *object, const void *info) {
    (void)observer; (void)object; (void)info;
    CNotify_stats s;
    CNotify_center_get_stats(c, &s); /* this delivery is counted already: counted before its callback */
    out("%s delivered=%llu rejected=%llu gaps=%llu", name, (unsigned long long)s.delivered,
        (unsigned long long)s.rejected, (unsigned long long)s.gaps);
}

/* stats NAME...: prints "NAME delivered=D rejected=R gaps=G" per post, and "reconnects=N" each
 * time the center reconnects; runs until stdin closes. */
int cmd_stats(int argc, char **argv) {
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    for (int i = 0; i < argc; i++) {
        uint32_t st = CNotify_center_add_observer(c, &argc, stats_cb, argv[i]);
        if (st) return fail("add_observer", st);
    }
    out("ready");
    uint64_t seen = 0;
    while (!stdin_closed(10)) {
        CNotify_stats s;
        CNotify_center_get_stats(c, &s);
        if (s.reconnects != seen) { seen = s.reconnects; out("reconnects=%llu", (unsigned long long)seen); }
    }
    return 0;
}

static void count_cb(CNotify_center *c, void *observer, const char *name, const void *object, const void *info) {
    (void)c; (void)observer; (void)name; (void)object; (void)info;
}

/* count NAME: for floods; prints "delivered=D gaps=G rejected=R reconnects=C" when it changes
 * (every 5 ms at most), until stdin closes. */
int cmd_count(int argc, char **argv) {
    if (argc < 1) return fail("usage: count NAME", NOTIFY_STATUS_INVALID_REQUEST);
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    uint32_t st = CNotify_center_add_observer(c, &argc, count_cb, argv[0]);
    if (st) return fail("add_observer", st);
    out("ready");
    CNotify_stats last = {0};
    do {
        CNotify_stats s;
        CNotify_center_get_stats(c, &s);
        if (memcmp(&s, &last, sizeof s) != 0) {
            last = s;
            out("delivered=%llu gaps=%llu rejected=%llu reconnects=%llu", (unsigned long long)s.delivered,
                (unsigned long long)s.gaps, (unsigned long long)s.rejected, (unsigned long long)s.reconnects);
        }
    } while (!stdin_closed(5));
    return 0;
}

/* The bucket interface of a name (docs/PROTOCOL.md), computed here as a foreign client would. */
static void bucket(const char *name, char out[64]) {
    uint32_t h = 2166136261u;
    for (const char *p = name; *p; p++) { h ^= (unsigned char)*p; h *= 16777619u; }
    snprintf(out, 64, "org.darwinnotify.Notify.H%03x", h & 0xfffu);
}

DBusConnection *raw_connect(void) {
    const char *address = getenv("DARWIN_NOTIFY_BUS");
    DBusError err;
    dbus_error_init(&err);
    DBusConnection *conn = address ? dbus_connection_open_private(address, &err) : NULL;
    if (conn && !dbus_bus_register(conn, &err)) { dbus_connection_close(conn); dbus_connection_unref(conn); conn = NULL; }
    if (!conn) fprintf(stderr, "cnotify-probe: cannot connect to %s: %s\n", address ? address : "(DARWIN_NOTIFY_BUS unset)",
                       err.message ? err.message : "?");
    dbus_error_free(&err);
    if (conn) dbus_connection_set_exit_on_disconnect(conn, FALSE);
    return conn;
}

static int raw_send(DBusConnection *conn, const char *name, dbus_uint64_t seq, int fd) {
    char iface[64];
    bucket(name, iface);
    DBusMessage *m = dbus_message_new_signal("/org/darwinnotify", iface, "Post");
    int ok = m && dbus_message_append_args(m, DBUS_TYPE_STRING, &name, DBUS_TYPE_UINT64, &seq, DBUS_TYPE_INVALID) &&
             (fd < 0 || dbus_message_append_args(m, DBUS_TYPE_UNIX_FD, &fd, DBUS_TYPE_INVALID)) &&
             dbus_connection_send(conn, m, NULL);
    if (m) dbus_message_unref(m);
    dbus_connection_flush(conn);
    return ok;
}

/* raw-post CONNECTIONS NAME: that many raw libdbus connections each post NAME (sequence 1, no
 * credential) and stay connected; prints "sent N" and waits until stdin closes. */
int cmd_raw_post(int argc, char **argv) {
    if (argc < 2) return fail("usage: raw-post CONNECTIONS NAME", NOTIFY_STATUS_INVALID_REQUEST);
    int n = atoi(argv[0]);
    DBusConnection *conns[64];
    if (n < 1 || n > 64) return fail("1 to 64 connections", NOTIFY_STATUS_INVALID_REQUEST);
    for (int i = 0; i < n; i++) {
        if (!(conns[i] = raw_connect())) return 1;
        if (!raw_send(conns[i], argv[1], 1, -1)) return fail("send", NOTIFY_STATUS_FAILED);
    }
    out("sent %d", n);
    while (!stdin_closed(1000)) {}
    for (int i = 0; i < n; i++) { dbus_connection_close(conns[i]); dbus_connection_unref(conns[i]); }
    return 0;
}

/* forge-seq NAME SEQ...: one raw connection posts NAME with each sequence number, then exits. */
int cmd_forge_seq(int argc, char **argv) {
    if (argc < 2) return fail("usage: forge-seq NAME SEQ...", NOTIFY_STATUS_INVALID_REQUEST);
    DBusConnection *conn = raw_connect();
    if (!conn) return 1;
    for (int i = 1; i < argc; i++)
        if (!raw_send(conn, argv[0], strtoull(argv[i], NULL, 10), -1)) return fail("send", NOTIFY_STATUS_FAILED);
    out("sent %d", argc - 1);
    dbus_connection_close(conn);
    dbus_connection_unref(conn);
    return 0;
}

/* forge-origin ORIGIN NAME:SEQ...: one raw connection posts each NAME with its SEQ and the origin
 * ORIGIN (PROTOCOL.md "Origins": a `t` after the sequence), in order, then exits: a bus-only
 * poster whose numbers the test chooses. */
int cmd_forge_origin(int argc, char **argv) {
    if (argc < 2) return fail("usage: forge-origin ORIGIN NAME:SEQ...", NOTIFY_STATUS_INVALID_REQUEST);
    dbus_uint64_t origin = strtoull(argv[0], NULL, 10);
    DBusConnection *conn = raw_connect();
    if (!conn) return 1;
    for (int i = 1; i < argc; i++) {
        char name[256];
        const char *colon = strrchr(argv[i], ':');
        if (!colon || (size_t)(colon - argv[i]) >= sizeof name) return fail("NAME:SEQ", NOTIFY_STATUS_INVALID_REQUEST);
        memcpy(name, argv[i], (size_t)(colon - argv[i]));
        name[colon - argv[i]] = 0;
        dbus_uint64_t seq = strtoull(colon + 1, NULL, 10);
        const char *arg = name;
        char iface[64];
        bucket(name, iface);
        DBusMessage *m = dbus_message_new_signal("/org/darwinnotify", iface, "Post");
        int ok = m && dbus_message_append_args(m, DBUS_TYPE_STRING, &arg, DBUS_TYPE_UINT64, &seq, DBUS_TYPE_UINT64, &origin,
                                               DBUS_TYPE_INVALID) && dbus_connection_send(conn, m, NULL);
        if (m) dbus_message_unref(m);
        if (!ok) return fail("send", NOTIFY_STATUS_FAILED);
    }
    dbus_connection_flush(conn);
    out("sent %d", argc - 1);
    dbus_connection_close(conn);
    dbus_connection_unref(conn);
    return 0;
}

/* forge-huge COUNT BYTES: posts COUNT distinct names of BYTES bytes each (the plain interface,
 * a sequence), as any process on the bus could: a monitor must not keep them. */
int cmd_forge_huge(int argc, char **argv) {
    if (argc < 2) return fail("usage: forge-huge COUNT BYTES", NOTIFY_STATUS_INVALID_REQUEST);
    long count = strtol(argv[0], NULL, 10), bytes = strtol(argv[1], NULL, 10);
    if (count < 1 || bytes < 16 || bytes > (64L << 20)) return fail("1+ names of 16 bytes to 64 MiB", NOTIFY_STATUS_INVALID_REQUEST);
    DBusConnection *conn = raw_connect();
    if (!conn) return 1;
    dbus_connection_set_max_message_size(conn, 128L << 20);
    char *name = malloc((size_t)bytes + 1);
    if (!name) return fail("malloc", NOTIFY_STATUS_FAILED);
    memset(name, 'n', (size_t)bytes);
    name[bytes] = '\0';
    for (long i = 0; i < count; i++) {
        snprintf(name, 16, "huge.%08ld", i);
        name[13] = 'n'; /* snprintf's NUL: the name goes on */
        dbus_uint64_t seq = 1;
        const char *arg = name;
        DBusMessage *m = dbus_message_new_signal("/org/darwinnotify", "org.darwinnotify.Notify", "Post");
        int ok = m && dbus_message_append_args(m, DBUS_TYPE_STRING, &arg, DBUS_TYPE_UINT64, &seq, DBUS_TYPE_INVALID) &&
                 dbus_connection_send(conn, m, NULL);
        if (m) dbus_message_unref(m);
        dbus_connection_flush(conn);
        if (!ok) return fail("send", NOTIFY_STATUS_FAILED);
    }
    free(name);
    out("sent %ld", count);
    dbus_connection_close(conn);
    dbus_connection_unref(conn);
    return 0;
}

/* replay NAME: listens for NAME's posts and sends the first one that carries a credential again,
 * the same arguments and the same descriptor, from this connection: what someone who receives a
 * legitimate restricted post could try. Prints "replayed" and exits. */
int cmd_replay(int argc, char **argv) {
    if (argc < 1) return fail("usage: replay NAME", NOTIFY_STATUS_INVALID_REQUEST);
    DBusConnection *conn = raw_connect();
    if (!conn) return 1;
    char iface[64], rule[256];
    bucket(argv[0], iface);
    snprintf(rule, sizeof rule, "type='signal',path='/org/darwinnotify',interface='%s',member='Post'", iface);
    DBusError err;
    dbus_error_init(&err);
    dbus_bus_add_match(conn, rule, &err);
    if (dbus_error_is_set(&err)) { fprintf(stderr, "cnotify-probe: AddMatch: %s\n", err.message); return 1; }
    out("ready");
    for (int waited = 0; waited < 30000 && dbus_connection_read_write(conn, 100); waited += 100) {
        DBusMessage *m;
        while ((m = dbus_connection_pop_message(conn))) {
            const char *name = NULL;
            dbus_uint64_t seq = 0;
            int fd = -1;
            if (dbus_message_is_signal(m, iface, "Post") &&
                dbus_message_get_args(m, NULL, DBUS_TYPE_STRING, &name, DBUS_TYPE_UINT64, &seq, DBUS_TYPE_UNIX_FD, &fd,
                                      DBUS_TYPE_INVALID) && !strcmp(name, argv[0])) {
                int ok = raw_send(conn, name, seq, fd);
                close(fd);
                dbus_message_unref(m);
                out(ok ? "replayed" : "replay failed");
                return ok ? 0 : 1;
            }
            dbus_message_unref(m);
        }
    }
    fprintf(stderr, "cnotify-probe: no post of %s with a credential arrived\n", argv[0]);
    return 2;
}

/* token-after-destroy NAME: a token on a created center, then the center destroyed: every call
 * on the token answers INVALID_TOKEN (2), as after notify_cancel. */
int cmd_token_after_destroy(int argc, char **argv) {
    if (argc < 1) return fail("usage: token-after-destroy NAME", NOTIFY_STATUS_INVALID_REQUEST);
    uint32_t st;
    CNotify_center *c = CNotify_center_create(NULL, &st);
    if (!c) return fail("create", st);
    int token, check = 0;
    if ((st = CNotify_center_register_check(c, argv[0], &token))) return fail("register_check", st);
    CNotify_center_destroy(c);
    out("check: %u", notify_check(token, &check));
    uint64_t v;
    out("get_state: %u", notify_get_state(token, &v));
    out("cancel: %u", notify_cancel(token));
    out("valid: %d", notify_is_valid_token(token));
    return 0;
}

static long peak_rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kb = atol(line + 6);
    if (f) fclose(f);
    return kb;
}

/* flood-until-refused NAME MAX: posts as fast as it can until a post fails or MAX are made;
 * prints "refused after N: STATUS ERROR peak_kb=K" or "accepted N peak_kb=K". */
int cmd_flood_until_refused(int argc, char **argv) {
    if (argc < 2) return fail("usage: flood-until-refused NAME MAX", NOTIFY_STATUS_INVALID_REQUEST);
    long max = atol(argv[1]);
    uint32_t st = notify_post(argv[0]); /* connects */
    if (st) return fail("first post", st);
    out("ready");
    for (long i = 1; i < max; i++) {
        st = notify_post(argv[0]);
        if (st) {
            out("refused after %ld: %u %s peak_kb=%ld", i, st, CNotify_last_error(), peak_rss_kb());
            return 0;
        }
    }
    out("accepted %ld peak_kb=%ld", max, peak_rss_kb());
    return 0;
}

/* post-loop NAME INTERVAL_US: posts every INTERVAL_US until stdin closes, then prints
 * "posted=OK failed=F" (a failed post is one made while the bus was away). */
int cmd_post_loop(int argc, char **argv) {
    if (argc < 2) return fail("usage: post-loop NAME INTERVAL_US", NOTIFY_STATUS_INVALID_REQUEST);
    long interval = atol(argv[1]);
    unsigned long long ok = 0, failed = 0;
    out("ready");
    for (;;) {
        if (notify_post(argv[0]) == NOTIFY_STATUS_OK) ok++; else failed++;
        if (stdin_closed(0)) break;
        struct timespec ts = { interval / 1000000, (interval % 1000000) * 1000 };
        nanosleep(&ts, NULL); /* pacing of the load, not synchronisation */
    }
    CNotify_center_flush(CNotify_center_get_darwin_notify_center(), 2000);
    out("posted=%llu failed=%llu", ok, failed);
    return 0;
}

static void ignore_namespace_cb(CNotify_center *c, void *observer, const char *name, const void *object, const void *info) {
    (void)c; (void)observer; (void)name; (void)object; (void)info;
}

static void watch_namespace_cb(CNotify_center *c, void *observer, const char *name, const void *object, const void *info) {
    (void)observer; (void)object; (void)info;
    out("%s unmatched=%llu", name, (unsigned long long)CNotify_center_unmatched_posts(c));
}

/* watch-namespace NS: prints "NAME unmatched=U" for each post under NS (U: posts received so far
 * that no observer wanted), until stdin closes. */
int cmd_watch_namespace(int argc, char **argv) {
    if (argc < 1) return fail("usage: watch-namespace NS", NOTIFY_STATUS_INVALID_REQUEST);
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    uint32_t st = CNotify_center_add_namespace_observer(c, NULL, watch_namespace_cb, argv[0]);
    if (st) return fail("add_namespace_observer", st);
    out("ready");
    while (!stdin_closed(1000)) {}
    return 0;
}

/* observe-namespace NS...: a namespace observer per argument, then "ready"; idles until stdin closes. */
int cmd_observe_namespace(int argc, char **argv) {
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    for (int i = 0; i < argc; i++) {
        uint32_t st = CNotify_center_add_namespace_observer(c, NULL, ignore_namespace_cb, argv[i]);
        if (st) return fail("add_namespace_observer", st);
    }
    out("ready");
    while (!stdin_closed(1000)) {}
    return 0;
}
