/*
 * watches.c: libdbus's DBusWatch and DBusTimeout objects, polled by the I/O thread (never the
 * raw fd), and the gate that keeps senders and the I/O thread apart.
 *
 * Only the I/O thread polls and handles watches, but a thread that sends (a post, an AddMatch)
 * may write on the socket, and on a broken socket libdbus removes and frees the watches on that
 * thread. The gate: senders hold it shared around each libdbus send; the I/O thread holds it
 * exclusively around each watch or timeout handler. Both take it before any libdbus lock, so the
 * order never inverts (libdbus calls the functions below with its connection lock held).
 * watches.lock guards only the arrays and is never held across a libdbus call.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "internal.h"

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void cn_watches_init(CNotify_center *c) {
    pthread_mutex_init(&c->watches.lock, NULL);
    /* Writer preference: a stream of posts must not starve the I/O thread's reads. */
    pthread_rwlockattr_t gate;
    pthread_rwlockattr_init(&gate);
    pthread_rwlockattr_setkind_np(&gate, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&c->watches.io_gate, &gate);
    pthread_rwlockattr_destroy(&gate);
}

void cn_watches_free(CNotify_center *c) {
    free(c->watches.watches);
    free(c->watches.timeouts);
    free(c->watches.deadlines);
    pthread_rwlock_destroy(&c->watches.io_gate);
    pthread_mutex_destroy(&c->watches.lock);
}

/* ---- the gate ---- */

void cn_gate_enter(CNotify_center *c) {
    if (!cn_on_io_thread(c)) pthread_rwlock_rdlock(&c->watches.io_gate); /* the I/O thread never races itself */
}

void cn_gate_leave(CNotify_center *c) {
    if (!cn_on_io_thread(c)) pthread_rwlock_unlock(&c->watches.io_gate);
}

void cn_gate_enter_exclusive(CNotify_center *c) {
    assert(cn_on_io_thread(c));
    pthread_rwlock_wrlock(&c->watches.io_gate);
}

void cn_gate_leave_exclusive(CNotify_center *c) { pthread_rwlock_unlock(&c->watches.io_gate); }

/* ---- what libdbus calls ---- */

/* Wakes the I/O thread unless this is it, or the wake is deferred to the end of a send. */
static void wake_from_callback(CNotify_center *c, int what) {
    if (cn_on_io_thread(c) || cn_send_defer_wake(c, what)) return;
    cn_io_wake(c);
}

static dbus_bool_t add_watch(DBusWatch *w, void *data) {
    CNotify_center *c = data;
    cn_watches *ws = &c->watches;
    pthread_mutex_lock(&ws->lock);
    if (ws->nwatches == ws->capwatches) {
        size_t cap = ws->capwatches ? ws->capwatches * 2 : 4;
        DBusWatch **n = realloc(ws->watches, cap * sizeof *n);
        if (!n) { pthread_mutex_unlock(&ws->lock); return FALSE; }
        ws->watches = n; ws->capwatches = cap;
    }
    ws->watches[ws->nwatches++] = w;
    pthread_mutex_unlock(&ws->lock);
    wake_from_callback(c, CN_DEFERRED_OTHER);
    return TRUE;
}

static void remove_watch(DBusWatch *w, void *data) {
    cn_watches *ws = &((CNotify_center *)data)->watches;
    pthread_mutex_lock(&ws->lock);
    for (size_t i = 0; i < ws->nwatches; i++)
        if (ws->watches[i] == w) { ws->watches[i] = ws->watches[--ws->nwatches]; break; }
    pthread_mutex_unlock(&ws->lock);
}

static void toggle_watch(DBusWatch *w, void *data) {
    wake_from_callback(data, (dbus_watch_get_flags(w) & DBUS_WATCH_WRITABLE) ? CN_DEFERRED_WRITE : CN_DEFERRED_OTHER);
}

static int watch_alive(cn_watches *ws, DBusWatch *w) {
    int alive = 0;
    pthread_mutex_lock(&ws->lock);
    for (size_t i = 0; i < ws->nwatches && !alive; i++) alive = ws->watches[i] == w;
    pthread_mutex_unlock(&ws->lock);
    return alive;
}

static dbus_bool_t add_timeout(DBusTimeout *t, void *data) {
    CNotify_center *c = data;
    cn_watches *ws = &c->watches;
    pthread_mutex_lock(&ws->lock);
    if (ws->ntimeouts == ws->captimeouts) {
        size_t cap = ws->captimeouts ? ws->captimeouts * 2 : 4;
        DBusTimeout **n = realloc(ws->timeouts, cap * sizeof *n);
        if (n) ws->timeouts = n;
        uint64_t *d = realloc(ws->deadlines, cap * sizeof *d);
        if (d) ws->deadlines = d;
        if (!n || !d) { pthread_mutex_unlock(&ws->lock); return FALSE; }
        ws->captimeouts = cap;
    }
    ws->timeouts[ws->ntimeouts] = t;
    ws->deadlines[ws->ntimeouts] = now_ms() + (uint64_t)dbus_timeout_get_interval(t);
    ws->ntimeouts++;
    pthread_mutex_unlock(&ws->lock);
    wake_from_callback(c, CN_DEFERRED_OTHER);
    return TRUE;
}

static void remove_timeout(DBusTimeout *t, void *data) {
    cn_watches *ws = &((CNotify_center *)data)->watches;
    pthread_mutex_lock(&ws->lock);
    for (size_t i = 0; i < ws->ntimeouts; i++)
        if (ws->timeouts[i] == t) {
            ws->ntimeouts--;
            ws->timeouts[i] = ws->timeouts[ws->ntimeouts];
            ws->deadlines[i] = ws->deadlines[ws->ntimeouts];
            break;
        }
    pthread_mutex_unlock(&ws->lock);
}

