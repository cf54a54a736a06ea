/*
 * bus_transport.c: the bus as a transport (transport/transport.h): its table of operations, its
 * start (the first connection, made in the caller's thread), and its part of the loop: libdbus's
 * dispatch, reconnection with backoff, and its watches.
 */
#include <stdlib.h>
#include <string.h>
#include "bus.h"

#define BACKOFF_FIRST_MS 10
#define BACKOFF_MAX_MS 200 /* reconnect well within a second of the bus coming back */

static cn_bus *bus_of(cn_transport *t) { return (cn_bus *)t; }

/* A new connection: filter, watches, then current, then every subscription (the center's). */
static DBusConnection *connect_and_publish(cn_bus *b, int again) {
    DBusConnection *conn = cn_link_open(b);
    if (!conn) return NULL;
    if (!dbus_connection_add_filter(conn, cn_receive_filter, b, NULL) || !cn_watches_install(b, conn)) {
        cn_set_error("out of memory while setting up the bus connection");
        dbus_connection_close(conn);
        dbus_connection_unref(conn);
        return NULL;
    }
    cn_link_publish(b, conn);
    b->events.connected(b->events.ctx, cn_link_gen(b), again);
    return conn;
}

/* The connection broke or the loop ends: drop it, hand on the posts libdbus had already read, and
 * forget what was learnt on it. */
static void drop_connection(cn_bus *b) {
    DBusConnection *conn = cn_link_drop(b);
    if (conn) {
        /* Once more through libdbus's dispatch, so libdbus completes what pending calls it can
         * and hands us the posts it had already read. */
        while (dbus_connection_dispatch(conn) == DBUS_DISPATCH_DATA_REMAINS) {}
        dbus_connection_unref(conn);
    }
    b->loop_conn = NULL;
    cn_calls_drop_all(b); /* the calls made on it: no reply will come */
    cn_receive_forget_senders(b);
    b->events.disconnected(b->events.ctx);
}

/* ---- the loop's source ---- */

static size_t source_prepare(void *ctx, struct pollfd *fds, size_t cap, int *timeout_ms) {
    cn_bus *b = ctx;
    if (!b->loop_conn) {
        uint64_t now = cn_now_ms();
        if (now < b->retry_at_ms) {
            cn_loop_timeout_until(timeout_ms, b->retry_at_ms, now);
            return 0;
        }
        b->loop_conn = connect_and_publish(b, 1);
        if (!b->loop_conn) {
            b->retry_at_ms = now + (uint64_t)b->backoff_ms;
            b->backoff_ms = b->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : b->backoff_ms * 2;
            cn_loop_timeout_lower(timeout_ms, b->backoff_ms);
            return 0;
        }
        b->backoff_ms = BACKOFF_FIRST_MS;
    }
    /* libdbus's dispatch: each queued message goes through bus_receive.c's filter. */
    while (dbus_connection_dispatch(b->loop_conn) == DBUS_DISPATCH_DATA_REMAINS) {}
    if (!dbus_connection_get_is_connected(b->loop_conn)) {
        drop_connection(b);
        *timeout_ms = 0; /* reconnect at once */
        return 0;
    }
    cn_calls_expire(b, timeout_ms);
    return cn_watches_prepare(b, fds, cap, timeout_ms);
}

CN_HOT static int source_handle(void *ctx, const struct pollfd *fds, size_t n) {
    cn_bus *b = ctx;
    return b->loop_conn ? cn_watches_handle(b, fds, n) : 1; /* disconnected: the prepare reconnects */
}

static void source_stop(void *ctx) { drop_connection(ctx); }

/* ---- the operations ---- */

