/*
 * The I/O thread of a center. It polls the connection's DBusWatch/DBusTimeout objects (never the
 * raw fd), reads and dispatches incoming signals to observers, writes what posters left queued
 * (after a grace, see "quiet sends"), and reconnects with backoff when the bus goes away. Other
 * threads only send: directly, under the I/O gate, so no watch is freed under the poll loop's feet
 * (docs/DESIGN.md, "Threads"), and they wake this thread through an eventfd when it has work.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"

#define BACKOFF_FIRST_MS 10
#define BACKOFF_MAX_MS 200 /* reconnect well within a second of the bus coming back */

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Set by the I/O thread as its first act: it knows itself from its first instruction, not from
 * `started`, which its creator sets only after pthread_create returns (a callback run before
 * that would take the gate as a poster and leave it as the I/O thread). */
static __thread CNotify_center *tl_io_center;

int cn_on_io_thread(CNotify_center *c) {
    return tl_io_center == c;
}

void cn_io_wake(CNotify_center *c) {
    /* One write per sleep of the I/O thread: a flood of posts into a full socket would otherwise
     * pay a system call each (measured: 5x the floor's kernel time). */
    if (atomic_exchange_explicit(&c->wake_pending, 1, memory_order_acq_rel)) return;
    uint64_t one = 1;
    ssize_t r = write(c->wake_fd, &one, sizeof one);
    (void)r; /* EAGAIN means the counter is already non-zero: the thread will wake anyway */
}

/* The I/O thread drained the eventfd: the next wake must write again. Cleared before the thread
 * looks at its work, so a wake racing with it is never lost. */
static void drain_wake(CNotify_center *c) {
    uint64_t v;
    ssize_t r = read(c->wake_fd, &v, sizeof v);
    (void)r;
    atomic_store_explicit(&c->wake_pending, 0, memory_order_release);
}

/* ---- quiet sends ----
 * A post from another thread sends directly (center.c), and libdbus turns the write watch on and
 * off around each such send. Waking the I/O thread for that made it fight the poster for locks
 * on every post of a flood (measured: 42,000-56,000 context switches per 60,000 posts, against
 * 1,600 for the raw-libdbus floor). So while a thread sends, the callbacks below only note what
 * changed; when the send is over, the I/O thread is woken only if it has work to do: messages the
 * socket did not take yet, or a change other than the write watch. */
enum { DEFERRED_WRITE = 1, DEFERRED_OTHER = 2 };
#define BACKLOG_GRACE_MS 1
static __thread CNotify_center *tl_sending;
static __thread int tl_deferred;

/* True if the wake is deferred to the end of this thread's send. */
static int defer_wake(CNotify_center *c, int what) {
    if (tl_sending != c) return 0;
    tl_deferred |= what;
    return 1;
}

/* Wakes the I/O thread unless this is it, or the wake is deferred to the end of a send. */
static void wake_from_callback(CNotify_center *c, int what) {
    if (cn_on_io_thread(c) || defer_wake(c, what)) return;
    cn_io_wake(c);
}

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
     * once, and writes what is left only after a grace with no post (poll_once): it must not take
     * the I/O path from a poster that is still going. */
    int backlog = (tl_deferred & DEFERRED_WRITE) && dbus_connection_has_messages_to_send(conn);
    int wake = (tl_deferred & DEFERRED_OTHER) ||
               (backlog && !atomic_exchange_explicit(&c->backlog, 1, memory_order_acq_rel));
    cn_gate_leave(c);
    if (wake) cn_io_wake(c);
}

/* ---- DBusWatch / DBusTimeout bookkeeping ---- */

