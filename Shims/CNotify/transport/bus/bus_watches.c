/*
 * bus_watches.c: libdbus's DBusWatch and DBusTimeout objects as descriptors and deadlines of the
 * loop (never the raw fd: libdbus decides what to watch). The loop thread alone polls and handles
 * them, each handler inside the gate held exclusively (bus_gate.c). watches.lock guards only the
 * arrays and is never held across a libdbus call.
 */
#include <stdlib.h>
#include <string.h>
#include "bus.h"

void cn_watches_init(cn_bus *b) { cn_mutex_init(&b->watches.lock, CN_LOCK_WATCHES); }

void cn_watches_free(cn_bus *b) {
    free(b->watches.watches);
    free(b->watches.timeouts);
    free(b->watches.deadlines);
    cn_mutex_destroy(&b->watches.lock);
}

/* ---- what libdbus calls ---- */

static dbus_bool_t add_watch(DBusWatch *w, void *data) {
    cn_bus *b = data;
    cn_bus_watches *ws = &b->watches;
    cn_mutex_lock(&ws->lock);
    if (ws->nwatches == ws->capwatches) {
        size_t cap = ws->capwatches ? ws->capwatches * 2 : 4;
        DBusWatch **n = realloc(ws->watches, cap * sizeof *n);
        if (!n) { cn_mutex_unlock(&ws->lock); return FALSE; }
        ws->watches = n; ws->capwatches = cap;
    }
    ws->watches[ws->nwatches++] = w;
    cn_mutex_unlock(&ws->lock);
    cn_gate_wake(b, CN_DEFERRED_OTHER);
    return TRUE;
}

static void remove_watch(DBusWatch *w, void *data) {
    cn_bus_watches *ws = &((cn_bus *)data)->watches;
    cn_mutex_lock(&ws->lock);
    for (size_t i = 0; i < ws->nwatches; i++)
        if (ws->watches[i] == w) { ws->watches[i] = ws->watches[--ws->nwatches]; break; }
    cn_mutex_unlock(&ws->lock);
    /* Its descriptor is not polled again, and libdbus may close it now: the loop's entry for it
     * is checked against the kernel at the next prepare (a new connection may get its number). */
    cn_loop_note_close(((cn_bus *)data)->loop);
    cn_loop_unsettle(((cn_bus *)data)->loop);
}

static void toggle_watch(DBusWatch *w, void *data) {
    cn_gate_wake(data, (dbus_watch_get_flags(w) & DBUS_WATCH_WRITABLE) ? CN_DEFERRED_WRITE : CN_DEFERRED_OTHER);
}

static int watch_alive(cn_bus_watches *ws, DBusWatch *w) {
    int alive = 0;
    cn_mutex_lock(&ws->lock);
    for (size_t i = 0; i < ws->nwatches && !alive; i++) alive = ws->watches[i] == w;
    cn_mutex_unlock(&ws->lock);
    return alive;
}

static dbus_bool_t add_timeout(DBusTimeout *t, void *data) {
    cn_bus *b = data;
    cn_bus_watches *ws = &b->watches;
    cn_mutex_lock(&ws->lock);
    if (ws->ntimeouts == ws->captimeouts) {
        size_t cap = ws->captimeouts ? ws->captimeouts * 2 : 4;
        DBusTimeout **n = realloc(ws->timeouts, cap * sizeof *n);
        if (n) ws->timeouts = n;
        uint64_t *d = realloc(ws->deadlines, cap * sizeof *d);
        if (d) ws->deadlines = d;
        if (!n || !d) { cn_mutex_unlock(&ws->lock); return FALSE; }
        ws->captimeouts = cap;
    }
    ws->timeouts[ws->ntimeouts] = t;
    ws->deadlines[ws->ntimeouts] = cn_now_ms() + (uint64_t)dbus_timeout_get_interval(t);
    ws->ntimeouts++;
    cn_mutex_unlock(&ws->lock);
    cn_gate_wake(b, CN_DEFERRED_OTHER);
    return TRUE;
}

static void remove_timeout(DBusTimeout *t, void *data) {
    cn_bus_watches *ws = &((cn_bus *)data)->watches;
    cn_mutex_lock(&ws->lock);
    for (size_t i = 0; i < ws->ntimeouts; i++)
        if (ws->timeouts[i] == t) {
            ws->ntimeouts--;
            ws->timeouts[i] = ws->timeouts[ws->ntimeouts];
            ws->deadlines[i] = ws->deadlines[ws->ntimeouts];
            break;
        }
    cn_mutex_unlock(&ws->lock);
}

static void toggle_timeout(DBusTimeout *t, void *data) {
    cn_bus *b = data;
    cn_bus_watches *ws = &b->watches;
    cn_mutex_lock(&ws->lock);
    for (size_t i = 0; i < ws->ntimeouts; i++)
        if (ws->timeouts[i] == t) ws->deadlines[i] = cn_now_ms() + (uint64_t)dbus_timeout_get_interval(t);
    cn_mutex_unlock(&ws->lock);
    cn_gate_wake(b, CN_DEFERRED_OTHER);
}

/* A flush on another thread may read messages into libdbus's queue: make the loop hand
 * them to libdbus's dispatch (dbus_connection_dispatch, libdbus's word), and so to delivery. */
static void on_dispatch_status(DBusConnection *conn, DBusDispatchStatus status, void *data) {
    (void)conn;
    if (status == DBUS_DISPATCH_DATA_REMAINS) cn_gate_wake(data, CN_DEFERRED_OTHER);
}

