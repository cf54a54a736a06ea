/*
 * bus_gate.c: the gate between threads that send into libdbus and the loop thread, and the one
 * mechanism of quiet sends: the deferred wake-up, the backlog a poster leaves, and room.
 *
 * The gate: only the loop thread polls and handles watches, but a thread that sends (a post, an
 * AddMatch) may write on the socket, and on a broken socket libdbus removes and frees the watches
 * on that thread. Senders hold the gate shared around each (non-blocking) libdbus call; the loop
 * thread holds it exclusively around each watch or timeout handler. Both take it before any libdbus
 * lock, so the order never inverts (libdbus calls bus_watches.c with its connection lock held).
 *
 * Quiet sends: libdbus turns the write watch on and off around each send from another thread.
 * Waking the loop for that made it fight the poster for locks on every post of a flood (measured:
 * 42,000-56,000 context switches per 60,000 posts, against 1,600 for the raw-libdbus floor). So
 * while a thread sends, a watch change is only noted (cn_gate_wake); when the send is over, the
 * loop is woken only if it has work: messages the socket did not take yet, or another change.
 *
 * Room: a poster that finds the bus behind waits for the loop to write, on room.cond, holding no
 * lock of the table (base/base.h), and the loop says when it wrote (cn_gate_room_made).
 */
#include "bus.h"

static __thread cn_bus *tl_sending;
static __thread int tl_deferred;

void cn_gate_init(cn_bus *b) {
    /* Writer preference: a stream of posts must not starve the loop's reads. */
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&b->gate.rw.rw, &attr);
    b->gate.rw.level = CN_LOCK_GATE;
    pthread_rwlockattr_destroy(&attr);
    cn_mutex_init(&b->gate.room_lock, CN_LOCK_ROOM);
    pthread_cond_init(&b->gate.room, NULL);
}

void cn_gate_free(cn_bus *b) {
    pthread_rwlock_destroy(&b->gate.rw.rw);
    cn_mutex_destroy(&b->gate.room_lock);
    pthread_cond_destroy(&b->gate.room);
}

void cn_gate_enter(cn_bus *b) {
    if (!cn_loop_on_thread(b->loop)) cn_rwlock_rdlock(&b->gate.rw); /* the loop never races itself */
}

void cn_gate_leave(cn_bus *b) {
    if (!cn_loop_on_thread(b->loop)) cn_rwlock_unlock(&b->gate.rw);
}

void cn_gate_enter_exclusive(cn_bus *b) {
    assert(cn_loop_on_thread(b->loop));
    cn_rwlock_wrlock(&b->gate.rw);
}

void cn_gate_leave_exclusive(cn_bus *b) { cn_rwlock_unlock(&b->gate.rw); }

void cn_gate_wake(cn_bus *b, int what) {
    if (cn_loop_on_thread(b->loop)) { /* its next prepare looks (not this round's poll: as before) */
        cn_loop_unsettle(b->loop);
        return;
    }
    if (tl_sending == b) { tl_deferred |= what; return; } /* decided at cn_gate_send_leave */
    cn_loop_wake(b->loop);
}

void cn_gate_send_enter(cn_bus *b) {
    cn_gate_enter(b);
    if (cn_loop_on_thread(b->loop)) return;
    tl_sending = b;
    tl_deferred = 0;
}

void cn_gate_send_leave(cn_bus *b, DBusConnection *conn) {
    if (cn_loop_on_thread(b->loop)) { cn_gate_leave(b); return; }
    tl_sending = NULL;
    /* libdbus left the message queued: the socket was full, or the loop held the I/O path just
     * then (libdbus does not wait for it). The next post writes the backlog first, as in a
     * single-threaded client, which keeps the socket full during a flood. The loop is told once,
     * and writes what is left only after a grace with no post (bus_watches.c): it must not take
     * the I/O path from a poster that is still going. */
    int backlog = (tl_deferred & CN_DEFERRED_WRITE) && dbus_connection_has_messages_to_send(conn);
    int wake = (tl_deferred & CN_DEFERRED_OTHER) ||
               (backlog && !atomic_exchange_explicit(&b->gate.backlog, 1, memory_order_acq_rel));
    cn_gate_leave(b);
    if (wake) cn_loop_wake(b->loop);
}

int cn_gate_backlog_pending(cn_bus *b) { return atomic_load_explicit(&b->gate.backlog, memory_order_acquire); }

void cn_gate_take_backlog(cn_bus *b) { atomic_store_explicit(&b->gate.backlog, 0, memory_order_release); }

void cn_gate_await_room(cn_bus *b, long ms) {
    if (ms <= 0) return;
    cn_mutex_lock(&b->gate.room_lock);
    atomic_fetch_add_explicit(&b->gate.room_waiters, 1, memory_order_acq_rel);
    atomic_store_explicit(&b->gate.backlog, 1, memory_order_release); /* the loop writes after its grace */
    cn_loop_wake(b->loop);
    struct timespec deadline = cn_deadline_in(ms);
    cn_cond_timedwait(&b->gate.room, &b->gate.room_lock, &deadline);
    atomic_fetch_sub_explicit(&b->gate.room_waiters, 1, memory_order_acq_rel);
    cn_mutex_unlock(&b->gate.room_lock);
}

void cn_gate_room_made(cn_bus *b) {
    if (atomic_load_explicit(&b->gate.room_waiters, memory_order_acquire) == 0) return;
    cn_mutex_lock(&b->gate.room_lock);
    pthread_cond_broadcast(&b->gate.room);
    cn_mutex_unlock(&b->gate.room_lock);
}