static uint32_t bus_start(cn_transport *t) {
    cn_bus *b = bus_of(t);
    if (atomic_load_explicit(&b->started, memory_order_acquire)) return NOTIFY_STATUS_OK;
    cn_mutex_lock(&b->start_lock);
    uint32_t st = NOTIFY_STATUS_OK;
    if (!b->started && !b->resolved) { /* the default center resolves its bus at first use */
        char *address = NULL;
        st = cn_resolve_bus(b->spec, &b->kind, &address);
        if (address) cn_link_keep_address(b, address);
        b->resolved = st == NOTIFY_STATUS_OK;
    }
    if (!b->started && st == NOTIFY_STATUS_OK) {
        DBusConnection *conn = connect_and_publish(b, 0);
        cn_loop_source source = { b, source_prepare, source_handle, source_stop };
        /* The loop's from its first round: set before the thread exists (pthread_create orders it). */
        b->loop_conn = conn;
        if (!conn) st = NOTIFY_STATUS_SERVER_NOT_FOUND;
        else if (cn_loop_add_source(b->loop, &source) != 0 || cn_loop_start(b->loop) != 0) st = NOTIFY_STATUS_FAILED;
        if (conn && st != NOTIFY_STATUS_OK) { /* the loop never ran: nobody else holds it */
            b->loop_conn = NULL;
            cn_link_drop(b);
            dbus_connection_unref(conn);
        }
        if (st == NOTIFY_STATUS_OK) atomic_store_explicit(&b->started, 1, memory_order_release);
    }
    cn_mutex_unlock(&b->start_lock);
    return st;
}

static uint64_t bus_generation(cn_transport *t) { return cn_link_gen(bus_of(t)); }

static uint32_t bus_ready(cn_transport *t) { return cn_bus_ready(bus_of(t)); }

static uint32_t bus_send(cn_transport *t, const cn_outgoing_post *post) { return cn_bus_send(bus_of(t), post); }

static uint32_t bus_send_distributed(cn_transport *t, const cn_outgoing_distributed *post) {
    return cn_bus_send_distributed(bus_of(t), post);
}

static uint32_t bus_flush(cn_transport *t, int timeout_ms) { return cn_bus_flush(bus_of(t), timeout_ms); }

static cn_rule_request *bus_subscribe_begin(cn_transport *t, const char *key, cn_key_kind kind, uint64_t gen) {
    return cn_rules_add_begin(bus_of(t), key, kind, gen);
}

static uint32_t bus_subscribe_finish(cn_transport *t, cn_rule_request *r, const char *key) {
    return cn_rules_add_finish(bus_of(t), r, key);
}

static void bus_subscribe_now(cn_transport *t, const char *key, cn_key_kind kind, uint64_t gen) {
    cn_rules_add_now(bus_of(t), key, kind, gen);
}

static void bus_unsubscribe(cn_transport *t, const char *key, cn_key_kind kind, uint64_t gen) {
    cn_rules_remove(bus_of(t), key, kind, gen);
}

static const char *bus_address(cn_transport *t) { return cn_link_address(bus_of(t)); }

static void bus_destroy(cn_transport *t) {
    cn_bus *b = bus_of(t);
    cn_receive_forget_senders(b);
    cn_rules_free(b);
    cn_calls_free(b);
    cn_watches_free(b);
    cn_gate_free(b);
    cn_link_free(b);
    cn_mutex_destroy(&b->start_lock);
    free(b->spec);
    free(b);
}

static const cn_transport_ops bus_ops = {
    .start = bus_start,
    .generation = bus_generation,
    .ready = bus_ready,
    .send = bus_send,
    .send_distributed = bus_send_distributed,
    .flush = bus_flush,
    .subscribe_begin = bus_subscribe_begin,
    .subscribe_finish = bus_subscribe_finish,
    .subscribe_now = bus_subscribe_now,
    .unsubscribe = bus_unsubscribe,
    .address = bus_address,
    .destroy = bus_destroy,
};

cn_transport *cn_bus_transport_new(const char *spec, int resolved, cn_bus_kind kind, char *address, cn_loop *loop,
                                   cn_transport_events events) {
    dbus_threads_init_default(); /* libdbus's locks, before its first object */
    cn_bus *b = calloc(1, sizeof *b);
    if (!b || (spec && !(b->spec = strdup(spec)))) { free(b); return NULL; }
    b->resolved = resolved;
    b->base.ops = &bus_ops;
    b->events = events;
    b->loop = loop;
    b->kind = kind;
    b->backoff_ms = BACKOFF_FIRST_MS;
    cn_mutex_init(&b->start_lock, CN_LOCK_START);
    cn_link_init(b, address);
    cn_gate_init(b);
    cn_watches_init(b);
    cn_rules_init(b);
    cn_calls_init(b);
    return &b->base;
}