/* libdbus calls this after a send that left messages queued: write work, as for the write watch. */
static void wakeup_main(void *data) { cn_gate_wake(data, CN_DEFERRED_WRITE); }

int cn_watches_install(cn_bus *b, DBusConnection *conn) {
    if (!dbus_connection_set_watch_functions(conn, add_watch, remove_watch, toggle_watch, b, NULL) ||
        !dbus_connection_set_timeout_functions(conn, add_timeout, remove_timeout, toggle_timeout, b, NULL))
        return 0;
    dbus_connection_set_wakeup_main_function(conn, wakeup_main, b, NULL);
    dbus_connection_set_dispatch_status_function(conn, on_dispatch_status, b, NULL);
    return 1;
}

/* ---- the loop's side (loop thread) ---- */

size_t cn_watches_prepare(cn_bus *b, struct pollfd *fds, size_t cap, int *timeout_ms) {
    assert(cn_loop_on_thread(b->loop));
    cn_bus_watches *ws = &b->watches;
    size_t n = 0;
    int timeout = -1; /* stays -1 when no timeout is enabled: then nothing can be due */
    uint64_t now = cn_now_ms();
    /* A poster left a backlog (cn_gate_send_leave): leave the writing to it for a grace period,
     * during which the flag stays set, so posters do not wake the loop again. */
    ws->grace = cn_gate_backlog_pending(b);
    cn_mutex_lock(&ws->lock);
    for (size_t i = 0; i < ws->nwatches && n < cap; i++) {
        DBusWatch *w = ws->watches[i];
        if (!dbus_watch_get_enabled(w)) continue;
        unsigned flags = dbus_watch_get_flags(w);
        if (ws->grace && (flags & DBUS_WATCH_WRITABLE)) continue;
        short ev = 0;
        if (flags & DBUS_WATCH_READABLE) ev |= POLLIN;
        if (flags & DBUS_WATCH_WRITABLE) ev |= POLLOUT;
        fds[n] = (struct pollfd){ .fd = dbus_watch_get_unix_fd(w), .events = ev };
        ws->polled[n++] = w;
    }
    for (size_t i = 0; i < ws->ntimeouts; i++) {
        if (!dbus_timeout_get_enabled(ws->timeouts[i])) continue;
        int left = ws->deadlines[i] > now ? (int)(ws->deadlines[i] - now) : 0;
        if (timeout < 0 || left < timeout) timeout = left;
    }
    cn_mutex_unlock(&ws->lock);
    ws->next_timeout = timeout;
    if (ws->grace && (timeout < 0 || timeout > CN_BACKLOG_GRACE_MS)) timeout = CN_BACKLOG_GRACE_MS;
    cn_loop_timeout_lower(timeout_ms, timeout);
    return n;
}

static unsigned watch_flags(short revents) {
    unsigned flags = 0;
    if (revents & POLLIN) flags |= DBUS_WATCH_READABLE;
    if (revents & POLLOUT) flags |= DBUS_WATCH_WRITABLE;
    if (revents & POLLERR) flags |= DBUS_WATCH_ERROR;
    if (revents & POLLHUP) flags |= DBUS_WATCH_HANGUP;
    return flags;
}

/* The due timeouts, one at a time: a handler may add or remove others. 1 when one was due. */
static int run_due_timeouts(cn_bus *b) {
    cn_bus_watches *ws = &b->watches;
    uint64_t now = cn_now_ms();
    int ran = 0;
    for (;;) {
        DBusTimeout *due = NULL;
        cn_gate_enter_exclusive(b);
        cn_mutex_lock(&ws->lock);
        for (size_t i = 0; i < ws->ntimeouts && !due; i++)
            if (dbus_timeout_get_enabled(ws->timeouts[i]) && ws->deadlines[i] <= now) {
                due = ws->timeouts[i];
                ws->deadlines[i] = now + (uint64_t)dbus_timeout_get_interval(due);
            }
        cn_mutex_unlock(&ws->lock);
        if (due) dbus_timeout_handle(due);
        cn_gate_leave_exclusive(b);
        if (!due) break;
        ran = 1;
    }
    return ran;
}

CN_HOT int cn_watches_handle(cn_bus *b, const struct pollfd *fds, size_t n) {
    cn_bus_watches *ws = &b->watches;
    int changed = ws->grace; /* a backlog: each round looks at it again */
    if (ws->grace) cn_gate_take_backlog(b); /* then write what is left */
    int wrote = 0;
    for (size_t i = 0; i < n; i++) {
        if (!fds[i].revents) continue;
        changed = 1; /* libdbus read or wrote: what it queued is dispatched by the prepare */
        /* Handling one watch, or a sender meanwhile, may have freed this one (disconnection):
         * check it is still registered, with the gate held so no sender frees it now. */
        cn_gate_enter_exclusive(b);
        if (watch_alive(ws, ws->polled[i])) dbus_watch_handle(ws->polled[i], watch_flags(fds[i].revents));
        cn_gate_leave_exclusive(b);
        wrote |= (fds[i].revents & POLLOUT) != 0;
    }
    if (wrote) cn_gate_room_made(b);
    if (ws->next_timeout >= 0 && run_due_timeouts(b)) changed = 1; /* most rounds have none enabled: skip the gate */
    return changed;
}
