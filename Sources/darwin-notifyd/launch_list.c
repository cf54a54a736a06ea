/*
 * launch_list.c: `darwin-notifyd --list`, a client of a running launcher: calls List on
 * org.darwinnotify.Launcher and prints its answer (one `job=…` line per job, `refused …` per file
 * not believed; docs/PROTOCOL.md "Launch on post"). Exit 0; 3 when no launcher runs on the bus;
 * 1 when the bus cannot be reached.
 */
#include <stdio.h>
#include <string.h>
#include "launch.h"

int nd_list(const char *bus) {
    DBusError err;
    dbus_error_init(&err);
    DBusConnection *c = NULL;
    if (strcmp(bus, "system") == 0 || strcmp(bus, "session") == 0) {
        c = dbus_bus_get_private(bus[1] == 'y' ? DBUS_BUS_SYSTEM : DBUS_BUS_SESSION, &err);
    } else if ((c = dbus_connection_open_private(bus, &err)) && !dbus_bus_register(c, &err)) {
        dbus_connection_close(c);
        dbus_connection_unref(c);
        c = NULL;
    }
    if (!c) {
        fprintf(stderr, "darwin-notifyd: cannot reach the bus %s: %s\n", bus, err.message);
        dbus_error_free(&err);
        return 1;
    }
    dbus_connection_set_exit_on_disconnect(c, FALSE);
    DBusMessage *q = dbus_message_new_method_call("org.darwinnotify.Launcher", "/org/darwinnotify/Launcher",
                                                  "org.darwinnotify.Launcher", "List");
    DBusMessage *r = q ? dbus_connection_send_with_reply_and_block(c, q, 5000, &err) : NULL;
    const char *text = NULL;
    int status = 0;
    if (r && dbus_message_get_args(r, &err, DBUS_TYPE_STRING, &text, DBUS_TYPE_INVALID)) {
        fputs(text, stdout);
        if (!text[0]) printf("no job is declared\n");
    } else if (dbus_error_has_name(&err, DBUS_ERROR_SERVICE_UNKNOWN) || dbus_error_has_name(&err, DBUS_ERROR_NAME_HAS_NO_OWNER)) {
        fprintf(stderr, "darwin-notifyd: no launcher runs on the bus %s\n", bus);
        status = 3;
    } else {
        fprintf(stderr, "darwin-notifyd: the launcher on %s did not answer: %s\n", bus, err.message ? err.message : "out of memory");
        status = 1;
    }
    if (q) dbus_message_unref(q);
    if (r) dbus_message_unref(r);
    dbus_error_free(&err);
    dbus_connection_close(c);
    dbus_connection_unref(c);
    return status;
}
