/*
 * bus_launch.c: a job's check-in with darwin-notifyd's launcher (docs/PROTOCOL.md "Launch on
 * post"): on a private connection to the launcher's bus, Describe(job) says whether the job is a
 * service or a command; a service job's check-in then owns the service name (RequestName, not
 * queued: the launcher believes the name's owner); Take(job, token, wait) is asked until the
 * process ends, each answer's events handed to the handler on this file's thread, in order. The
 * launcher consumes an event when it answers with it, so nothing is asked twice. Once per process.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bus.h"

#define LAUNCHER "org.darwinnotify.Launcher"
#define LAUNCHER_PATH "/org/darwinnotify/Launcher"
#define TAKE_WAIT_MS 25000u

typedef struct {
    DBusConnection *conn;
    char *job, *token;
    CNotify_launch_handler handler;
    void *context;
    DBusMessage *first; /* the first answer, delivered by the thread */
} checkin;

static cn_mutex once_lock = CN_MUTEX_INITIALIZER(CN_LOCK_LAUNCH); /* guards `checked_in` only */
static int checked_in;

static DBusMessage *take(checkin *c, uint32_t wait_ms, DBusError *err) {
    DBusMessage *q = dbus_message_new_method_call(LAUNCHER, LAUNCHER_PATH, LAUNCHER, "Take");
    if (!q || !dbus_message_append_args(q, DBUS_TYPE_STRING, &c->job, DBUS_TYPE_STRING, &c->token, DBUS_TYPE_UINT32, &wait_ms,
                                        DBUS_TYPE_INVALID)) {
        if (q) dbus_message_unref(q);
        dbus_set_error_const(err, DBUS_ERROR_NO_MEMORY, "out of memory");
        return NULL;
    }
    DBusMessage *r = dbus_connection_send_with_reply_and_block(c->conn, q, (int)wait_ms + 10000, err);
    dbus_message_unref(q);
    return r;
}

/* Hands each event of an answer to the handler; 0 if the answer is not a Take's. */
static int deliver(checkin *c, DBusMessage *r) {
    DBusMessageIter it, array, entry;
    if (!dbus_message_iter_init(r, &it) || strcmp(dbus_message_get_signature(r), "a(sut)") != 0) return 0;
    dbus_message_iter_recurse(&it, &array);
    for (; dbus_message_iter_get_arg_type(&array) == DBUS_TYPE_STRUCT; dbus_message_iter_next(&array)) {
        CNotify_launch_event ev = { 0 };
        dbus_uint32_t count = 0;
        dbus_uint64_t serial = 0;
        dbus_message_iter_recurse(&array, &entry);
        dbus_message_iter_get_basic(&entry, &ev.name);
        dbus_message_iter_next(&entry);
        dbus_message_iter_get_basic(&entry, &count);
        dbus_message_iter_next(&entry);
        dbus_message_iter_get_basic(&entry, &serial);
        ev.count = count;
        ev.serial = serial;
        c->handler(c->context, &ev);
    }
    return 1;
}

static void *run(void *arg) {
    checkin *c = arg;
    DBusMessage *r = c->first;
    for (;;) {
        if (r) {
            deliver(c, r);
            dbus_message_unref(r);
        }
        DBusError err;
        dbus_error_init(&err);
        r = take(c, TAKE_WAIT_MS, &err);
        if (r) continue;
        int again = dbus_error_has_name(&err, DBUS_ERROR_NO_REPLY) || dbus_error_has_name(&err, DBUS_ERROR_TIMEOUT);
        if (!again) fprintf(stderr, "darwin-notify: %s: no more launch events: %s\n", c->job, err.message ? err.message : "?");
        dbus_error_free(&err);
        if (!again) break;
    }
    return NULL;
}

/* A private connection to `bus`, resolved as every center resolves it (CNotify_bus_address:
 * "session", "system", "embedded" or an address). */