static dbus_bool_t add_watch(DBusWatch *w, void *data) {
    CNotify_center *c = data;
    pthread_mutex_lock(&c->watch_lock);
    if (c->nwatches == c->capwatches) {
        size_t cap = c->capwatches ? c->capwatches * 2 : 4;
        DBusWatch **n = realloc(c->watches, cap * sizeof *n);
        if (!n) { pthread_mutex_unlock(&c->watch_lock); return FALSE; }
        c->watches = n; c->capwatches = cap;
    }
    c->watches[c->nwatches++] = w;
    pthread_mutex_unlock(&c->watch_lock);
    wake_from_callback(c, DEFERRED_OTHER);
    return TRUE;
}

static void remove_watch(DBusWatch *w, void *data) {
    CNotify_center *c = data;
    pthread_mutex_lock(&c->watch_lock);
    for (size_t i = 0; i < c->nwatches; i++)
        if (c->watches[i] == w) { c->watches[i] = c->watches[--c->nwatches]; break; }
    pthread_mutex_unlock(&c->watch_lock);
}

static void toggle_watch(DBusWatch *w, void *data) {
    CNotify_center *c = data;
    wake_from_callback(c, (dbus_watch_get_flags(w) & DBUS_WATCH_WRITABLE) ? DEFERRED_WRITE : DEFERRED_OTHER);
}

static int watch_alive(CNotify_center *c, DBusWatch *w) {
    int alive = 0;
    pthread_mutex_lock(&c->watch_lock);
    for (size_t i = 0; i < c->nwatches && !alive; i++) alive = c->watches[i] == w;
    pthread_mutex_unlock(&c->watch_lock);
    return alive;
}

static dbus_bool_t add_timeout(DBusTimeout *t, void *data) {
    CNotify_center *c = data;
    pthread_mutex_lock(&c->watch_lock);
    if (c->ntimeouts == c->captimeouts) {
        size_t cap = c->captimeouts ? c->captimeouts * 2 : 4;
        DBusTimeout **n = realloc(c->timeouts, cap * sizeof *n);
        uint64_t *d = realloc(c->timeout_deadline, cap * sizeof *d);
        if (n) c->timeouts = n;
        if (d) c->timeout_deadline = d;
        if (!n || !d) { pthread_mutex_unlock(&c->watch_lock); return FALSE; }
        c->captimeouts = cap;
    }
    c->timeouts[c->ntimeouts] = t;
    c->timeout_deadline[c->ntimeouts] = now_ms() + (uint64_t)dbus_timeout_get_interval(t);
    c->ntimeouts++;
    pthread_mutex_unlock(&c->watch_lock);
    wake_from_callback(c, DEFERRED_OTHER);
    return TRUE;
}

static void remove_timeout(DBusTimeout *t, void *data) {
    CNotify_center *c = data;
    pthread_mutex_lock(&c->watch_lock);
    for (size_t i = 0; i < c->ntimeouts; i++)
        if (c->timeouts[i] == t) {
            c->ntimeouts--;
            c->timeouts[i] = c->timeouts[c->ntimeouts];
            c->timeout_deadline[i] = c->timeout_deadline[c->ntimeouts];
            break;
        }
    pthread_mutex_unlock(&c->watch_lock);
}

static void toggle_timeout(DBusTimeout *t, void *data) {
    CNotify_center *c = data;
    pthread_mutex_lock(&c->watch_lock);
    for (size_t i = 0; i < c->ntimeouts; i++)
        if (c->timeouts[i] == t) c->timeout_deadline[i] = now_ms() + (uint64_t)dbus_timeout_get_interval(t);
    pthread_mutex_unlock(&c->watch_lock);
    wake_from_callback(c, DEFERRED_OTHER);
}

void cn_gate_enter(CNotify_center *c) {
    if (!cn_on_io_thread(c)) pthread_rwlock_rdlock(&c->io_gate); /* the I/O thread never races itself */
}

void cn_gate_leave(CNotify_center *c) {
    if (!cn_on_io_thread(c)) pthread_rwlock_unlock(&c->io_gate);
}

