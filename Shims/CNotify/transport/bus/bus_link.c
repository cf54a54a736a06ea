/*
 * bus_link.c: the bus transport's connection and who we are on it. Opening it (private,
 * registered, never exiting the process on disconnect), learning its identity (the bus instance's
 * id and our unique name, which bind credentials), making it the current one, and taking it away
 * when it broke or the transport stops. Other files read it only through cn_link_view_get and the
 * getters below, which copy out under link.lock and never wait.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bus.h"

/* A reply awaited on one connection: dropping that connection signals it (libdbus does not always
 * complete the pending calls of a connection that broke while they were being sent). */
typedef struct cn_link_waiter {
    cn_completion *w;
    uint64_t gen;
    struct cn_link_waiter *next;
} cn_link_waiter;

void cn_link_init(cn_bus *b, char *address) {
    cn_mutex_init(&b->link.lock, CN_LOCK_LINK);
    atomic_init(&b->link.address, address);
}

void cn_link_free(cn_bus *b) {
    assert(b->link.conn == NULL); /* the loop thread closed it */
    assert(b->link.waiters == NULL);
    free(atomic_load(&b->link.address));
    cn_mutex_destroy(&b->link.lock);
}

const char *cn_link_address(cn_bus *b) {
    const char *a = atomic_load_explicit(&b->link.address, memory_order_acquire);
    return a ? a : "";
}

/* The embedded bus's address is known once it runs: kept the first time (it never changes). */
void cn_link_keep_address(cn_bus *b, char *address) {
    char *none = NULL;
    if (!atomic_compare_exchange_strong(&b->link.address, &none, address)) free(address);
}

static char *address_to_open(cn_bus *b) {
    char *address = NULL;
    if (b->kind == CN_BUS_EMBEDDED) {
        if (cn_embedded_ensure(&address) != NOTIFY_STATUS_OK) return NULL;
        char *kept = strdup(address);
        if (kept) cn_link_keep_address(b, kept);
        return address;
    }
    if (!(address = strdup(cn_link_address(b)))) cn_set_error("out of memory");
    return address;
}

static void learn_identity(cn_bus *b, DBusConnection *conn) {
    /* The bus instance's id binds the credentials of restricted posts to it (credentials.c).
     * Asked once per connection, before anyone else uses it; a bus that will not say leaves it
     * empty: our restricted posts then carry no credential, and we accept none. */
    char *bus_id = dbus_bus_get_id(conn, NULL);
    const char *unique = dbus_bus_get_unique_name(conn);
    cn_mutex_lock(&b->link.lock);
    snprintf(b->link.bus_id, sizeof b->link.bus_id, "%s", bus_id && strlen(bus_id) == CN_BUS_ID_LEN ? bus_id : "");
    snprintf(b->link.unique_name, sizeof b->link.unique_name, "%s", unique ? unique : "");
    b->link.can_pass_fds = dbus_connection_can_send_type(conn, DBUS_TYPE_UNIX_FD);
    cn_mutex_unlock(&b->link.lock);
    dbus_free(bus_id);
}

DBusConnection *cn_link_open(cn_bus *b) {
    char *address = address_to_open(b);
    if (!address) return NULL;
    DBusError err;
    dbus_error_init(&err);
    DBusConnection *conn = dbus_connection_open_private(address, &err);
    if (!conn) {
        cn_set_error("cannot reach the bus at %s: %s", address, err.message ? err.message : "unknown error");
    } else {
        dbus_connection_set_exit_on_disconnect(conn, FALSE);
        if (dbus_bus_register(conn, &err)) {
            learn_identity(b, conn);
        } else {
            cn_set_error("the bus at %s refused us: %s", address, err.message ? err.message : "unknown error");
            dbus_connection_close(conn); /* close before the last unref: a private connection */
            dbus_connection_unref(conn);
            conn = NULL;
        }
    }
    dbus_error_free(&err);
    free(address);
    return conn;
}

void cn_link_publish(cn_bus *b, DBusConnection *conn) {
    cn_mutex_lock(&b->link.lock);
    b->link.conn = conn;
    b->link.gen++;
    cn_mutex_unlock(&b->link.lock);
}

DBusConnection *cn_link_drop(cn_bus *b) {
    cn_mutex_lock(&b->link.lock);
    DBusConnection *conn = b->link.conn;
    b->link.conn = NULL;
    for (cn_link_waiter *lw = b->link.waiters; lw; lw = lw->next)
        if (lw->gen == b->link.gen) cn_completion_signal(lw->w); /* their reply died with the connection */
    cn_mutex_unlock(&b->link.lock);
    if (conn) {
        /* The close, which completes the connection's pending calls, with the gate held
         * exclusively: no poster or registrant is inside libdbus on this connection meanwhile.
         * libdbus drops and retakes its lock while it completes them, and a sender that met the
         * broken socket at the same moment once had one completed twice (a crash seen in the ASan
         * lane). Only the close: the caller's last dispatch runs callbacks, which take locks that
         * a registrant may hold while it waits for the gate. */
        int loop = cn_loop_on_thread(b->loop); /* else a first start that failed: no loop ever ran */
        if (loop) cn_gate_enter_exclusive(b);
        dbus_connection_close(conn);
        if (loop) cn_gate_leave_exclusive(b);
    }
    return conn;
}

int cn_link_view_get(cn_bus *b, cn_link_view *out, int with_identity) {
    cn_mutex_lock(&b->link.lock);
    out->conn = b->link.conn ? dbus_connection_ref(b->link.conn) : NULL;
    out->gen = b->link.conn ? b->link.gen : 0;
    out->can_pass_fds = b->link.can_pass_fds;
    if (with_identity) { /* only restricted posts need it: not copied for every post */
        memcpy(out->bus_id, b->link.bus_id, sizeof out->bus_id);
        memcpy(out->unique_name, b->link.unique_name, sizeof out->unique_name);
    }
    cn_mutex_unlock(&b->link.lock);
    return out->conn != NULL;
}

uint64_t cn_link_gen(cn_bus *b) {
    cn_mutex_lock(&b->link.lock);
    uint64_t gen = b->link.conn ? b->link.gen : 0;
    cn_mutex_unlock(&b->link.lock);
    return gen;
}

int cn_link_bus_id(cn_bus *b, char out[CN_BUS_ID_LEN + 1]) {
    cn_mutex_lock(&b->link.lock);
    memcpy(out, b->link.bus_id, CN_BUS_ID_LEN + 1);
    cn_mutex_unlock(&b->link.lock);
    return out[0] != '\0';
}

void cn_link_track(cn_bus *b, cn_completion *w, uint64_t gen) {
    cn_link_waiter *lw = malloc(sizeof *lw);
    cn_mutex_lock(&b->link.lock);
    int gone = b->link.gen != gen || !b->link.conn; /* dropped before we were listed */
    if (lw) {
        *lw = (cn_link_waiter){ w, gen, b->link.waiters };
        b->link.waiters = lw;
    }
    cn_mutex_unlock(&b->link.lock);
    if (gone) cn_completion_signal(w);
}

void cn_link_untrack(cn_bus *b, cn_completion *w) {
    cn_mutex_lock(&b->link.lock);
    for (cn_link_waiter **p = &b->link.waiters; *p; p = &(*p)->next)
        if ((*p)->w == w) {
            cn_link_waiter *gone = *p;
            *p = gone->next;
            free(gone);
            break;
        }
    cn_mutex_unlock(&b->link.lock);
}
