/*
 * fast_transport.c: the fast path as a transport (transport.h) around the bus transport. Every
 * operation is the bus's, and besides: a post also goes to the peers that observe it
 * (fast_peers.c); a subscription also counts in the endpoint's buckets (fast_announce.c); a post
 * the bus brings goes up marked with its poster's two paths, after the frames that poster wrote
 * before it (fast_endpoint.c); the bus's Endpoint, Query, Sync
 * and departures reach the two sides through the hooks it hands the bus (bus_fastpath.c). Its
 * descriptors are one epoll set, one source of the center's loop.
 *
 * On by default; DARWIN_NOTIFY_FAST_PATH=0 in the environment, or CNotify_center_set_fast_path,
 * turns it off (posts then take the bus alone, as before 0.5).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>
#include "fast.h"

static cn_fast *fast_of(cn_transport *t) { return (cn_fast *)t; }
/* An operation: on the loop thread it comes from a callback (or the loop's own work), and
 * whatever it changed, the loop's next round prepares (loop.h). */
static cn_fast *op(cn_transport *t) {
    cn_fast *f = fast_of(t);
    cn_loop_unsettle(f->loop);
    return f;
}

/* ---- the bus's events, on their way up to the center ---- */

CN_HOT static int on_post_arrived(void *ctx, const cn_received_post *post) {
    cn_fast *f = ctx;
    cn_received_post marked = *post;
    marked.two_paths = cn_endpoint_before_bus(f, post);
    int taken = f->up.post_arrived(f->up.ctx, &marked);
    if (!taken && marked.two_paths) atomic_fetch_add(&f->duplicates, 1); /* its fast copy came first */
    return taken;
}
static void on_post_rejected(void *ctx) { cn_fast *f = ctx; f->up.post_rejected(f->up.ctx); }
static void on_distributed_arrived(void *ctx, const cn_received_distributed *post) {
    cn_fast *f = ctx;
    f->up.distributed_arrived(f->up.ctx, post);
}
static void on_distributed_dropped(void *ctx) { cn_fast *f = ctx; f->up.distributed_dropped(f->up.ctx); }

static void on_connected(void *ctx, uint64_t gen, int again) {
    cn_fast *f = ctx;
    cn_bus_fast_rules(f->bus_impl, gen);
    /* The center adds every subscription again (subscribe_now): the buckets are counted anew. */
    if (again) cn_endpoint_reset_counts(f);
    atomic_store(&f->peers.query_due, 1);
    f->up.connected(f->up.ctx, gen, again);
}

static void on_disconnected(void *ctx) {
    cn_fast *f = ctx;
    if (cn_loop_on_thread(f->loop)) { /* else the first start failed: nothing was made */
        cn_mutex_lock(&f->peers.lock);
        cn_coalesce_flush_locked(f, 0); /* held for a bus that is gone */
        cn_mutex_unlock(&f->peers.lock);
        cn_peers_disconnected(f);
        cn_endpoint_disconnected(f);
    }
    f->up.disconnected(f->up.ctx);
}

/* ---- the bus's fast-path signals (bus_fastpath.c), loop thread ---- */

static void hook_endpoint(void *ctx, const char *sender, const char *token, const unsigned char *bitmap,
                          const char *const *namespaces, size_t n, uint32_t features) {
    cn_peers_announced(ctx, sender, token, bitmap, namespaces, n, features);
}
static void hook_refused(void *ctx) { atomic_fetch_add(&((cn_fast *)ctx)->refused, 1); }
static void hook_query(void *ctx, const char *sender) { cn_endpoint_query(ctx, sender); }
static void hook_sync(void *ctx, const char *sender, uint64_t token) { cn_endpoint_sync(ctx, sender, token); }
static void hook_credentials(void *ctx, uint64_t request, int ok, pid_t pid, uid_t uid) {
    if (!cn_peers_credentials(ctx, request, ok, pid, uid)) cn_endpoint_credentials(ctx, request, ok, pid, uid);
}
static void hook_name_lost(void *ctx, const char *unique) {
    cn_peers_gone(ctx, unique);
    cn_endpoint_sender_gone(ctx, unique);
}

/* ---- the loop's source ---- */

static size_t source_prepare(void *ctx, struct pollfd *fds, size_t cap, int *timeout_ms) {
    cn_fast *f = ctx;
    cn_endpoint_prepare(f, timeout_ms);
    cn_peers_prepare(f, timeout_ms);
    cn_coalesce_prepare(f, timeout_ms);
    cn_endpoint_offer_direct(f);
    return cn_fast_files_prepare(f, fds, cap);
}

CN_HOT static int source_handle(void *ctx, const struct pollfd *fds, size_t n) {
    return cn_fast_files_handle(ctx, fds, n);
}

/* The loop waits in the fast path's set while the fast path is on: with it off, every post comes by
 * the bus, whose descriptor an entry of the loop's would cost an epoll_ctl per wake-up (one-shot),
 * where a poll costs none (measured: the bus-only ping-pong 0.07 of the floor slower). */
