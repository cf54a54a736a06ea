/*
 * launch_bus.c: the launcher's D-Bus service on its bus (docs/PROTOCOL.md "Launch on post"):
 * the well-known name org.darwinnotify.Launcher, object /org/darwinnotify/Launcher, interface
 * org.darwinnotify.Launcher with Describe(s) -> (s kind, s target), Take(s job, s token, u wait_ms)
 * -> a(sut) and List() -> s. Also what the jobs need of the bus: StartServiceByName (sent, its
 * answer taken when it comes: never waited for on the loop thread), and who owns each service
 * job's name (NameOwnerChanged with arg0 the name; its owner asked once when a declaration is
 * read, which only the declaration's owner can cause). A private connection, driven by the
 * daemon's loop: read and dispatched when readable, written after each round of work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "launch.h"

#define LAUNCHER_NAME "org.darwinnotify.Launcher"
#define LAUNCHER_PATH "/org/darwinnotify/Launcher"
#define LAUNCHER_IFACE "org.darwinnotify.Launcher"

static DBusConnection *conn;
static const nd_launch_ops *ops;
static nd_file bus_file;
static char address[4096];

const char *nd_bus_address(void) { return address; }

static void reply_and_unref(DBusMessage *call, DBusMessage *reply) {
    if (reply) {
        dbus_connection_send(conn, reply, NULL);
        dbus_message_unref(reply);
    }
    dbus_message_unref(call);
}

void nd_bus_reply_error(DBusMessage *call, const char *error, const char *why) {
    reply_and_unref(call, dbus_message_new_error(call, error, why));
}

void nd_bus_reply_events(DBusMessage *call, const nd_event *events, size_t n) {
    DBusMessage *reply = dbus_message_new_method_return(call);
    DBusMessageIter it, array, entry;
    int ok = reply != NULL;
    if (ok) {
        dbus_message_iter_init_append(reply, &it);
        ok = dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "(sut)", &array);
        for (size_t i = 0; ok && i < n; i++) {
            ok = dbus_message_iter_open_container(&array, DBUS_TYPE_STRUCT, NULL, &entry) &&
                 dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &events[i].name) &&
                 dbus_message_iter_append_basic(&entry, DBUS_TYPE_UINT32, &events[i].count) &&
                 dbus_message_iter_append_basic(&entry, DBUS_TYPE_UINT64, &events[i].serial) &&
                 dbus_message_iter_close_container(&array, &entry);
        }
        ok = ok && dbus_message_iter_close_container(&it, &array);
    }
    if (!ok) {
        if (reply) dbus_message_unref(reply);
        nd_say("launcher: out of memory answering a Take: %zu events are lost", n);
        reply = dbus_message_new_error(call, DBUS_ERROR_NO_MEMORY, "the launcher is out of memory");
    }
    reply_and_unref(call, reply);
}

static DBusHandlerResult method(DBusMessage *m) {
    const char *member = dbus_message_get_member(m), *sender = dbus_message_get_sender(m);
    DBusError err;
    dbus_error_init(&err);
    if (!member || !sender) return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    dbus_message_ref(m);
    if (strcmp(member, "Describe") == 0) {
        const char *job = NULL, *target = NULL;
        int kind = 0;
        if (!dbus_message_get_args(m, &err, DBUS_TYPE_STRING, &job, DBUS_TYPE_INVALID)) {
            nd_bus_reply_error(m, DBUS_ERROR_INVALID_ARGS, err.message);
        } else if (ops->describe(job, &kind, &target) != 0) {
            nd_bus_reply_error(m, ND_ERROR_NO_SUCH_JOB, "no job of that label is declared to this launcher");
        } else {
            const char *k = kind == ND_JOB_SERVICE ? "service" : "exec";
            DBusMessage *r = dbus_message_new_method_return(m);
            if (r) dbus_message_append_args(r, DBUS_TYPE_STRING, &k, DBUS_TYPE_STRING, &target, DBUS_TYPE_INVALID);
            reply_and_unref(m, r);
        }
    } else if (strcmp(member, "Take") == 0) {
        const char *job = NULL, *token = NULL;
        dbus_uint32_t wait = 0;
        if (!dbus_message_get_args(m, &err, DBUS_TYPE_STRING, &job, DBUS_TYPE_STRING, &token, DBUS_TYPE_UINT32, &wait,
                                   DBUS_TYPE_INVALID))
            nd_bus_reply_error(m, DBUS_ERROR_INVALID_ARGS, err.message);
        else
            ops->take(m, sender, job, token, wait > ND_TAKE_WAIT_MAX_MS ? ND_TAKE_WAIT_MAX_MS : wait);
    } else if (strcmp(member, "List") == 0) {
        char *text = ops->list();
        DBusMessage *r = text ? dbus_message_new_method_return(m) : NULL;
        if (r) dbus_message_append_args(r, DBUS_TYPE_STRING, &text, DBUS_TYPE_INVALID);
        free(text);
        if (r) reply_and_unref(m, r);
        else nd_bus_reply_error(m, DBUS_ERROR_NO_MEMORY, "the launcher is out of memory");
    } else {
        nd_bus_reply_error(m, DBUS_ERROR_UNKNOWN_METHOD, "the launcher answers Describe, Take and List");
    }
    dbus_error_free(&err);
    return DBUS_HANDLER_RESULT_HANDLED;
}

static DBusHandlerResult on_message(DBusConnection *c, DBusMessage *m, void *data) {
    (void)c;
    (void)data;
    if (dbus_message_get_type(m) == DBUS_MESSAGE_TYPE_METHOD_CALL && dbus_message_has_path(m, LAUNCHER_PATH) &&
        dbus_message_has_interface(m, LAUNCHER_IFACE))
        return method(m);
    if (dbus_message_is_signal(m, DBUS_INTERFACE_DBUS, "NameOwnerChanged") && dbus_message_has_sender(m, DBUS_SERVICE_DBUS)) {
        const char *name = NULL, *old_owner = NULL, *new_owner = NULL;
        if (dbus_message_get_args(m, NULL, DBUS_TYPE_STRING, &name, DBUS_TYPE_STRING, &old_owner, DBUS_TYPE_STRING, &new_owner,
                                  DBUS_TYPE_INVALID))
            ops->owner_changed(name, new_owner);
        return DBUS_HANDLER_RESULT_HANDLED;
    }
    if (dbus_message_is_signal(m, DBUS_INTERFACE_LOCAL, "Disconnected")) {
        nd_say("launcher: the bus closed the connection; no job starts until darwin-notifyd runs again");
        nd_unwatch(&bus_file);
        return DBUS_HANDLER_RESULT_HANDLED;
    }
    return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
}

static void bus_ready(nd_file *f, uint32_t events) {
    (void)f;
    (void)events;
    if (!dbus_connection_read_write(conn, 0)) {
        nd_unwatch(&bus_file);
        return;
    }
    while (dbus_connection_dispatch(conn) == DBUS_DISPATCH_DATA_REMAINS) {}
    nd_bus_flush();
}

void nd_bus_flush(void) {
    if (!conn) return;
    /* What a blocking call (GetNameOwner at a reload) read meanwhile is dispatched here: the
     * socket will not poll readable for it. */
    while (dbus_connection_get_dispatch_status(conn) == DBUS_DISPATCH_DATA_REMAINS) dbus_connection_dispatch(conn);
    dbus_connection_flush(conn);
}

