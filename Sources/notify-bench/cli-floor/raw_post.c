/*
 * raw_post.c: the least a command-line post can do with libdbus, as dbus-send does it: connect,
 * register (Hello), send one Post signal, flush. The start-up floors of cli-floor/run.sh call it
 * from a Swift main and from a C main, so that what remains between them is the language runtime.
 */
#include <stdlib.h>
#include <dbus/dbus.h>

int raw_post(const char *name) {
    DBusError err;
    dbus_error_init(&err);
    const char *address = getenv("DARWIN_NOTIFY_BUS");
    DBusConnection *conn = address ? dbus_connection_open_private(address, &err) : dbus_bus_get_private(DBUS_BUS_SESSION, &err);
    if (!conn || !dbus_bus_register(conn, &err)) return 1;
    DBusMessage *m = dbus_message_new_signal("/org/darwinnotify", "org.darwinnotify.Notify", "Post");
    if (!m || !dbus_message_append_args(m, DBUS_TYPE_STRING, &name, DBUS_TYPE_INVALID)) return 1;
    if (!dbus_connection_send(conn, m, NULL)) return 1;
    dbus_connection_flush(conn);
    return 0; /* exits right after, as dbus-send does: nothing to close */
}
