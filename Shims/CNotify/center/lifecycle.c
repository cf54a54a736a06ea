/*
 * lifecycle.c: a center's life. Creation (its loop, its transport, its parts), the process-wide
 * list (flushed at exit), what its transport reports (cn_transport_events), and its end.
 *
 * One function decides who frees a center: cn_center_dispose. From any thread but the center's
 * own loop thread it stops the loop (joining it) and frees the center before returning. On the
 * loop thread (a callback destroyed its center) it only asks the loop to end; the loop, on its way
 * out, tells the owner (loop_ended below), which frees it. A destroy from inside a callback is
 * deferred to the end of that delivery (center/delivery.c), which then calls dispose through the
 * table it was handed (destroyed_in_callback).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "center.h"

/* ---- the process-wide list: every live center is flushed when the process exits ---- */

static cn_mutex centers_lock = CN_MUTEX_INITIALIZER(CN_LOCK_CENTERS);
static CNotify_center **centers;
static size_t ncenters;

void cn_center_flush_all(int timeout_ms) {
    if (cn_is_forked_child()) return; /* the connections are the parent's */
    cn_mutex_lock(&centers_lock);
    for (size_t i = 0; i < ncenters; i++) centers[i]->transport->ops->flush(centers[i]->transport, timeout_ms);
    cn_mutex_unlock(&centers_lock);
}

static void flush_all_at_exit(void) { cn_center_flush_all(2000); }

static int list_add(CNotify_center *c) {
    static int registered_atexit;
    cn_mutex_lock(&centers_lock);
    CNotify_center **n = realloc(centers, (ncenters + 1) * sizeof *n);
    if (n) { centers = n; centers[ncenters++] = c; }
    if (!registered_atexit) { registered_atexit = 1; atexit(flush_all_at_exit); }
    cn_mutex_unlock(&centers_lock);
    return n ? 0 : -1;
}

static void list_remove(CNotify_center *c) {
    cn_mutex_lock(&centers_lock);
    for (size_t i = 0; i < ncenters; i++)
        if (centers[i] == c) { centers[i] = centers[--ncenters]; break; }
    cn_mutex_unlock(&centers_lock);
}

/* ---- what the transport reports (loop thread) ---- */

CN_HOT static int on_post_arrived(void *ctx, const cn_received_post *post) {
    CNotify_center *c = ctx;
    uint64_t gaps;
    if (cn_received_note(&c->received, post, &gaps) == CN_POST_DUPLICATE) {
        atomic_fetch_add_explicit(&c->counters.duplicates, 1, memory_order_relaxed);
        return 0;
    }
    if (gaps) atomic_fetch_add_explicit(&c->counters.gaps, gaps, memory_order_relaxed);
    if (post->taken) atomic_fetch_add_explicit(post->taken, 1, memory_order_relaxed); /* before its callbacks */
    cn_deliver(c, post);
    return 1;
}

static void on_post_rejected(void *ctx) {
    CNotify_center *c = ctx;
    atomic_fetch_add_explicit(&c->counters.rejected, 1, memory_order_relaxed);
}

static void on_distributed_arrived(void *ctx, const cn_received_distributed *post) {
    CNotify_center *c = ctx;
    uint64_t gaps;
    cn_received_post numbered = { post->name, post->sender, post->origin, post->seq, post->has_seq, 0 };
    if (cn_received_note(&c->distributed_received, &numbered, &gaps) == CN_POST_DUPLICATE) {
        atomic_fetch_add_explicit(&c->counters.duplicates, 1, memory_order_relaxed);
        return;
    }
    if (gaps) atomic_fetch_add_explicit(&c->counters.distributed_gaps, gaps, memory_order_relaxed);
    cn_deliver_distributed(c, post, post->origin && cn_outbox_is_ours(&c->outbox, post->origin));
}

static void on_distributed_dropped(void *ctx) {
    CNotify_center *c = ctx;
    atomic_fetch_add_explicit(&c->counters.distributed_dropped, 1, memory_order_relaxed);
}

static void on_connected(void *ctx, uint64_t gen, int again) {
    CNotify_center *c = ctx;
    if (again) atomic_fetch_add_explicit(&c->counters.reconnects, 1, memory_order_relaxed);
    cn_subs_resubscribe(&c->subs, c->transport, gen);
}

static void on_disconnected(void *ctx) {
    CNotify_center *c = ctx;
    /* Senders' numbers were true of that connection's bus instance only: a restarted daemon hands
     * out the same unique names (:1.1, ...) to other processes. */
    cn_received_forget(&c->received);
    cn_received_forget(&c->distributed_received);
}

/* ---- creation and the end ---- */

static void center_free(CNotify_center *c) {
    /* The loop has ended (joined, or ending on this thread): nothing is pinned or running. */
    cn_registry_free(&c->registry);
    cn_registry_free(&c->distributed);
    cn_subs_free(&c->subs);
    cn_delivery_free(&c->delivery);
    cn_received_forget(&c->received);
    cn_received_forget(&c->distributed_received);
    cn_outbox_free(&c->outbox);
    cn_state_free(&c->state);
    if (c->transport) c->transport->ops->destroy(c->transport);
    cn_loop_free(&c->loop);
    free(c->bus_spec);
    free(c);
}

