/*
 * bus_calls.c: method calls to the bus, and their replies, without libdbus's pending calls on the
 * shared connection.
 *
 * Why: libdbus is not safe when two threads use a connection at the moment it finds it broken
 * while a pending call is outstanding. The first call that sees the break times out every
 * pending call, dropping its connection lock once per call (dbus-connection.c,
 * connection_timeout_and_complete_all_pending_calls_unlocked), and a second thread that comes in
 * meanwhile does the same, queues the Disconnected message and clears it: the first then queues a
 * NULL link and crashes (seen under a bus restart: a SEGV in _dbus_list_prepend_link from
 * dbus_connection_send). With no pending call the break is handled under one hold of the lock.
 *
 * So a call made by any thread is numbered and listed here (the list's lock held across its send,
 * so its serial is known before its reply can be read), and the loop thread hands each reply to
 * its `done` from the receive filter: only a reply the bus itself sent (its sender
 * org.freedesktop.DBus, which nobody else may claim). A dropped connection answers every call
 * made on it with NULL, and so does a call's deadline. `done` runs on the loop thread, with no
 * lock held.
 *
 * One call still blocks: an AddMatch the loop thread itself makes (a registration inside a
 * callback), which cannot read its reply from inside libdbus's dispatch. It uses libdbus's pending
 * call with the gate held exclusively: no other thread is inside libdbus while it exists.
 */
#include <stdlib.h>
#include <string.h>
#include "bus.h"

void cn_calls_init(cn_bus *b) { cn_mutex_init(&b->calls.lock, CN_LOCK_CALLS); }

void cn_calls_free(cn_bus *b) {
    cn_calls_drop_all(b); /* none: the loop's stop answered them */
    free(b->calls.v);
    cn_mutex_destroy(&b->calls.lock);
}

int cn_calls_send(cn_bus *b, DBusConnection *conn, DBusMessage *call, int timeout_ms, cn_call_done done, void *ctx) {
    int sent = 0;
    cn_mutex_lock(&b->calls.lock);
    if (b->calls.n == b->calls.cap && b->calls.n < CN_CALLS_MAX) {
        size_t cap = b->calls.cap ? b->calls.cap * 2 : 8;
        cn_call *v = realloc(b->calls.v, cap * sizeof *v);
        if (v) { b->calls.v = v; b->calls.cap = cap; }
    }
    if (b->calls.n < b->calls.cap) {
        dbus_uint32_t serial = 0;
        cn_gate_send_enter(b);
        sent = dbus_connection_send(conn, call, &serial);
        cn_gate_send_leave(b, conn);
        if (sent) {
            b->calls.v[b->calls.n++] = (cn_call){ serial, cn_now_ms() + (uint64_t)timeout_ms, done, ctx };
            atomic_store_explicit(&b->calls.listed, b->calls.n, memory_order_relaxed);
        }
    }
    cn_mutex_unlock(&b->calls.lock);
    /* The loop sleeps until its earliest deadline: it learns of this one at its next prepare. */
    if (sent && !cn_loop_on_thread(b->loop)) cn_loop_wake(b->loop);
    return sent;
}

DBusMessage *cn_calls_credentials(const char *unique) {
    DBusMessage *call = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS, DBUS_INTERFACE_DBUS,
                                                     "GetConnectionCredentials");
    if (call && !dbus_message_append_args(call, DBUS_TYPE_STRING, &unique, DBUS_TYPE_INVALID)) {
        dbus_message_unref(call);
        call = NULL;
    }
    return call;
}

int cn_calls_receive(cn_bus *b, DBusMessage *msg) {
    int type = dbus_message_get_type(msg);
    if (type != DBUS_MESSAGE_TYPE_METHOD_RETURN && type != DBUS_MESSAGE_TYPE_ERROR) return 0;
    const char *sender = dbus_message_get_sender(msg);
    if (!sender || strcmp(sender, DBUS_SERVICE_DBUS) != 0) return 0; /* not the bus's: not ours */
    dbus_uint32_t serial = dbus_message_get_reply_serial(msg);
    cn_call found = { 0 };
    cn_mutex_lock(&b->calls.lock);
    for (size_t i = 0; i < b->calls.n; i++)
        if (b->calls.v[i].serial == serial) {
            found = b->calls.v[i];
            b->calls.v[i] = b->calls.v[--b->calls.n];
            atomic_store_explicit(&b->calls.listed, b->calls.n, memory_order_relaxed);
            break;
        }
    cn_mutex_unlock(&b->calls.lock);
    if (!found.done) return 0; /* a reply nobody awaits (AddMatch sent without waiting) */
    found.done(b, found.ctx, msg);
    return 1;
}