static void toggle_timeout(DBusTimeout *t, void *data) {
    CNotify_center *c = data;
    cn_watches *ws = &c->watches;
    pthread_mutex_lock(&ws->lock);
    for (size_t i = 0; i < ws->ntimeouts; i++)
        if (ws->timeouts[i] == t) ws->deadlines[i] = now_ms() + (uint64_t)dbus_timeout_get_interval(t);
    pthread_mutex_unlock(&ws->lock);
    wake_from_callback(c, CN_DEFERRED_OTHER);
}

/* A flush on another thread may read messages into libdbus's queue: make the I/O thread hand
 * them to libdbus's dispatch (dbus_connection_dispatch, libdbus's word), and so to delivery. */
static void on_dispatch_status(DBusConnection *conn, DBusDispatchStatus status, void *data) {
    (void)conn;
    if (status == DBUS_DISPATCH_DATA_REMAINS) wake_from_callback(data, CN_DEFERRED_OTHER);
}

/* libdbus calls this after a send that left messages queued: write work, as for the write watch. */
static void wakeup_main(void *data) { wake_from_callback(data, CN_DEFERRED_WRITE); }

int cn_watches_install(CNotify_center *c, DBusConnection *conn) {
    if (!dbus_connection_set_watch_functions(conn, add_watch, remove_watch, toggle_watch, c, NULL) ||
        !dbus_connection_set_timeout_functions(conn, add_timeout, remove_timeout, toggle_timeout, c, NULL))
        return 0;
    dbus_connection_set_wakeup_main_function(conn, wakeup_main, c, NULL);
    dbus_connection_set_dispatch_status_function(conn, on_dispatch_status, c, NULL);
    return 1;
}

/* ---- the poll (I/O thread) ---- */

void cn_watches_poll_once(CNotify_center *c) {
    assert(cn_on_io_thread(c));
    enum { MAXW = 16 };
    cn_watches *ws = &c->watches;
    struct pollfd fds[MAXW + 1];
    DBusWatch *polled[MAXW + 1];
    nfds_t n = 1;
    fds[0] = (struct pollfd){ .fd = c->io.wake_fd, .events = POLLIN };
    int timeout = -1; /* stays -1 when no timeout is enabled: then nothing below can be due */
    uint64_t now = now_ms();
    /* A poster left a backlog (cn_send_leave): leave the writing to it for a grace period, during
     * which the flag stays set, so posters do not wake this thread again. */
    int grace = cn_send_backlog_pending(c);
    pthread_mutex_lock(&ws->lock);
    for (size_t i = 0; i < ws->nwatches && n <= MAXW; i++) {
        DBusWatch *w = ws->watches[i];
        if (!dbus_watch_get_enabled(w)) continue;
        unsigned flags = dbus_watch_get_flags(w);
        if (grace && (flags & DBUS_WATCH_WRITABLE)) continue;
        short ev = 0;
        if (flags & DBUS_WATCH_READABLE) ev |= POLLIN;
        if (flags & DBUS_WATCH_WRITABLE) ev |= POLLOUT;
        fds[n] = (struct pollfd){ .fd = dbus_watch_get_unix_fd(w), .events = ev };
        polled[n++] = w;
    }
    for (size_t i = 0; i < ws->ntimeouts; i++) {
        if (!dbus_timeout_get_enabled(ws->timeouts[i])) continue;
        int left = ws->deadlines[i] > now ? (int)(ws->deadlines[i] - now) : 0;
        if (timeout < 0 || left < timeout) timeout = left;
    }
    pthread_mutex_unlock(&ws->lock);

    int poll_timeout = grace && (timeout < 0 || timeout > CN_BACKLOG_GRACE_MS) ? CN_BACKLOG_GRACE_MS : timeout;
    int r = poll(fds, n, poll_timeout);
    if (grace) cn_send_take_backlog(c); /* then write what is left */
    if (r < 0 && errno != EINTR) return;
    if (fds[0].revents & POLLIN) cn_io_drain_wake(c);
    for (nfds_t i = 1; i < n; i++) {
        if (!fds[i].revents) continue;
        unsigned flags = 0;
        if (fds[i].revents & POLLIN) flags |= DBUS_WATCH_READABLE;
        if (fds[i].revents & POLLOUT) flags |= DBUS_WATCH_WRITABLE;
        if (fds[i].revents & POLLERR) flags |= DBUS_WATCH_ERROR;
        if (fds[i].revents & POLLHUP) flags |= DBUS_WATCH_HANGUP;
        /* Handling one watch, or a sender meanwhile, may have freed this one (disconnection):
         * check it is still registered, with the gate held so no sender frees it now. */
        cn_gate_enter_exclusive(c);
        if (watch_alive(ws, polled[i])) dbus_watch_handle(polled[i], flags);
        cn_gate_leave_exclusive(c);
    }
    now = now_ms();
    for (; timeout >= 0;) { /* most iterations have no enabled timeout: skip the gate then */
        DBusTimeout *due = NULL;
        cn_gate_enter_exclusive(c);
        pthread_mutex_lock(&ws->lock);
        for (size_t i = 0; i < ws->ntimeouts && !due; i++)
            if (dbus_timeout_get_enabled(ws->timeouts[i]) && ws->deadlines[i] <= now) {
                due = ws->timeouts[i];
                ws->deadlines[i] = now + (uint64_t)dbus_timeout_get_interval(due);
            }
        pthread_mutex_unlock(&ws->lock);
        if (due) dbus_timeout_handle(due);
        cn_gate_leave_exclusive(c);
        if (!due) break;
    }
}
