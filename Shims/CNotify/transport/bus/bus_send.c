/*
 * bus_send.c: a post, and a flush, from the caller's thread. libdbus writes at once if the socket
 * takes it; what it could not write goes out with the next post, or from the loop after a grace
 * (bus_gate.c). No thread hop on the hot path, and no lock of the table held while waiting: the
 * connection and our identity on it are copied out under link.lock (cn_link_view_get), the
 * credential is built with no lock, and a poster the bus is behind waits on bus_gate.c's room.
 */
#include <stdio.h>
#include <unistd.h>
#include "bus.h"

/* Waits until the bus has taken the posts queued before this one down to CN_OUTGOING_MAX bytes:
 * a poster faster than the bus must not grow without bound. Returns 0 if the bus took nothing for
 * CN_POST_STALL_MS or went away. */
static int await_outgoing_room(cn_bus *b, DBusConnection *conn) {
    if (dbus_connection_get_outgoing_size(conn) <= (long)CN_OUTGOING_MAX) return 1;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        long waited = cn_elapsed_ms(&t0);
        if (waited >= CN_POST_STALL_MS || !dbus_connection_get_is_connected(conn)) return 0;
        /* Our own write first, non-blocking, as a single-threaded client would. */
        cn_gate_enter(b);
        dbus_connection_read_write(conn, 0);
        cn_gate_leave(b);
        if (dbus_connection_get_outgoing_size(conn) <= (long)CN_OUTGOING_MAX / 2) return 1;
        long left = CN_POST_STALL_MS - waited;
        cn_gate_await_room(b, left < 50 ? left : 50);
    }
}

static DBusMessage *build_post(const cn_link_view *view, const cn_outgoing_post *post) {
    /* A restricted name carries proof of our uid that outlives us (credentials.c). */
    int credential = -1;
    if (post->restricted && view->can_pass_fds && view->bus_id[0] && view->unique_name[0]) {
        credential = cn_credential_create(view->bus_id, view->unique_name, post->name, post->seq);
        if (credential < 0) return NULL;
    }
    DBusMessage *m = cn_wire_build(post->name, post->seq, credential, post->origin, post->count); /* libdbus keeps a duplicate */
    if (credential >= 0) close(credential);
    return m;
}

static uint32_t not_reachable(cn_bus *b) {
    cn_set_error("no bus is reachable at %s (reconnecting in the background)", cn_link_address(b));
    return NOTIFY_STATUS_SERVER_NOT_FOUND;
}

uint32_t cn_bus_ready(cn_bus *b) {
    /* The common case costs one atomic load: the last send found the bus keeping up. */
    if (!atomic_load_explicit(&b->behind, memory_order_acquire)) return NOTIFY_STATUS_OK;
    cn_link_view view;
    if (!cn_link_view_get(b, &view, 0)) return not_reachable(b);
    int room = await_outgoing_room(b, view.conn);
    size_t unsent = room ? 0 : (size_t)dbus_connection_get_outgoing_size(view.conn);
    dbus_connection_unref(view.conn);
    if (room) atomic_store_explicit(&b->behind, 0, memory_order_release);
    if (room) return NOTIFY_STATUS_OK;
    cn_set_error("the bus has not taken %zu bytes of earlier posts for %d s (is dbus-daemon stopped or "
                 "overloaded?); nothing more is posted meanwhile", unsent, CN_POST_STALL_MS / 1000);
    return NOTIFY_STATUS_FAILED;
}

/* Sends `m` (NULL: building failed, the error set) on the connection of `view`, never waiting. */
static uint32_t send_built(cn_bus *b, cn_link_view *view, DBusMessage *m) {
    int sent = 0;
    if (m) {
        cn_gate_send_enter(b);
        sent = dbus_connection_send(view->conn, m, NULL);
        cn_gate_send_leave(b, view->conn);
        dbus_message_unref(m);
        /* Behind: the next post waits for room first (cn_bus_ready), holding no lock. */
        if (dbus_connection_get_outgoing_size(view->conn) > (long)CN_OUTGOING_MAX)
            atomic_store_explicit(&b->behind, 1, memory_order_release);
    }
    dbus_connection_unref(view->conn);
    if (!m) return NOTIFY_STATUS_FAILED;
    if (!sent) { cn_set_error("out of memory"); return NOTIFY_STATUS_FAILED; }
    return NOTIFY_STATUS_OK;
}

uint32_t cn_bus_send(cn_bus *b, const cn_outgoing_post *post) {
    cn_link_view view;
    if (!cn_link_view_get(b, &view, post->restricted)) return not_reachable(b);
    return send_built(b, &view, build_post(&view, post));
}

uint32_t cn_bus_send_distributed(cn_bus *b, const cn_outgoing_distributed *post) {
    cn_link_view view;
    if (!cn_link_view_get(b, &view, 0)) return not_reachable(b);
    return send_built(b, &view, cn_distributed_build(post));
}

/* Writes in bounded steps, so a stopped or wedged dbus-daemon cannot hold us past the timeout (a
 * negative one waits until written or disconnected): our own non-blocking write, then the loop's. */
static int write_out(cn_bus *b, DBusConnection *conn, int timeout_ms, int *connected) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        cn_gate_enter(b);
        dbus_connection_read_write(conn, 0);
        *connected = dbus_connection_get_is_connected(conn);
        int pending = dbus_connection_has_messages_to_send(conn);
        cn_gate_leave(b);
        if (!*connected || !pending) return 1;
        long left = timeout_ms < 0 ? 50 : timeout_ms - cn_elapsed_ms(&t0);
        if (left <= 0) return 0;
        cn_gate_await_room(b, left < 50 ? left : 50);
    }
}

uint32_t cn_bus_flush(cn_bus *b, int timeout_ms) {
    if (!atomic_load(&b->started)) return NOTIFY_STATUS_OK; /* nothing was ever sent */
    cn_link_view view;
    if (!cn_link_view_get(b, &view, 0)) {
        cn_set_error("no bus is reachable: posts could not be written");
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    int connected = 1;
    int written = write_out(b, view.conn, timeout_ms, &connected);
    long pending = dbus_connection_get_outgoing_size(view.conn);
    dbus_connection_unref(view.conn);
    if (!connected) {
        cn_set_error("the bus went away before the posts were written");
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    if (!written) {
        cn_set_error("the bus did not take %ld bytes of posts within %d ms (is dbus-daemon stopped or overloaded?)",
                     pending, timeout_ms);
        return NOTIFY_STATUS_FAILED;
    }
    return NOTIFY_STATUS_OK;
}
