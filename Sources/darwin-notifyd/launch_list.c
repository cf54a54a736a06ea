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
    DBusConnection *c = nd_bus_open(bus, NULL, 0);
    if (!c) return 1;
    DBusError err;
    dbus_error_init(&err);
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