static int source_wait_set(void *ctx) {
    cn_fast *f = ctx;
    return atomic_load_explicit(&f->enabled, memory_order_relaxed) != CNOTIFY_FAST_PATH_OFF ? f->epoll_fd : -1;
}

static void source_stop(void *ctx) {
    cn_fast *f = ctx;
    cn_peers_disconnected(f);
    cn_endpoint_disconnected(f);
}

/* ---- the operations ---- */

static uint32_t fast_start(cn_transport *t) {
    cn_fast *f = op(t);
    uint32_t st = f->bus->ops->start(f->bus);
    if (st == NOTIFY_STATUS_OK && !atomic_exchange(&f->source_added, 1)) {
        cn_loop_source source = { f, source_prepare, source_handle, source_stop, source_wait_set };
        if (cn_loop_add_source(f->loop, &source) != 0) atomic_store(&f->enabled, 0); /* the bus alone */
        cn_loop_wake(f->loop);
    }
    return st;
}
static uint64_t fast_generation(cn_transport *t) { return fast_of(t)->bus->ops->generation(fast_of(t)->bus); }
static uint32_t fast_ready(cn_transport *t) {
    cn_fast *f = op(t);
    /* An observer that reads slower than we post: the post waits for its room (bounded, no lock
     * held), in either mode. Direct only, one that missed a copy has no bus copy to fall back on;
     * by default the bus copy covers it, but the barrier that must follow (a Sync, by the bus)
     * would keep the fast path idle for as long as the bus is behind. */
    if (atomic_load_explicit(&f->enabled, memory_order_relaxed) != CNOTIFY_FAST_PATH_OFF) cn_peers_await_room(f);
    return f->bus->ops->ready(f->bus);
}

static uint32_t fast_send(cn_transport *t, const cn_outgoing_post *post) {
    cn_fast *f = op(t);
    /* The direct copies first (they are what the observers of this host wait for), then the bus
     * copy, for whoever the fast path does not reach: foreign clients, observers not connected
     * yet, and any connected one that misses its direct copy. Each path keeps this poster's order
     * and the observer delivers the first copy of each post, so either order of sending is safe;
     * only while connected, so that a post the bus refuses reached nobody. */
    int mode = atomic_load_explicit(&f->enabled, memory_order_relaxed);
    if (mode == CNOTIFY_FAST_PATH_OFF || f->bus->ops->generation(f->bus) == 0) return f->bus->ops->send(f->bus, post);
    return cn_peers_post(f, post, mode == CNOTIFY_FAST_PATH_DIRECT);
}
static uint32_t fast_send_distributed(cn_transport *t, const cn_outgoing_distributed *post) {
    return op(t)->bus->ops->send_distributed(fast_of(t)->bus, post);
}
/* The held bus copies first (a process that exits flushes: its last posts reach foreign clients). */
static void send_held(cn_fast *f) {
    if (atomic_load_explicit(&f->coalesce.due_at, memory_order_relaxed) == UINT64_MAX) return; /* none held */
    cn_mutex_lock(&f->peers.lock);
    cn_coalesce_flush_locked(f, 1);
    cn_mutex_unlock(&f->peers.lock);
}
static uint32_t fast_flush(cn_transport *t, int timeout_ms) {
    cn_fast *f = op(t);
    send_held(f);
    return f->bus->ops->flush(f->bus, timeout_ms);
}

static cn_rule_request *fast_subscribe_begin(cn_transport *t, const char *key, cn_key_kind kind, uint64_t gen) {
    cn_fast *f = op(t);
    cn_endpoint_subscribed(f, key, kind, +1);
    return f->bus->ops->subscribe_begin(f->bus, key, kind, gen);
}
static uint32_t fast_subscribe_finish(cn_transport *t, cn_rule_request *r, const char *key) {
    return op(t)->bus->ops->subscribe_finish(fast_of(t)->bus, r, key);
}
static void fast_subscribe_now(cn_transport *t, const char *key, cn_key_kind kind, uint64_t gen) {
    cn_fast *f = op(t);
    cn_endpoint_subscribed(f, key, kind, +1);
    f->bus->ops->subscribe_now(f->bus, key, kind, gen);
}
static void fast_unsubscribe(cn_transport *t, const char *key, cn_key_kind kind, uint64_t gen) {
    cn_fast *f = op(t);
    cn_endpoint_subscribed(f, key, kind, -1);
    f->bus->ops->unsubscribe(f->bus, key, kind, gen);
}
static const char *fast_address(cn_transport *t) { return fast_of(t)->bus->ops->address(fast_of(t)->bus); }

static void fast_destroy(cn_transport *t) {
    cn_fast *f = fast_of(t);
    f->bus->ops->destroy(f->bus);
    cn_coalesce_free(f);
    cn_peers_free(f);
    cn_endpoint_free(f);
    close(f->epoll_fd);
    free(f);
}