static DBusConnection *connect_to(const char *bus, uint32_t *st) {
    char address[4096];
    if ((*st = CNotify_bus_address(bus, address, sizeof address)) != NOTIFY_STATUS_OK) return NULL;
    DBusError err;
    dbus_error_init(&err);
    DBusConnection *conn = dbus_connection_open_private(address, &err);
    if (conn && !dbus_bus_register(conn, &err)) {
        dbus_connection_close(conn);
        dbus_connection_unref(conn);
        conn = NULL;
    }
    if (!conn) {
        cn_set_error("cannot reach the launcher's bus %s: %s", bus, err.message);
        *st = NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    dbus_error_free(&err);
    return conn;
}

/* What a launcher's error means to the caller. */
static uint32_t status_of(const DBusError *err, const char *job, const char *bus) {
    if (dbus_error_has_name(err, "org.darwinnotify.Launcher.Error.NoSuchJob")) {
        cn_set_error("the launcher on %s declares no job '%s'", bus, job);
        return NOTIFY_STATUS_INVALID_NAME;
    }
    if (dbus_error_has_name(err, "org.darwinnotify.Launcher.Error.NotTheJob")) {
        cn_set_error("not the job '%s': %s", job, err->message);
        return NOTIFY_STATUS_NOT_AUTHORIZED;
    }
    if (dbus_error_has_name(err, DBUS_ERROR_SERVICE_UNKNOWN) || dbus_error_has_name(err, DBUS_ERROR_NAME_HAS_NO_OWNER)) {
        cn_set_error("no launcher (darwin-notifyd) runs on %s", bus);
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    cn_set_error("the launcher on %s: %s", bus, err->message ? err->message : "no answer");
    return NOTIFY_STATUS_FAILED;
}

static uint32_t check_in(checkin *c, const char *bus) {
    uint32_t st;
    if (!(c->conn = connect_to(bus, &st))) return st;
    DBusError err;
    dbus_error_init(&err);
    dbus_connection_set_exit_on_disconnect(c->conn, FALSE);
    DBusMessage *q = dbus_message_new_method_call(LAUNCHER, LAUNCHER_PATH, LAUNCHER, "Describe"), *r = NULL;
    if (q && dbus_message_append_args(q, DBUS_TYPE_STRING, &c->job, DBUS_TYPE_INVALID))
        r = dbus_connection_send_with_reply_and_block(c->conn, q, 10000, &err);
    if (q) dbus_message_unref(q);
    const char *kind = NULL, *target = NULL;
    if (!r || !dbus_message_get_args(r, &err, DBUS_TYPE_STRING, &kind, DBUS_TYPE_STRING, &target, DBUS_TYPE_INVALID))
        st = status_of(&err, c->job, bus);
    if (st == NOTIFY_STATUS_OK && strcmp(kind, "service") == 0) {
        int got = dbus_bus_request_name(c->conn, target, DBUS_NAME_FLAG_DO_NOT_QUEUE, &err);
        if (got != DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER && got != DBUS_REQUEST_NAME_REPLY_ALREADY_OWNER) {
            cn_set_error("the job '%s' is the service %s, and this process cannot own that name: %s", c->job, target,
                         dbus_error_is_set(&err) ? err.message : "another connection owns it");
            st = NOTIFY_STATUS_NOT_AUTHORIZED;
        }
    }
    if (r) dbus_message_unref(r);
    dbus_error_free(&err);
    if (st == NOTIFY_STATUS_OK && !(c->first = take(c, 0, &err))) st = status_of(&err, c->job, bus);
    dbus_error_free(&err);
    return st;
}

uint32_t cn_launch_check_in(const char *job, const char *bus, CNotify_launch_handler handler, void *context) {
    if (!job) job = getenv("DARWIN_NOTIFY_JOB");
    if (!job || !job[0]) {
        cn_set_error("no job: give its label, or run as a job the launcher started ($DARWIN_NOTIFY_JOB)");
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    if (!bus) bus = getenv("DARWIN_NOTIFY_LAUNCHER_BUS");
    if (!bus || !bus[0]) bus = getenv("DBUS_STARTER_ADDRESS");
    if (!bus || !bus[0]) {
        const char *session = getenv("DBUS_SESSION_BUS_ADDRESS");
        bus = geteuid() == 0 || !session || !session[0] ? "system" : "session";
    }
    cn_mutex_lock(&once_lock);
    int already = checked_in;
    checked_in = 1;
    cn_mutex_unlock(&once_lock);
    if (already) {
        cn_set_error("this process has checked in already (once per process, as xpc_set_event_stream_handler)");
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    const char *token = getenv("DARWIN_NOTIFY_LAUNCH_TOKEN");
    checkin *c = calloc(1, sizeof *c);
    uint32_t st = NOTIFY_STATUS_FAILED;
    if (c && (c->job = strdup(job)) && (c->token = strdup(token ? token : ""))) {
        c->handler = handler;
        c->context = context;
        st = check_in(c, bus);
    } else {
        cn_set_error("out of memory");
    }
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (st == NOTIFY_STATUS_OK && pthread_create(&thread, &attr, run, c) != 0) {
        cn_set_error("cannot start the thread that takes launch events");
        st = NOTIFY_STATUS_FAILED;
    }
    pthread_attr_destroy(&attr);
    if (st != NOTIFY_STATUS_OK) {
        if (c && c->first) dbus_message_unref(c->first);
        if (c && c->conn) { dbus_connection_close(c->conn); dbus_connection_unref(c->conn); }
        if (c) { free(c->job); free(c->token); free(c); }
        cn_mutex_lock(&once_lock);
        checked_in = 0;
        cn_mutex_unlock(&once_lock);
    }
    return st;
}
