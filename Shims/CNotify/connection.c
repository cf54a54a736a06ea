/*
 * connection.c: a center's connection to its bus. Opening it (private, registered, never
 * exiting the process on disconnect), learning its identity (the bus instance's id and our
 * unique name, which bind credentials), publishing it to other threads with every rule the
 * registry needs, and closing it when it broke or the center stops.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

void cn_link_init(CNotify_center *c) {
    pthread_mutex_init(&c->link.lock, NULL);
    pthread_cond_init(&c->link.cond, NULL);
}

void cn_link_free(CNotify_center *c) {
    assert(c->link.conn == NULL); /* the I/O thread closed it */
    pthread_mutex_destroy(&c->link.lock);
    pthread_cond_destroy(&c->link.cond);
}

DBusConnection *cn_connection_current(CNotify_center *c, uint64_t *gen) {
    pthread_mutex_lock(&c->link.lock);
    DBusConnection *conn = c->link.conn ? dbus_connection_ref(c->link.conn) : NULL;
    *gen = c->link.gen;
    pthread_mutex_unlock(&c->link.lock);
    return conn;
}

uint64_t cn_connection_gen(CNotify_center *c) {
    pthread_mutex_lock(&c->link.lock);
    uint64_t gen = c->link.gen;
    pthread_mutex_unlock(&c->link.lock);
    return gen;
}

DBusConnection *cn_connect(CNotify_center *c) {
    char *address = NULL;
    if (c->kind == CN_BUS_EMBEDDED) {
        if (cn_embedded_ensure(&address) != NOTIFY_STATUS_OK) return NULL;
    } else if (!(address = strdup(c->address))) {
        cn_set_error("out of memory");
        return NULL;
    }
    DBusError err;
    dbus_error_init(&err);
    DBusConnection *conn = dbus_connection_open_private(address, &err);
    if (!conn) {
        cn_set_error("cannot reach the bus at %s: %s", address, err.message ? err.message : "unknown error");
        goto fail;
    }
    dbus_connection_set_exit_on_disconnect(conn, FALSE);
    if (!dbus_bus_register(conn, &err)) {
        cn_set_error("the bus at %s refused us: %s", address, err.message ? err.message : "unknown error");
        goto fail_close;
    }
    if (!dbus_connection_add_filter(conn, cn_receive_filter, c, NULL) || !cn_watches_install(c, conn)) {
        cn_set_error("out of memory while setting up the bus connection");
        goto fail_close;
    }
    /* The bus instance's id binds the credentials of restricted posts to it (credentials.c).
     * Asked once per connection, before anyone else uses it; a bus that will not say leaves it
     * empty: our restricted posts then carry no credential, and we accept none. */
    char *bus_id = dbus_bus_get_id(conn, NULL);
    const char *unique = dbus_bus_get_unique_name(conn);
    pthread_mutex_lock(&c->link.lock);
    snprintf(c->link.bus_id, sizeof c->link.bus_id, "%s", bus_id && strlen(bus_id) == CN_BUS_ID_LEN ? bus_id : "");
    snprintf(c->link.unique_name, sizeof c->link.unique_name, "%s", unique ? unique : "");
    c->link.can_pass_fds = dbus_connection_can_send_type(conn, DBUS_TYPE_UNIX_FD);
    if (c->kind == CN_BUS_EMBEDDED || !c->address) { free(c->address); c->address = address; address = NULL; }
    pthread_mutex_unlock(&c->link.lock);
    free(address);
    dbus_free(bus_id);
    return conn;

fail_close:
    dbus_connection_close(conn);
    dbus_connection_unref(conn);
fail:
    dbus_error_free(&err);
    free(address);
    return NULL;
}

void cn_connection_publish(CNotify_center *c, DBusConnection *conn) {
    pthread_mutex_lock(&c->registry.lock);
    pthread_mutex_lock(&c->link.lock);
    c->link.conn = conn;
    c->link.connected = 1;
    c->link.gen++;
    /* A new connection is a new sender (a new unique name): its numbering starts again at 1. */
    cn_map_clear(&c->send.post_counts, NULL);
    pthread_cond_broadcast(&c->link.cond);
    pthread_mutex_unlock(&c->link.lock);
    cn_rules_after_connect_locked(c, conn);
    pthread_cond_broadcast(&c->registry.cond); /* registrants waiting on the old connection's rules */
    pthread_mutex_unlock(&c->registry.lock);
}

void cn_connection_drop(CNotify_center *c) {
    assert(cn_on_io_thread(c));
    pthread_mutex_lock(&c->link.lock);
    DBusConnection *conn = c->link.conn;
    c->link.conn = NULL;
    c->link.connected = 0;
    cn_rules_release_waiters_locked(c, c->link.gen); /* their AddMatch died with the connection */
    pthread_cond_broadcast(&c->link.cond);
    pthread_mutex_unlock(&c->link.lock);
    if (conn) {
        /* The close, which completes the connection's pending calls, with the gate held
         * exclusively: no poster or registrant is inside libdbus on this connection meanwhile.
         * libdbus drops and retakes its lock while it completes them, and a sender that met the
         * broken socket at the same moment once had one completed twice (a crash seen in the ASan
         * lane). Only the close: the libdbus dispatch below runs callbacks, which take
         * registry.lock, which a registrant may hold while it waits for the gate. */
        cn_gate_enter_exclusive(c);
        dbus_connection_close(conn); /* close before the last unref: a private connection */
        cn_gate_leave_exclusive(c);
        /* Once more through libdbus's dispatch, so libdbus completes what pending calls it can
         * and hands us the posts it had already read. Registering threads do not depend on it:
         * they were released above (libdbus does not complete every pending call of a broken
         * connection). */
        while (dbus_connection_dispatch(conn) == DBUS_DISPATCH_DATA_REMAINS) {}
        dbus_connection_unref(conn);
    }
    /* What we knew of senders was true of this connection's bus instance only: a restarted
     * daemon hands out the same unique names (:1.1, ...) to other processes. */
    cn_sender_cache_reset(c);
    cn_delivery_reset_sequences(c);
}