/* A flush on another thread may read messages into the queue: make the I/O thread dispatch them. */
static void dispatch_status(DBusConnection *conn, DBusDispatchStatus status, void *data) {
    (void)conn;
    CNotify_center *c = data;
    if (status == DBUS_DISPATCH_DATA_REMAINS) wake_from_callback(c, DEFERRED_OTHER);
}

/* libdbus calls this after a send that left messages queued: write work, as for the write watch. */
static void wakeup_main(void *data) {
    wake_from_callback(data, DEFERRED_WRITE);
}

/* ---- incoming messages ---- */

/* Whether a received post may be delivered. `self.` names never come from the bus: one that
 * does was injected by someone else. A `user.uid.N` name must come from uid N or root: proven by
 * the credential the post carries (credentials.c), or, for a foreign poster with none, by asking
 * the bus while the sender is still connected. `it` points at the sequence argument. */
static int post_is_authentic(CNotify_center *c, DBusConnection *conn, DBusMessage *msg, DBusMessageIter *it,
                             int has_seq, const char *name, uint64_t seq) {
    if (cn_is_self_name(name)) return 0;
    uid_t owner;
    int restricted = cn_restricted_uid(name, &owner);
    if (restricted == 0) return 1;
    if (restricted < 0) return 0;
    const char *sender = dbus_message_get_sender(msg);
    if (!sender) return 0;
    if (has_seq && dbus_message_iter_next(it) && dbus_message_iter_get_arg_type(it) == DBUS_TYPE_UNIX_FD) {
        int fd = -1;
        dbus_message_iter_get_basic(it, &fd); /* a duplicate that we own */
        if (fd < 0) return 0;
        int ok = c->bus_id[0] && cn_credential_verify(fd, c->bus_id, sender, name, seq, owner);
        close(fd);
        return ok; /* a credential that does not prove it is a forgery: no second chance */
    }
    return cn_sender_may_post(c, conn, sender, name);
}

static DBusHandlerResult filter(DBusConnection *conn, DBusMessage *msg, void *data) {
    CNotify_center *c = data;
    if (dbus_message_get_type(msg) != DBUS_MESSAGE_TYPE_SIGNAL || !dbus_message_has_member(msg, CN_MEMBER) ||
        !dbus_message_has_path(msg, CN_PATH))
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    const char *iface = dbus_message_get_interface(msg);
    if (!iface || (strcmp(iface, CN_INTERFACE) != 0 && strncmp(iface, CN_BUCKET_PREFIX, strlen(CN_BUCKET_PREFIX)) != 0))
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    DBusMessageIter it;
    if (!dbus_message_iter_init(msg, &it) || dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_STRING)
        return DBUS_HANDLER_RESULT_HANDLED; /* not our shape: ignore, as the contract says */
    const char *name = NULL;
    dbus_message_iter_get_basic(&it, &name);
    size_t len = strlen(name);
    if (len == 0 || len > CNOTIFY_NAME_MAX) return DBUS_HANDLER_RESULT_HANDLED;
    uint64_t seq = 0;
    int has_seq = 0;
    if (dbus_message_iter_next(&it) && dbus_message_iter_get_arg_type(&it) == DBUS_TYPE_UINT64) {
        dbus_uint64_t v;
        dbus_message_iter_get_basic(&it, &v);
        seq = v;
        has_seq = 1;
    }
    if (!post_is_authentic(c, conn, msg, &it, has_seq, name, seq)) {
        atomic_fetch_add_explicit(&c->rejected, 1, memory_order_relaxed);
        return DBUS_HANDLER_RESULT_HANDLED;
    }
    cn_dispatch_post(c, name, dbus_message_get_sender(msg), has_seq, seq);
    return DBUS_HANDLER_RESULT_HANDLED;
}

/* ---- connecting ---- */