static void loop_ended(void *ctx) {
    CNotify_center *c = ctx;
    if (atomic_load_explicit(&c->lifecycle, memory_order_acquire) == CN_LIFE_DESTROYED && cn_loop_on_thread(&c->loop))
        if (c->free_on_loop_exit) center_free(c);
}

static void destroyed_in_callback(void *ctx) { cn_center_dispose(ctx); }

/* `place`: the bus resolved already (its address taken), or NULL: resolved at the start. */
static CNotify_center *center_alloc(const char *bus, cn_transport_place *place) {
    cn_fork_guard_install();
    CNotify_center *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->bus_spec = bus ? strdup(bus) : NULL;
    if ((bus && !c->bus_spec) || cn_outbox_set_origin(&c->outbox) != 0 ||
        cn_loop_init(&c->loop, (cn_loop_owner){ c, loop_ended }) != 0) {
        free(c->bus_spec);
        free(c);
        return NULL;
    }
    cn_transport_events events = { .ctx = c, .post_arrived = on_post_arrived, .post_rejected = on_post_rejected,
                                   .distributed_arrived = on_distributed_arrived,
                                   .distributed_dropped = on_distributed_dropped, .connected = on_connected,
                                   .disconnected = on_disconnected };
    /* The transport the entry point picks for the spec (transport/transports.c). */
    c->transport = cn_transport_open(bus, place, &c->loop, events);
    atomic_init(&c->lifecycle, CN_LIFE_LIVE);
    cn_registry_init(&c->registry);
    cn_registry_init(&c->distributed);
    cn_subs_init(&c->subs);
    cn_delivery_init(&c->delivery, (cn_delivery_owner){ c, destroyed_in_callback });
    cn_outbox_init(&c->outbox);
    cn_state_init(&c->state);
    if (!c->transport || list_add(c) != 0) {
        center_free(c);
        return NULL;
    }
    return c;
}

static CNotify_center *default_center;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void make_default(void) { default_center = center_alloc(NULL, NULL); }

CNotify_center *cn_center_default(void) {
    pthread_once(&default_once, make_default);
    if (!default_center) cn_set_error("out of memory (or of file descriptors) making the default center");
    return default_center;
}

CNotify_center *cn_center_new(const char *bus, uint32_t *status) {
    cn_transport_place place;
    *status = cn_transport_resolve(bus, &place); /* a bad address fails here, not at the first post */
    if (*status != NOTIFY_STATUS_OK) return NULL;
    CNotify_center *c = center_alloc(bus, &place);
    free(place.address); /* NULL once the transport took it */
    if (c) return c;
    cn_set_error("out of memory (or of file descriptors) making a center");
    *status = NOTIFY_STATUS_FAILED;
    return NULL;
}

uint32_t cn_center_start(CNotify_center *c) { return c->transport->ops->start(c->transport); }

void cn_center_dispose(CNotify_center *c) {
    if (cn_loop_on_thread(&c->loop)) {
        c->free_on_loop_exit = 1; /* read by loop_ended, on this same thread */
        cn_loop_stop(&c->loop);
        return;
    }
    /* What the transport still holds back goes out first, never waiting (the fast path's
     * coalesced bus copies: a center that ends has posted its last). */
    c->transport->ops->flush(c->transport, 0);
    cn_loop_stop(&c->loop); /* joined: its sources closed their connections */
    center_free(c);
}

void cn_center_destroy(CNotify_center *c) {
    int live = CN_LIFE_LIVE;
    int first = atomic_compare_exchange_strong(&c->lifecycle, &live, CN_LIFE_DESTROYED);
    assert(first); /* a center is destroyed once */
    (void)first;
    list_remove(c);
    if (cn_in_delivery(c)) { /* from one of its callbacks: once that delivery is over */
        cn_delivery_defer_destroy(c);
        return;
    }
    cn_delivery_close(c);
    cn_center_dispose(c);
}

int cn_center_is_default(CNotify_center *c) { return c == default_center; }

/* ---- what a center reports ---- */

uint32_t cn_center_flush(CNotify_center *c, int timeout_ms) { return c->transport->ops->flush(c->transport, timeout_ms); }

const char *cn_center_address(CNotify_center *c) { return c->transport->ops->address(c->transport); }

void cn_center_set_fast_path(CNotify_center *c, int enabled) { cn_transport_set_fast_path(c->transport, enabled); }

void cn_center_fast_path_stats(CNotify_center *c, CNotify_fast_path_stats *out) {
    cn_transport_fast_path_stats(c->transport, out);
}

void cn_center_fast_path_guards(CNotify_center *c, CNotify_fast_path_guards *out) {
    cn_transport_fast_path_guards(c->transport, out);
}

void cn_center_stats(CNotify_center *c, CNotify_stats *out) {
    out->received = atomic_load(&c->counters.received);
    out->delivered = atomic_load(&c->counters.delivered);
    out->gaps = atomic_load(&c->counters.gaps);
    out->reconnects = atomic_load(&c->counters.reconnects);
    out->rejected = atomic_load(&c->counters.rejected);
}

uint64_t cn_center_unmatched(CNotify_center *c) { return atomic_load(&c->counters.unmatched); }

void cn_center_distributed_stats(CNotify_center *c, CNotify_distributed_stats *out) {
    out->received = atomic_load(&c->counters.distributed_received);
    out->delivered = atomic_load(&c->counters.distributed_delivered);
    out->dropped = atomic_load(&c->counters.distributed_dropped);
    out->gaps = atomic_load(&c->counters.distributed_gaps);
}
