/*
 * io_thread.c: the I/O thread of a center. Started by the first call that needs the bus (which
 * connects in the caller's thread, so that call learns at once whether the bus is there); then it
 * runs libdbus's dispatch (which reaches receive.c), polls the watches (watches.c), and on a
 * broken connection reconnects with backoff. Other threads wake it through an eventfd.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"

#define BACKOFF_FIRST_MS 10
#define BACKOFF_MAX_MS 200 /* reconnect well within a second of the bus coming back */

/* Set by the I/O thread as its first act: it knows itself from its first instruction, not from
 * `started`, which its creator sets only after pthread_create returns (a callback run before
 * that would take the gate as a poster and leave it as the I/O thread). */
static __thread CNotify_center *tl_io_center;

int cn_io_init(CNotify_center *c) {
    pthread_mutex_init(&c->io.start_lock, NULL);
    c->io.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->io.wake_fd < 0) {
        pthread_mutex_destroy(&c->io.start_lock);
        return -1;
    }
    return 0;
}

void cn_io_free(CNotify_center *c) {
    close(c->io.wake_fd);
    pthread_mutex_destroy(&c->io.start_lock);
}

int cn_on_io_thread(CNotify_center *c) { return tl_io_center == c; }

void cn_io_wake(CNotify_center *c) {
    /* One write per sleep of the I/O thread: a flood of posts into a full socket would otherwise
     * pay a system call each (measured: 5x the floor's kernel time). */
    if (atomic_exchange_explicit(&c->io.wake_pending, 1, memory_order_acq_rel)) return;
    uint64_t one = 1;
    ssize_t r = write(c->io.wake_fd, &one, sizeof one);
    (void)r; /* EAGAIN means the counter is already non-zero: the thread will wake anyway */
}

void cn_io_drain_wake(CNotify_center *c) {
    /* Cleared before the thread looks at its work, so a wake racing with it is never lost. */
    uint64_t v;
    ssize_t r = read(c->io.wake_fd, &v, sizeof v);
    (void)r;
    atomic_store_explicit(&c->io.wake_pending, 0, memory_order_release);
}

static void wait_wake(CNotify_center *c, int timeout_ms) {
    struct pollfd p = { .fd = c->io.wake_fd, .events = POLLIN };
    if (poll(&p, 1, timeout_ms) > 0) cn_io_drain_wake(c);
}

static int stop_requested(CNotify_center *c) {
    cn_lifecycle life = cn_lifecycle_get(c);
    return life == CN_LIFE_STOPPING || life == CN_LIFE_STOPPING_ON_IO;
}

static void *io_main(void *arg) {
    CNotify_center *c = arg;
    tl_io_center = c;
    int backoff = BACKOFF_FIRST_MS;
    /* Only this thread sets link.conn (publish/drop), so it keeps its own copy and takes no lock
     * per iteration: posters hold link.lock while they send. */
    DBusConnection *conn = c->link.conn;
    while (!stop_requested(c)) {
        if (!conn) {
            conn = cn_connect(c);
            if (!conn) {
                wait_wake(c, backoff);
                backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
                continue;
            }
            backoff = BACKOFF_FIRST_MS;
            atomic_fetch_add(&c->counters.reconnects, 1);
            cn_connection_publish(c, conn);
        }
        /* libdbus's dispatch: each queued message goes through receive.c's filter. */
        while (dbus_connection_dispatch(conn) == DBUS_DISPATCH_DATA_REMAINS) {}
        if (!dbus_connection_get_is_connected(conn)) {
            cn_connection_drop(c);
            conn = NULL;
            continue;
        }
        cn_watches_poll_once(c);
    }
    cn_connection_drop(c);
    /* Destroyed from one of its callbacks on this thread: nobody else may free it. */
    if (cn_lifecycle_get(c) == CN_LIFE_STOPPING_ON_IO) cn_center_free(c);
    return NULL;
}

uint32_t cn_center_start(CNotify_center *c) {
    if (atomic_load_explicit(&c->io.started, memory_order_acquire)) return NOTIFY_STATUS_OK;
    pthread_mutex_lock(&c->io.start_lock);
    uint32_t st = NOTIFY_STATUS_OK;
    if (!c->io.started) {
        if (!c->address && c->kind != CN_BUS_EMBEDDED) st = cn_resolve_bus(c->bus_spec, &c->kind, &c->address);
        DBusConnection *conn = st == NOTIFY_STATUS_OK ? cn_connect(c) : NULL;
        if (!conn && st == NOTIFY_STATUS_OK) st = NOTIFY_STATUS_SERVER_NOT_FOUND;
        if (conn) {
            cn_connection_publish(c, conn);
            if (pthread_create(&c->io.thread, NULL, io_main, c) != 0) {
                cn_set_error("cannot start the notification I/O thread");
                pthread_mutex_lock(&c->link.lock);
                c->link.conn = NULL;
                c->link.connected = 0;
                pthread_mutex_unlock(&c->link.lock);
                dbus_connection_close(conn);
                dbus_connection_unref(conn);
                st = NOTIFY_STATUS_FAILED;
            } else {
                cn_test_start_delay();
                atomic_store_explicit(&c->io.started, 1, memory_order_release);
            }
        }
    }
    pthread_mutex_unlock(&c->io.start_lock);
    return st;
}

int cn_io_stop(CNotify_center *c) {
    assert(stop_requested(c));
    /* On the I/O thread a thread exists even before its creator has set `started`. */
    if (!cn_on_io_thread(c) && !atomic_load_explicit(&c->io.started, memory_order_acquire)) return 1;
    cn_io_wake(c);
    if (cn_on_io_thread(c)) {
        pthread_detach(c->io.thread);
        return 0;
    }
    pthread_join(c->io.thread, NULL);
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

