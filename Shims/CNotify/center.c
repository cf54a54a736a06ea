/*
 * center.c: a center's life. Creation, the process-wide list (flushed at exit), the lifecycle
 * state and destroy, which reads that state in this one place, and the statistics.
 *
 * Destroy has three shapes, one lifecycle state each (internal.h, cn_lifecycle):
 *   - from any thread outside the center's callbacks: STOPPING; the I/O thread is joined and the
 *     center freed before destroy returns;
 *   - from a callback on its own I/O thread: STOPPING_ON_IO; that thread frees the center once
 *     the callback has returned and it has left its loop;
 *   - from a `self.` callback on another thread: DESTROY_DEFERRED; that thread finishes the
 *     destroy once its delivery is over (delivery.c), as STOPPING.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* ---- the process-wide list: every live center is flushed when the process exits ---- */

static pthread_mutex_t centers_lock = PTHREAD_MUTEX_INITIALIZER;
static CNotify_center **centers;
static size_t ncenters;

static void flush_all_at_exit(void) {
    if (cn_is_forked_child()) return; /* the connections are the parent's */
    pthread_mutex_lock(&centers_lock);
    for (size_t i = 0; i < ncenters; i++) CNotify_center_flush(centers[i], 2000);
    pthread_mutex_unlock(&centers_lock);
}

static int list_add(CNotify_center *c) {
    static int registered_atexit;
    pthread_mutex_lock(&centers_lock);
    CNotify_center **n = realloc(centers, (ncenters + 1) * sizeof *n);
    if (n) { centers = n; centers[ncenters++] = c; }
    if (!registered_atexit) { registered_atexit = 1; atexit(flush_all_at_exit); }
    pthread_mutex_unlock(&centers_lock);
    return n ? 0 : -1;
}

static void list_remove(CNotify_center *c) {
    pthread_mutex_lock(&centers_lock);
    for (size_t i = 0; i < ncenters; i++)
        if (centers[i] == c) { centers[i] = centers[--ncenters]; break; }
    pthread_mutex_unlock(&centers_lock);
}

/* ---- creation ---- */

static CNotify_center *center_alloc(const char *bus) {
    cn_fork_guard_install();
    CNotify_center *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->bus_spec = bus ? strdup(bus) : NULL;
    if ((bus && !c->bus_spec) || cn_io_init(c) != 0) {
        free(c->bus_spec);
        free(c);
        return NULL;
    }
    atomic_init(&c->lifecycle, CN_LIFE_LIVE);
    cn_link_init(c);
    cn_watches_init(c);
    cn_registry_init(c);
    cn_rules_init(c);
    cn_delivery_init(c);
    cn_state_init(c);
    if (list_add(c) != 0) {
        cn_center_free(c);
        return NULL;
    }
    return c;
}

static CNotify_center *default_center;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void make_default(void) {
    dbus_threads_init_default();
    default_center = center_alloc(NULL);
}

CNotify_center *CNotify_center_get_darwin_notify_center(void) {
    cn_clear_error();
    pthread_once(&default_once, make_default);
    if (!default_center) cn_set_error("out of memory (or of file descriptors) making the default center");
    return default_center;
}

CNotify_center *CNotify_center_create(const char *bus, uint32_t *out_status) {
    cn_clear_error();
    dbus_threads_init_default();
    cn_bus_kind kind;
    char *address = NULL;
    uint32_t st = cn_resolve_bus(bus, &kind, &address);
    if (st == NOTIFY_STATUS_OK) {
        CNotify_center *c = center_alloc(bus);
        if (c) {
            c->kind = kind;
            c->address = address;
            if (out_status) *out_status = NOTIFY_STATUS_OK;
            return c;
        }
        free(address);
        cn_set_error("out of memory (or of file descriptors) making a center");
        st = NOTIFY_STATUS_FAILED;
    }
    if (out_status) *out_status = st;
    return NULL;
}

/* ---- lifecycle ---- */

void cn_lifecycle_advance(CNotify_center *c, cn_lifecycle from, cn_lifecycle to) {
    /* The only moves: LIVE to any destroy state, and DEFERRED on to STOPPING. */
    assert((from == CN_LIFE_LIVE && to != CN_LIFE_LIVE) || (from == CN_LIFE_DESTROY_DEFERRED && to == CN_LIFE_STOPPING));
    int expected = from;
    int moved = atomic_compare_exchange_strong_explicit(&c->lifecycle, &expected, to, memory_order_acq_rel,
                                                        memory_order_acquire);
    assert(moved); /* a center is destroyed once */
    (void)moved;
}

void CNotify_center_destroy(CNotify_center *c) {
    cn_clear_error();
    if (!c || c == default_center) return;
    list_remove(c);
    /* Tokens die with their center (darwin_notify.h): notify_check on one now answers
     * INVALID_TOKEN instead of reading freed memory. */
    cn_tokens_cancel_for_center(c);
    if (cn_in_delivery(c) && !cn_on_io_thread(c)) {
        cn_lifecycle_advance(c, CN_LIFE_LIVE, CN_LIFE_DESTROY_DEFERRED);
        return;
    }
    cn_lifecycle_advance(c, CN_LIFE_LIVE, cn_on_io_thread(c) ? CN_LIFE_STOPPING_ON_IO : CN_LIFE_STOPPING);
    if (cn_io_stop(c)) cn_center_free(c);
}

void cn_center_finish_destroy(CNotify_center *c) {
    cn_lifecycle_advance(c, CN_LIFE_DESTROY_DEFERRED, CN_LIFE_STOPPING);
    if (cn_io_stop(c)) cn_center_free(c);
}

void cn_center_free(CNotify_center *c) {
    /* The I/O thread has ended or is ending on this thread: nothing is pinned or running. */
    cn_registry_free(c);
    cn_delivery_free(c);
    cn_send_free(c);
    cn_sender_cache_reset(c);
    cn_state_free(c);
    cn_watches_free(c);
    cn_link_free(c);
    cn_io_free(c);
    free(c->bus_spec);
    free(c->address);
    free(c);
}

/* ---- what a center reports ---- */

const char *CNotify_center_bus_address(CNotify_center *c) {
    return (c && c->address) ? c->address : "";
}

void CNotify_center_get_stats(CNotify_center *c, CNotify_stats *out) {
    cn_clear_error();
    if (!c || !out) { cn_set_error("center or stats pointer is NULL"); return; }
    out->received = atomic_load(&c->counters.received);
    out->delivered = atomic_load(&c->counters.delivered);
    out->gaps = atomic_load(&c->counters.gaps);
    out->reconnects = atomic_load(&c->counters.reconnects);
    out->rejected = atomic_load(&c->counters.rejected);
}

uint64_t CNotify_center_unmatched_posts(CNotify_center *c) {
    cn_clear_error();
    if (!c) { cn_set_error("center is NULL"); return 0; }
    return atomic_load(&c->counters.unmatched);
}
