/*
 * send.c: posting from any thread, and the backlog such sends leave.
 *
 * A post is sent from the caller's thread: libdbus writes at once if the socket takes it; what
 * it could not write goes out with the next post, or from the I/O thread after a grace. No
 * thread hop on the hot path.
 *
 * Quiet sends: libdbus turns the write watch on and off around each send from another thread.
 * Waking the I/O thread for that made it fight the poster for locks on every post of a flood
 * (measured: 42,000-56,000 context switches per 60,000 posts, against 1,600 for the raw-libdbus
 * floor). So while a thread sends, watches.c only notes what changed (cn_send_defer_wake); when
 * the send is over, the I/O thread is woken only if it has work: messages the socket did not
 * take yet, or a change other than the write watch.
 */
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"

static __thread CNotify_center *tl_sending;
static __thread int tl_deferred;

int cn_send_defer_wake(CNotify_center *c, int what) {
    if (tl_sending != c) return 0;
    tl_deferred |= what;
    return 1;
}

int cn_send_backlog_pending(CNotify_center *c) {
    return atomic_load_explicit(&c->send.backlog, memory_order_acquire);
}

void cn_send_take_backlog(CNotify_center *c) { atomic_store_explicit(&c->send.backlog, 0, memory_order_release); }

void cn_send_free(CNotify_center *c) { cn_map_clear(&c->send.post_counts, NULL); }

void cn_send_enter(CNotify_center *c) {
    cn_gate_enter(c);
    if (cn_on_io_thread(c)) return;
    tl_sending = c;
    tl_deferred = 0;
}

void cn_send_leave(CNotify_center *c, DBusConnection *conn) {
    if (cn_on_io_thread(c)) { cn_gate_leave(c); return; }
    tl_sending = NULL;
    /* libdbus left the message queued: the socket was full, or the I/O thread held the I/O path
     * just then (libdbus does not wait for it). The next post writes the backlog first, as in a
     * single-threaded client, which keeps the socket full during a flood. The I/O thread is told
     * once, and writes what is left only after a grace with no post (watches.c): it must not take
     * the I/O path from a poster that is still going. */
    int backlog = (tl_deferred & CN_DEFERRED_WRITE) && dbus_connection_has_messages_to_send(conn);
    int wake = (tl_deferred & CN_DEFERRED_OTHER) ||
               (backlog && !atomic_exchange_explicit(&c->send.backlog, 1, memory_order_acq_rel));
    cn_gate_leave(c);
    if (wake) cn_io_wake(c);
}

static long elapsed_ms(const struct timespec *since) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - since->tv_sec) * 1000 + (t.tv_nsec - since->tv_nsec) / 1000000;
}

/* Waits (link.lock and the gate held) until the bus has taken the posts queued before this one
 * down to CN_OUTGOING_MAX bytes: a poster faster than the bus must not grow without bound.
 * libdbus writes (and reads, for the I/O thread to deliver) while we wait. Returns 0 if the bus
 * took nothing for CN_POST_STALL_MS or went away. */
static int await_outgoing_room_locked(CNotify_center *c, DBusConnection *conn) {
    CN_ASSERT_HELD(&c->link.lock);
    if (dbus_connection_get_outgoing_size(conn) <= (long)CN_OUTGOING_MAX) return 1;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        long waited = elapsed_ms(&t0);
        if (waited >= CN_POST_STALL_MS || !dbus_connection_get_is_connected(conn)) return 0;
        dbus_connection_read_write(conn, (int)(CN_POST_STALL_MS - waited));
        if (dbus_connection_get_outgoing_size(conn) <= (long)CN_OUTGOING_MAX / 2) return 1;
    }
}

uint32_t CNotify_center_post(CNotify_center *c, const char *name) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    CN_RETURN_IF_FORKED();
    if (cn_is_self_name(name)) return cn_self_post(c, name); /* never leaves the process */
    int restricted;
    if ((st = cn_may_write(name, &restricted)) != NOTIFY_STATUS_OK) return st; /* user.uid.N: N or root */
    if ((st = cn_center_start(c)) != NOTIFY_STATUS_OK) return st;
    pthread_mutex_lock(&c->link.lock);
    if (!c->link.connected || !c->link.conn) {
        pthread_mutex_unlock(&c->link.lock);
        cn_set_error("no bus is reachable at %s (reconnecting in the background)", c->address ? c->address : "?");
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    /* Numbered per (sender, name), so a receiver can tell when the bus dropped some (DESIGN.md). */
    uint64_t seq = cn_post_next_seq(&c->send.post_counts, name);
    /* A restricted name carries proof of our uid that outlives us (credentials.c). */
    int credential = -1;
    if (restricted && c->link.can_pass_fds && c->link.bus_id[0] && c->link.unique_name[0]) {
        credential = cn_credential_create(c->link.bus_id, c->link.unique_name, name, seq);
        if (credential < 0) {
            pthread_mutex_unlock(&c->link.lock);
            return NOTIFY_STATUS_FAILED;
        }
    }
    DBusMessage *m = cn_post_build(name, seq, credential); /* libdbus keeps a duplicate of the fd */
    if (credential >= 0) close(credential);
    if (!m) {
        pthread_mutex_unlock(&c->link.lock);
        return NOTIFY_STATUS_FAILED;
    }
    cn_send_enter(c);
    int room = await_outgoing_room_locked(c, c->link.conn);
    int sent = room && dbus_connection_send(c->link.conn, m, NULL);
    cn_send_leave(c, c->link.conn);
    size_t unsent = room ? 0 : (size_t)dbus_connection_get_outgoing_size(c->link.conn);
    pthread_mutex_unlock(&c->link.lock);
    dbus_message_unref(m);
    if (!room) {
        cn_set_error("the bus has not taken %zu bytes of earlier posts for %d s (is dbus-daemon stopped or "
                     "overloaded?); %s was not posted", unsent, CN_POST_STALL_MS / 1000, name);
        return NOTIFY_STATUS_FAILED;
    }
    if (!sent) { cn_set_error("out of memory"); return NOTIFY_STATUS_FAILED; }
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_center_flush(CNotify_center *c, int timeout_ms) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    CN_RETURN_IF_FORKED();
    if (!atomic_load(&c->io.started)) return NOTIFY_STATUS_OK; /* nothing was ever sent */
    DBusConnection *conn = cn_connection_current(c, &(uint64_t){0});
    if (!conn) {
        cn_set_error("no bus is reachable: posts could not be written");
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    /* Written in bounded steps, so a stopped or wedged dbus-daemon cannot hold us past the
     * timeout (a negative one waits until written or disconnected). */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int connected = 1, timed_out = 0;
    long pending = 0;
    cn_gate_enter(c);
    for (;;) {
        connected = dbus_connection_get_is_connected(conn);
        if (!connected || !dbus_connection_has_messages_to_send(conn)) break;
        long left = timeout_ms < 0 ? -1 : timeout_ms - elapsed_ms(&t0);
        if (timeout_ms >= 0 && left <= 0) { timed_out = 1; break; }
        dbus_connection_read_write(conn, (int)left);
    }
    pending = dbus_connection_get_outgoing_size(conn);
    cn_gate_leave(c);
    dbus_connection_unref(conn);
    if (!connected) {
        cn_set_error("the bus went away before the posts were written");
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    if (timed_out) {
        cn_set_error("the bus did not take %ld bytes of posts within %d ms (is dbus-daemon stopped or overloaded?)",
                     pending, timeout_ms);
        return NOTIFY_STATUS_FAILED;
    }
    return NOTIFY_STATUS_OK;
}