/* Answers with NULL, on the loop thread, every call listed (all) or those past their deadline,
 * and lowers *timeout_ms to the earliest deadline left (timeout_ms may be NULL). One pass over the
 * list takes out up to a batch of them under the lock; they are answered with no lock held, and
 * another pass is made only when the batch came full. */
static void answer_none(cn_bus *b, int all, int *timeout_ms) {
    enum { BATCH = 64 };
    uint64_t now = cn_now_ms(), earliest = UINT64_MAX;
    size_t taken;
    do {
        cn_call gone[BATCH];
        taken = 0;
        earliest = UINT64_MAX;
        cn_mutex_lock(&b->calls.lock);
        size_t kept = 0;
        for (size_t i = 0; i < b->calls.n; i++) {
            cn_call c = b->calls.v[i];
            if (taken < BATCH && (all || c.deadline_ms <= now)) {
                gone[taken++] = c;
                continue;
            }
            if (c.deadline_ms < earliest) earliest = c.deadline_ms;
            b->calls.v[kept++] = c;
        }
        b->calls.n = kept;
        atomic_store_explicit(&b->calls.listed, kept, memory_order_relaxed);
        cn_mutex_unlock(&b->calls.lock);
        for (size_t i = 0; i < taken; i++) gone[i].done(b, gone[i].ctx, NULL);
    } while (taken == BATCH);
    if (taken) { /* an answer may have listed a call: the earliest deadline is looked at again */
        earliest = UINT64_MAX;
        cn_mutex_lock(&b->calls.lock);
        for (size_t i = 0; i < b->calls.n; i++)
            if (b->calls.v[i].deadline_ms < earliest) earliest = b->calls.v[i].deadline_ms;
        cn_mutex_unlock(&b->calls.lock);
    }
    if (timeout_ms && earliest != UINT64_MAX) cn_loop_timeout_until(timeout_ms, earliest, now);
}

void cn_calls_expire(cn_bus *b, int *timeout_ms) {
    /* The usual round: nothing listed, and no lock taken (a call listed meanwhile wakes the loop). */
    if (atomic_load_explicit(&b->calls.listed, memory_order_relaxed) == 0) return;
    answer_none(b, 0, timeout_ms);
}

void cn_calls_drop_all(cn_bus *b) { answer_none(b, 1, NULL); }

DBusMessage *cn_calls_block(cn_bus *b, DBusConnection *conn, DBusMessage *call, int timeout_ms, DBusError *err) {
    assert(cn_loop_on_thread(b->loop));
    cn_gate_enter_exclusive(b);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(conn, call, timeout_ms, err);
    cn_gate_leave_exclusive(b);
    return reply;
}

/* ---- a call awaited by another thread than the loop ---- */

struct cn_awaited {
    cn_completion *c;               /* signalled by the answer, or by the connection's drop */
    _Atomic(DBusMessage *) reply;   /* the bus's reply (a reference), until the waiter takes it */
    atomic_int refs;                /* the waiter's and the list's */
};

static void awaited_unref(cn_awaited *a) {
    if (atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) != 1) return;
    DBusMessage *left = atomic_load(&a->reply);
    if (left) dbus_message_unref(left);
    cn_completion_unref(a->c);
    free(a);
}

static void awaited_done(cn_bus *b, void *ctx, DBusMessage *reply) {
    (void)b;
    cn_awaited *a = ctx;
    if (reply) atomic_store_explicit(&a->reply, dbus_message_ref(reply), memory_order_release);
    cn_completion_signal(a->c);
    awaited_unref(a);
}

cn_awaited *cn_calls_begin(cn_bus *b, DBusConnection *conn, DBusMessage *call, int timeout_ms) {
    cn_awaited *a = calloc(1, sizeof *a);
    if (!a || !(a->c = cn_completion_new())) { free(a); return NULL; }
    atomic_init(&a->refs, 2);
    if (!cn_calls_send(b, conn, call, timeout_ms, awaited_done, a)) {
        cn_completion_unref(a->c);
        free(a);
        return NULL;
    }
    return a;
}

DBusMessage *cn_calls_finish(cn_bus *b, cn_awaited *a, uint64_t gen, long wait_ms, int *over) {
    cn_link_track(b, a->c, gen); /* its connection dropping ends the wait too */
    *over = cn_completion_wait(a->c, NULL, NULL, wait_ms);
    cn_link_untrack(b, a->c);
    DBusMessage *reply = atomic_exchange_explicit(&a->reply, NULL, memory_order_acq_rel);
    awaited_unref(a);
    return reply;
}