static char *rule_for(const char *service) {
    char *rule = NULL;
    if (asprintf(&rule, "type='signal',sender='" DBUS_SERVICE_DBUS "',interface='" DBUS_INTERFACE_DBUS
                        "',member='NameOwnerChanged',arg0='%s'", service) < 0)
        return NULL;
    return rule;
}

void nd_bus_follow(const char *service, int follow) {
    char *rule = rule_for(service);
    if (!rule || !conn) { free(rule); return; }
    DBusError err;
    dbus_error_init(&err);
    if (!follow) {
        dbus_bus_remove_match(conn, rule, NULL);
        free(rule);
        return;
    }
    dbus_bus_add_match(conn, rule, &err);
    free(rule);
    if (dbus_error_is_set(&err)) {
        nd_say("launcher: the bus refused to tell who owns %s: %s", service, err.message);
        dbus_error_free(&err);
        return;
    }
    DBusMessage *q = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS, DBUS_INTERFACE_DBUS, "GetNameOwner");
    if (!q || !dbus_message_append_args(q, DBUS_TYPE_STRING, &service, DBUS_TYPE_INVALID)) {
        if (q) dbus_message_unref(q);
        return;
    }
    DBusMessage *r = dbus_connection_send_with_reply_and_block(conn, q, 5000, &err);
    dbus_message_unref(q);
    const char *owner = "";
    if (r) dbus_message_get_args(r, NULL, DBUS_TYPE_STRING, &owner, DBUS_TYPE_INVALID);
    ops->owner_changed(service, owner ? owner : "");
    if (r) dbus_message_unref(r);
    dbus_error_free(&err);
}