void cn_fast_transport_set(cn_transport *t, int enabled) {
    cn_fast *f = fast_of(t);
    int was = atomic_exchange(&f->enabled, enabled);
    if (was != enabled) send_held(f); /* held by the mode that ends */
    if (was && !enabled) {
        /* Posts take the bus alone from now on, and when the fast path is on again every
         * connection is made anew, each with its barrier (Sync) behind those bus-only posts. */
        cn_peers_disconnected(f);
    }
    if (!was && enabled) {
        atomic_store(&f->peers.query_due, 1);
        cn_endpoint_announce_soon(f);
    }
    cn_loop_wake(f->loop);
}

void cn_fast_transport_stats(cn_transport *t, CNotify_fast_path_stats *out) {
    cn_fast *f = fast_of(t);
    out->enabled = atomic_load(&f->enabled);
    out->sent = atomic_load(&f->fast_sent);
    out->delivered = atomic_load(&f->fast_delivered);
    out->duplicates = atomic_load(&f->duplicates);
    out->fallbacks = atomic_load(&f->fallbacks);
    out->refused = atomic_load(&f->refused);
    out->bus_skipped = atomic_load(&f->bus_skipped);
    cn_mutex_lock(&f->peers.lock);
    out->peers = 0;
    for (size_t i = 0; i < f->peers.npeers; i++) out->peers += cn_peers_is_ready(f->peers.peers[i]);
    cn_mutex_unlock(&f->peers.lock);
}

void cn_fast_transport_guards(cn_transport *t, CNotify_fast_path_guards *out) {
    cn_fast *f = fast_of(t);
    out->unverified_closed = atomic_load(&f->unverified_closed);
    out->credential_asks = atomic_load(&f->credential_asks);
    out->answers = atomic_load(&f->answers);
    out->answers_coalesced = atomic_load(&f->answers_coalesced);
    out->bus_kept = atomic_load(&f->bus_kept);
    out->drained = atomic_load(&f->drained);
}

static const cn_transport_ops fast_ops = {
    .start = fast_start,
    .generation = fast_generation,
    .ready = fast_ready,
    .send = fast_send,
    .send_distributed = fast_send_distributed,
    .flush = fast_flush,
    .subscribe_begin = fast_subscribe_begin,
    .subscribe_finish = fast_subscribe_finish,
    .subscribe_now = fast_subscribe_now,
    .unsubscribe = fast_unsubscribe,
    .address = fast_address,
    .destroy = fast_destroy,
};

int cn_fast_transport_is(const cn_transport *t) { return t->ops == &fast_ops; }

cn_transport *cn_fast_transport_new(const char *spec, int resolved, cn_bus_kind kind, char *address, cn_loop *loop,
                                    cn_transport_events up) {
    cn_fast *f = calloc(1, sizeof *f);
    if (!f) { free(address); return NULL; }
    f->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    cn_transport_events down = { .ctx = f, .post_arrived = on_post_arrived, .post_rejected = on_post_rejected,
                                 .distributed_arrived = on_distributed_arrived, .distributed_dropped = on_distributed_dropped,
                                 .connected = on_connected, .disconnected = on_disconnected };
    f->bus = f->epoll_fd >= 0 ? cn_bus_transport_new(spec, resolved, kind, address, loop, down) : NULL;
    if (!f->bus) {
        if (f->epoll_fd >= 0) close(f->epoll_fd);
        else free(address);
        free(f);
        return NULL;
    }
    f->base.ops = &fast_ops;
    f->bus_impl = (cn_bus *)f->bus; /* a cn_bus begins with its cn_transport (bus.h) */
    f->up = up;
    f->loop = loop;
    const char *env = getenv("DARWIN_NOTIFY_FAST_PATH");
    atomic_init(&f->enabled, !env ? CNOTIFY_FAST_PATH_ON : strcmp(env, "0") == 0 ? CNOTIFY_FAST_PATH_OFF
                             : strcmp(env, "direct") == 0 ? CNOTIFY_FAST_PATH_DIRECT : CNOTIFY_FAST_PATH_ON);
    struct rlimit files;
    size_t share = getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY
                   ? (size_t)(files.rlim_cur / CN_FAST_FD_SHARE) : CN_FAST_PEERS_MAX;
    f->fd_cap = share < CN_FAST_PEERS_MAX ? share : CN_FAST_PEERS_MAX;
    f->chan = cn_channels[0];
    cn_endpoint_init(&f->endpoint);
    f->endpoint.listen.ready = cn_endpoint_accept_ready;
    cn_peers_init(&f->peers);
    cn_coalesce_init(&f->coalesce);
    cn_bus_fast_hooks hooks = { f, hook_endpoint, hook_refused, hook_query, hook_sync, hook_name_lost, hook_credentials };
    cn_bus_fast_set_hooks(f->bus_impl, &hooks);
    return &f->base;
}