DBusConnection *cn_connect(CNotify_center *c) {
    char *address = NULL;
    uint32_t st;
    if (c->kind == CN_BUS_EMBEDDED) {
        st = cn_embedded_ensure(&address);
        if (st != NOTIFY_STATUS_OK) return NULL;
    } else {
        address = strdup(c->address);
        if (!address) return NULL;
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
    if (!dbus_connection_add_filter(conn, filter, c, NULL) ||
        !dbus_connection_set_watch_functions(conn, add_watch, remove_watch, toggle_watch, c, NULL) ||
        !dbus_connection_set_timeout_functions(conn, add_timeout, remove_timeout, toggle_timeout, c, NULL)) {
        cn_set_error("out of memory while setting up the bus connection");
        goto fail_close;
    }
    dbus_connection_set_wakeup_main_function(conn, wakeup_main, c, NULL);
    dbus_connection_set_dispatch_status_function(conn, dispatch_status, c, NULL);
    /* The bus instance's id binds the credentials of restricted posts to it (credentials.c).
     * Asked once per connection, before anyone else uses it; a bus that will not say leaves it
     * empty: our restricted posts then carry no credential, and we accept none. */
    char *bus_id = dbus_bus_get_id(conn, NULL);
    const char *unique = dbus_bus_get_unique_name(conn);
    pthread_mutex_lock(&c->lock);
    snprintf(c->bus_id, sizeof c->bus_id, "%s", bus_id && strlen(bus_id) == CN_BUS_ID_LEN ? bus_id : "");
    snprintf(c->unique_name, sizeof c->unique_name, "%s", unique ? unique : "");
    c->can_pass_fds = dbus_connection_can_send_type(conn, DBUS_TYPE_UNIX_FD);
    if (c->kind == CN_BUS_EMBEDDED || !c->address) { free(c->address); c->address = address; address = NULL; }
    pthread_mutex_unlock(&c->lock);
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

static void drop_connection(CNotify_center *c) {
    pthread_mutex_lock(&c->lock);
    DBusConnection *conn = c->conn;
    c->conn = NULL;
    c->connected = 0;
    cn_rules_release_waiters(c, c->conn_gen); /* their AddMatch died with the connection */
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (conn) {
        /* The close, which completes the connection's pending calls, with the gate held
         * exclusively: no poster or registrant is inside libdbus on this connection meanwhile.
         * libdbus drops and retakes its lock while it completes them, and a sender that met the
         * broken socket at the same moment once had one completed twice (a crash seen in the ASan
         * lane). Only the close: the dispatch below runs callbacks, which take reg_lock, which a
         * registrant may hold while it waits for the gate. */
        pthread_rwlock_wrlock(&c->io_gate);
        dbus_connection_close(conn); /* close before the last unref: a private connection */
        pthread_rwlock_unlock(&c->io_gate);
        /* Dispatch once more, so libdbus completes what pending calls it can and hands us the
         * posts it had already read. Registering threads do not depend on it: they were released
         * above (libdbus does not complete every pending call of a broken connection). */
        while (dbus_connection_dispatch(conn) == DBUS_DISPATCH_DATA_REMAINS) {}
        dbus_connection_unref(conn);
    }
    /* What we knew of senders was true of this connection's bus instance only: a restarted
     * daemon hands out the same unique names (:1.1, ...) to other processes. */
    cn_sender_cache_reset(c);
    cn_map_clear(&c->last_seq, NULL);
}

static void wait_wake(CNotify_center *c, int timeout_ms) {
    struct pollfd p = { .fd = c->wake_fd, .events = POLLIN };
    if (poll(&p, 1, timeout_ms) > 0) drain_wake(c);
}

/* Makes `conn` the center's connection and adds every rule the registry needs, atomically with
 * respect to registrations (both hold reg_lock), so none is added twice or missed. */
static void publish_connection(CNotify_center *c, DBusConnection *conn) {
    pthread_mutex_lock(&c->reg_lock);
    pthread_mutex_lock(&c->lock);
    c->conn = conn;
    c->connected = 1;
    c->conn_gen++;
    /* A new connection is a new sender (a new unique name): its numbering starts again at 1. */
    cn_map_clear(&c->post_counts, NULL);
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    cn_rules_after_connect(c, conn);
    pthread_cond_broadcast(&c->reg_cond); /* registrants waiting on the old connection's rules */
    pthread_mutex_unlock(&c->reg_lock);
}

static void poll_once(CNotify_center *c) {
    enum { MAXW = 16 };
    struct pollfd fds[MAXW + 1];
    DBusWatch *ws[MAXW + 1];
    nfds_t n = 1;
    fds[0] = (struct pollfd){ .fd = c->wake_fd, .events = POLLIN };
    int timeout = -1; /* stays -1 when no timeout is enabled: then nothing below can be due */
    uint64_t now = now_ms();
    /* A poster left a backlog (cn_send_leave): leave the writing to it for a grace period, during
     * which the flag stays set, so posters do not wake this thread again. */
    int grace = atomic_load_explicit(&c->backlog, memory_order_acquire);
    pthread_mutex_lock(&c->watch_lock);
    for (size_t i = 0; i < c->nwatches && n <= MAXW; i++) {
        DBusWatch *w = c->watches[i];
        if (!dbus_watch_get_enabled(w)) continue;
        unsigned flags = dbus_watch_get_flags(w);
        if (grace && (flags & DBUS_WATCH_WRITABLE)) continue;
        short ev = 0;
        if (flags & DBUS_WATCH_READABLE) ev |= POLLIN;
        if (flags & DBUS_WATCH_WRITABLE) ev |= POLLOUT;
        fds[n] = (struct pollfd){ .fd = dbus_watch_get_unix_fd(w), .events = ev };
        ws[n++] = w;
    }
    for (size_t i = 0; i < c->ntimeouts; i++) {
        if (!dbus_timeout_get_enabled(c->timeouts[i])) continue;
        int left = c->timeout_deadline[i] > now ? (int)(c->timeout_deadline[i] - now) : 0;
        if (timeout < 0 || left < timeout) timeout = left;
    }
    pthread_mutex_unlock(&c->watch_lock);

    int poll_timeout = grace && (timeout < 0 || timeout > BACKLOG_GRACE_MS) ? BACKLOG_GRACE_MS : timeout;
    int r = poll(fds, n, poll_timeout);
    if (grace) atomic_store_explicit(&c->backlog, 0, memory_order_release); /* then write what is left */
    if (r < 0 && errno != EINTR) return;
    if (fds[0].revents & POLLIN) drain_wake(c);
    for (nfds_t i = 1; i < n; i++) {
        if (!fds[i].revents) continue;
        unsigned flags = 0;
        if (fds[i].revents & POLLIN) flags |= DBUS_WATCH_READABLE;
        if (fds[i].revents & POLLOUT) flags |= DBUS_WATCH_WRITABLE;
        if (fds[i].revents & POLLERR) flags |= DBUS_WATCH_ERROR;
        if (fds[i].revents & POLLHUP) flags |= DBUS_WATCH_HANGUP;
        /* Handling one watch, or a sender meanwhile, may have freed this one (disconnection):
         * check it is still registered, with the gate held so no sender frees it now. */
        pthread_rwlock_wrlock(&c->io_gate);
        if (watch_alive(c, ws[i])) dbus_watch_handle(ws[i], flags);
        pthread_rwlock_unlock(&c->io_gate);
    }
    now = now_ms();
    for (; timeout >= 0;) { /* most iterations have no enabled timeout: skip the gate then */
        DBusTimeout *due = NULL;
        pthread_rwlock_wrlock(&c->io_gate);
        pthread_mutex_lock(&c->watch_lock);
        for (size_t i = 0; i < c->ntimeouts && !due; i++)
            if (dbus_timeout_get_enabled(c->timeouts[i]) && c->timeout_deadline[i] <= now) {
                due = c->timeouts[i];
                c->timeout_deadline[i] = now + (uint64_t)dbus_timeout_get_interval(due);
            }
        pthread_mutex_unlock(&c->watch_lock);
        if (due) dbus_timeout_handle(due);
        pthread_rwlock_unlock(&c->io_gate);
        if (!due) break;
    }
}

static void *io_main(void *arg) {
    CNotify_center *c = arg;
    tl_io_center = c;
    int backoff = BACKOFF_FIRST_MS;
    /* Only this thread sets c->conn (publish/drop), so it keeps its own copy and takes no lock
     * per iteration: posters hold c->lock while they send. */
    DBusConnection *conn = c->conn;
    for (;;) {
        assert(cn_on_io_thread(c));
        if (atomic_load_explicit(&c->stopping, memory_order_acquire)) break;
        if (!conn) {
            conn = cn_connect(c);
            if (!conn) {
                wait_wake(c, backoff);
                backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
                continue;
            }
            backoff = BACKOFF_FIRST_MS;
            atomic_fetch_add(&c->reconnects, 1);
            publish_connection(c, conn);
        }
        while (dbus_connection_dispatch(conn) == DBUS_DISPATCH_DATA_REMAINS) {}
        if (!dbus_connection_get_is_connected(conn)) {
            drop_connection(c);
            conn = NULL;
            continue;
        }
        poll_once(c);
    }
    drop_connection(c);
    pthread_mutex_lock(&c->lock);
    int free_self = c->free_on_exit;
    pthread_mutex_unlock(&c->lock);
    if (free_self) cn_center_free(c); /* destroyed from a callback: nobody else may free it */
    return NULL;
}

uint32_t cn_center_start(CNotify_center *c) {
    if (atomic_load_explicit(&c->started, memory_order_acquire)) return NOTIFY_STATUS_OK;
    pthread_mutex_lock(&c->start_lock);
    uint32_t st = NOTIFY_STATUS_OK;
    if (!c->started) {
        if (!c->address && c->kind != CN_BUS_EMBEDDED) st = cn_resolve_bus(c->bus_spec, &c->kind, &c->address);
        DBusConnection *conn = st == NOTIFY_STATUS_OK ? cn_connect(c) : NULL;
        if (!conn && st == NOTIFY_STATUS_OK) st = NOTIFY_STATUS_SERVER_NOT_FOUND;
        if (conn) {
            publish_connection(c, conn);
            if (pthread_create(&c->io_thread, NULL, io_main, c) != 0) {
                cn_set_error("cannot start the notification I/O thread");
                dbus_connection_close(conn);
                dbus_connection_unref(conn);
                c->conn = NULL;
                c->connected = 0;
                st = NOTIFY_STATUS_FAILED;
            } else {
                cn_test_start_delay();
                atomic_store_explicit(&c->started, 1, memory_order_release);
            }
        }
    }
    pthread_mutex_unlock(&c->start_lock);
    return st;
}

int cn_io_stop(CNotify_center *c) {
    if (!c->started) return 1;
    int self = cn_on_io_thread(c);
    pthread_mutex_lock(&c->lock);
    c->free_on_exit = self;
    pthread_mutex_unlock(&c->lock);
    atomic_store_explicit(&c->stopping, 1, memory_order_release);
    cn_io_wake(c);
    if (self) {
        pthread_detach(c->io_thread);
        return 0;
    }
    pthread_join(c->io_thread, NULL);
    return 1;
}

void cn_test_start_delay(void) {
    const char *ms = getenv("DARWIN_NOTIFY_TEST_START_DELAY_MS");
    if (!ms || !*ms) return;
    long v = strtol(ms, NULL, 10);
    if (v <= 0 || v > 10000) return;
    struct timespec ts = { v / 1000, (v % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}