static void started(DBusPendingCall *pending, void *data) {
    const char *service = data;
    DBusMessage *r = dbus_pending_call_steal_reply(pending);
    if (r && dbus_message_get_type(r) == DBUS_MESSAGE_TYPE_ERROR) {
        DBusError err;
        dbus_error_init(&err);
        dbus_set_error_from_message(&err, r);
        ops->start_failed(service, err.message ? err.message : dbus_message_get_error_name(r));
        dbus_error_free(&err);
    }
    if (r) dbus_message_unref(r);
    dbus_pending_call_unref(pending);
}

void nd_bus_start_service(const char *service) {
    DBusMessage *q = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS, DBUS_INTERFACE_DBUS, "StartServiceByName");
    dbus_uint32_t flags = 0;
    DBusPendingCall *pending = NULL;
    char *copy = strdup(service);
    if (!q || !copy || !dbus_message_append_args(q, DBUS_TYPE_STRING, &service, DBUS_TYPE_UINT32, &flags, DBUS_TYPE_INVALID) ||
        !dbus_connection_send_with_reply(conn, q, &pending, DBUS_TIMEOUT_USE_DEFAULT) || !pending ||
        !dbus_pending_call_set_notify(pending, started, copy, free)) {
        if (q) dbus_message_unref(q);
        if (pending) dbus_pending_call_unref(pending);
        else free(copy);
        ops->start_failed(service, "the launcher could not ask the bus to start it");
        return;
    }
    dbus_message_unref(q);
}

DBusConnection *nd_bus_open(const char *spec, char *resolved, size_t len) {
    char address[4096];
    if (CNotify_bus_address(spec, address, sizeof address) != NOTIFY_STATUS_OK) {
        nd_say("the bus %s: %s", spec, CNotify_last_error());
        return NULL;
    }
    DBusError err;
    dbus_error_init(&err);
    DBusConnection *c = dbus_connection_open_private(address, &err);
    if (c && !dbus_bus_register(c, &err)) {
        dbus_connection_close(c);
        dbus_connection_unref(c);
        c = NULL;
    }
    if (!c) nd_say("cannot reach the bus %s: %s", spec, err.message);
    else dbus_connection_set_exit_on_disconnect(c, FALSE);
    dbus_error_free(&err);
    if (c && resolved) snprintf(resolved, len, "%s", address);
    return c;
}

int nd_bus_start(const char *spec, const nd_launch_ops *o) {
    ops = o;
    DBusError err;
    dbus_error_init(&err);
    if (!(conn = nd_bus_open(spec, address, sizeof address))) {
        nd_say("launcher: no bus, so no launcher");
        return -1;
    }
    int got = dbus_bus_request_name(conn, LAUNCHER_NAME, DBUS_NAME_FLAG_DO_NOT_QUEUE, &err);
    if (got != DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER) {
        nd_say("launcher: cannot own %s on %s: %s", LAUNCHER_NAME, spec,
               dbus_error_is_set(&err) ? err.message : "another launcher runs on this bus");
        dbus_error_free(&err);
        dbus_connection_close(conn);
        dbus_connection_unref(conn);
        conn = NULL;
        return -1;
    }
    int fd = -1;
    if (!dbus_connection_add_filter(conn, on_message, NULL, NULL) || !dbus_connection_get_unix_fd(conn, &fd)) return -1;
    bus_file = (nd_file){ fd, bus_ready };
    return nd_watch(&bus_file, 0);
}
