/*
 * services.c: what systemd-hostnamed and systemd-timedated announce on the system bus, for what
 * the kernel does not show: com.apple.system.hostname when the static or pretty host name
 * changes (the kernel's own host name is hostname.c's), com.apple.system.timezone when timedated's
 * Timezone changes (besides the shipped `monitor` of /etc/localtime, which covers a link replaced
 * by other means). Their PropertiesChanged signals are selected by match rules naming the
 * services' well-known names: the bus delivers only what the current owner of the name sent
 * (anyone may emit any signal; only the service may own its name on the system bus), so a forged
 * signal from another connection never reaches us.
 */
#include <dbus/dbus.h>
#include <string.h>
#include "notifyd.h"

static nd_file bus_file;
static DBusConnection *conn;

#define HOSTNAMED "org.freedesktop.hostname1"
#define TIMEDATED "org.freedesktop.timedate1"

/* Whether the changed (or invalidated) properties of a PropertiesChanged name one of `keys`. */
static int names_one_of(DBusMessage *m, const char *const *keys) {
    DBusMessageIter it, dict;
    const char *iface = NULL;
    if (!dbus_message_iter_init(m, &it) || dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_STRING) return 0;
    dbus_message_iter_get_basic(&it, &iface);
    for (int arg = 0; arg < 2 && dbus_message_iter_next(&it);) {
        if (dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_ARRAY) return 0;
        arg++;
        dbus_message_iter_recurse(&it, &dict);
        for (int t; (t = dbus_message_iter_get_arg_type(&dict)) != DBUS_TYPE_INVALID; dbus_message_iter_next(&dict)) {
            const char *key = NULL;
            if (t == DBUS_TYPE_DICT_ENTRY) {
                DBusMessageIter entry;
                dbus_message_iter_recurse(&dict, &entry);
                if (dbus_message_iter_get_arg_type(&entry) == DBUS_TYPE_STRING) dbus_message_iter_get_basic(&entry, &key);
            } else if (t == DBUS_TYPE_STRING) {
                dbus_message_iter_get_basic(&dict, &key); /* an invalidated property */
            }
            for (int k = 0; key && keys[k]; k++)
                if (strcmp(key, keys[k]) == 0) return 1;
        }
    }
    return 0;
}

static DBusHandlerResult on_message(DBusConnection *c, DBusMessage *m, void *data) {
    (void)c;
    (void)data;
    if (!dbus_message_is_signal(m, DBUS_INTERFACE_PROPERTIES, "PropertiesChanged"))
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    static const char *const host_keys[] = { "StaticHostname", "PrettyHostname", NULL };
    static const char *const zone_keys[] = { "Timezone", NULL };
    if (dbus_message_has_path(m, "/org/freedesktop/hostname1") && names_one_of(m, host_keys))
        nd_post("com.apple.system.hostname", "systemd-hostnamed changed the static or pretty host name");
    else if (dbus_message_has_path(m, "/org/freedesktop/timedate1") && names_one_of(m, zone_keys))
        nd_post("com.apple.system.timezone", "systemd-timedated changed the time zone");
    return DBUS_HANDLER_RESULT_HANDLED;
}

static void bus_ready(nd_file *f, uint32_t events) {
    (void)f;
    (void)events;
    if (!dbus_connection_read_write(conn, 0)) {
        nd_say("services: the system bus closed the connection; hostnamed's and timedated's changes are no longer seen");
        nd_unwatch(&bus_file);
        return;
    }
    while (dbus_connection_dispatch(conn) == DBUS_DISPATCH_DATA_REMAINS) {}
}

int nd_services_start(const char *address) {
    DBusError err;
    dbus_error_init(&err);
    conn = address ? dbus_connection_open_private(address, &err) : dbus_bus_get_private(DBUS_BUS_SYSTEM, &err);
    if (conn && address && !dbus_bus_register(conn, &err)) {
        dbus_connection_close(conn);
        dbus_connection_unref(conn);
        conn = NULL;
    }
    if (!conn) {
        nd_say("services: no system bus (%s): hostnamed's and timedated's changes are not seen", err.message);
        dbus_error_free(&err);
        return -1;
    }
    dbus_connection_set_exit_on_disconnect(conn, FALSE);
    const char *rules[] = {
        "type='signal',sender='" HOSTNAMED "',path='/org/freedesktop/hostname1',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged'",
        "type='signal',sender='" TIMEDATED "',path='/org/freedesktop/timedate1',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged'",
    };
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
        dbus_bus_add_match(conn, rules[i], &err);
        if (dbus_error_is_set(&err)) {
            nd_say("services: the bus refused a match rule: %s", err.message);
            dbus_error_free(&err);
        }
    }
    int fd = -1;
    if (!dbus_connection_add_filter(conn, on_message, NULL, NULL) || !dbus_connection_get_unix_fd(conn, &fd)) {
        nd_say("services: cannot watch the system bus connection");
        return -1;
    }
    bus_file = (nd_file){ fd, bus_ready };
    return nd_watch(&bus_file, 0);
}
