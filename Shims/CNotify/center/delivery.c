/*
 * delivery.c: handing a post to the observers of its name, one callback of a center at a time,
 * and the queue of `self.` posts.
 *
 * `self.` names (Apple's prefix) are posted and observed within one process, never sent, and
 * usable with no bus at all. A post is delivered by the posting thread before the post returns,
 * as on macOS, under delivery.lock so callbacks still run one at a time: if another thread is
 * running callbacks of the center, the poster waits for it. A post made from inside a callback of
 * the same center is queued instead and delivered once that callback returns, so a callback that
 * posts its own `self.` name never recurses.
 *
 * A callback may destroy its own center: the destroy is deferred (cn_delivery_defer_destroy) and,
 * once the delivery is over, handed to the owner's table (lifecycle.c's dispose).
 */
#include <stdlib.h>
#include <string.h>
#include "center.h"

typedef struct cn_queued_post {
    struct cn_queued_post *next;
    char name[];
} cn_queued_post;

static __thread CNotify_center *tl_delivering; /* the center whose callbacks this thread runs */
/* What cn_delivering_post reports: the post tl_delivering is delivering. */
static __thread cn_received_post tl_post;

static cn_queued_post *self_pop(cn_delivery *d);

void cn_delivery_init(cn_delivery *d, cn_delivery_owner owner) {
    d->owner = owner;
    cn_mutex_init(&d->lock, CN_LOCK_DELIVERY);
    cn_mutex_init(&d->self_lock, CN_LOCK_SELF);
}

void cn_delivery_free(cn_delivery *d) {
    for (cn_queued_post *p; (p = self_pop(d));) free(p);
    cn_mutex_destroy(&d->lock);
    cn_mutex_destroy(&d->self_lock);
}

int cn_in_delivery(CNotify_center *c) { return tl_delivering == c; }

enum { CN_OPEN = 0, CN_DESTROY_DEFERRED = 1, CN_CLOSED = 2 };

void cn_delivery_defer_destroy(CNotify_center *c) {
    c->delivery.destroyer = pthread_self(); /* only this thread finishes it: its callback is the one running */
    atomic_store_explicit(&c->delivery.destroy_wanted, CN_DESTROY_DEFERRED, memory_order_release);
}

void cn_delivery_close(CNotify_center *c) {
    atomic_store_explicit(&c->delivery.destroy_wanted, CN_CLOSED, memory_order_release);
}

static int destroy_wanted(CNotify_center *c) {
    return atomic_load_explicit(&c->delivery.destroy_wanted, memory_order_acquire) != CN_OPEN;
}

/* 1 once, on the thread whose callback destroyed the center, after its delivery is over. */
static int claim_destroy(CNotify_center *c) {
    int deferred = CN_DESTROY_DEFERRED;
    return pthread_equal(c->delivery.destroyer, pthread_self()) &&
           atomic_compare_exchange_strong(&c->delivery.destroy_wanted, &deferred, CN_CLOSED);
}

const cn_received_post *cn_delivering_post(CNotify_center *c) { return tl_delivering == c ? &tl_post : NULL; }

CN_HOT static void run_entries(CNotify_center *c, const char *name) {
    cn_entry *stack[16], **snap;
    size_t n = cn_registry_snapshot(&c->registry, name, stack, 16, &snap);
    if (n == 0) atomic_fetch_add_explicit(&c->counters.unmatched, 1, memory_order_relaxed);
    for (size_t i = 0; i < n; i++) {
        cn_entry *e = snap[i];
        int run = cn_registry_begin_run(&c->registry, e);
        if (run) {
            /* Counted before it runs: the callback, and whoever it tells, sees itself counted. */
            atomic_fetch_add_explicit(&c->counters.delivered, 1, memory_order_relaxed);
            if (e->cf_callback) e->cf_callback(c, (void *)e->observer, name, NULL, NULL);
            else e->handler(e->context, name);
        }
        cn_registry_end_run(&c->registry, e, run);
    }
    if (snap != stack) free(snap);
}

/* What this thread delivers for `c` (cn_in_delivery, cn_delivering_post) while `run(c, arg)` runs
 * its callbacks, the outer delivery's restored after: one mechanism for posts and distributed
 * posts. */
CN_HOT static void with_delivering_locked(CNotify_center *c, const cn_received_post *post, void (*run)(CNotify_center *, const void *),
                                   const void *arg) {
    CN_ASSERT_HELD(&c->delivery.lock);
    if (destroy_wanted(c)) return; /* destroyed by an earlier callback: nothing more runs */
    CNotify_center *outer = tl_delivering;
    cn_received_post outer_post = tl_post;
    tl_delivering = c;
    tl_post = *post;
    run(c, arg);
    tl_delivering = outer;
    tl_post = outer_post;
}

CN_HOT static void run_post(CNotify_center *c, const void *arg) {
    atomic_fetch_add_explicit(&c->counters.received, 1, memory_order_relaxed);
    run_entries(c, ((const cn_received_post *)arg)->name);
}

CN_HOT static void deliver_locked(CNotify_center *c, const cn_received_post *post) { with_delivering_locked(c, post, run_post, post); }

/* ---- the `self.` queue ---- */

static cn_queued_post *self_pop(cn_delivery *d) {
    cn_mutex_lock(&d->self_lock);
    cn_queued_post *p = d->self_head;
    if (p && !(d->self_head = p->next)) d->self_tail = NULL;
    if (p) atomic_fetch_sub_explicit(&d->self_queued, 1, memory_order_relaxed);
    cn_mutex_unlock(&d->self_lock);
    return p;
}

static void deliver_self_queue_locked(CNotify_center *c) {
    CN_ASSERT_HELD(&c->delivery.lock);
    for (cn_queued_post *p; (p = self_pop(&c->delivery));) {
        cn_received_post post = { p->name, NULL, 0, 0, 0, 0 };
        deliver_locked(c, &post);
        free(p);
    }
}

/* Delivers queued `self.` posts unless another thread is running callbacks of `c`. Whoever holds
 * delivery.lock calls this again after releasing it, so a post queued while the trylock fails is
 * never stranded. Then, if a callback of this thread destroyed the center, its owner finishes it. */
CN_HOT static void self_queue_kick(CNotify_center *c) {
    while (atomic_load_explicit(&c->delivery.self_queued, memory_order_acquire) > 0 && !destroy_wanted(c)) {
        if (cn_mutex_trylock(&c->delivery.lock) != 0) break;
        deliver_self_queue_locked(c);
        cn_mutex_unlock(&c->delivery.lock);
    }
    if (claim_destroy(c)) c->delivery.owner.destroyed(c->delivery.owner.ctx); /* c is gone */
}

uint32_t cn_deliver_self(CNotify_center *c, const char *name) {
    size_t len = strlen(name) + 1;
    cn_queued_post *p = malloc(sizeof *p + len);
    if (!p) { cn_set_error("out of memory"); return NOTIFY_STATUS_FAILED; }
    p->next = NULL;
    memcpy(p->name, name, len);
    cn_delivery *d = &c->delivery;
    cn_mutex_lock(&d->self_lock);
    if (d->self_tail) d->self_tail->next = p; else d->self_head = p;
    d->self_tail = p;
    atomic_fetch_add_explicit(&d->self_queued, 1, memory_order_release);
    cn_mutex_unlock(&d->self_lock);
    if (cn_in_delivery(c)) return NOTIFY_STATUS_OK; /* delivered when this callback returns */
    cn_mutex_lock(&d->lock);
    deliver_self_queue_locked(c);
    cn_mutex_unlock(&d->lock);
    self_queue_kick(c);
    return NOTIFY_STATUS_OK;
}

/* ---- distributed posts ---- */

static int object_passes(const cn_entry *e, const char *object) {
    return !e->object || (object && strcmp(e->object, object) == 0);
}

/* The handlers of one registry key ("" for every name) whose object filter `post` passes. */
static size_t run_distributed_key(CNotify_center *c, const char *key, const CNotify_distributed_note *note) {
    cn_entry *stack[16], **snap;
    size_t n = cn_registry_snapshot(&c->distributed, key, stack, 16, &snap), ran_any = 0;
    for (size_t i = 0; i < n; i++) {
        cn_entry *e = snap[i];
        int run = object_passes(e, note->object) && !destroy_wanted(c) && cn_registry_begin_run(&c->distributed, e);
        if (run) {
            atomic_fetch_add_explicit(&c->counters.distributed_delivered, 1, memory_order_relaxed); /* as run_entries */
            e->distributed_handler(e->context, note);
            ran_any++;
        }
        cn_registry_end_run(&c->distributed, e, run);
    }
    if (snap != stack) free(snap);
    return ran_any;
}

static void run_distributed(CNotify_center *c, const void *arg) {
    const CNotify_distributed_note *note = arg;
    atomic_fetch_add_explicit(&c->counters.distributed_received, 1, memory_order_relaxed);
    run_distributed_key(c, note->name, note);
    run_distributed_key(c, "", note);
}

void cn_deliver_distributed(CNotify_center *c, const cn_received_distributed *post, int from_this_center) {
    CNotify_distributed_note note = { post->name, post->object, post->user_info, post->sender,
                                      post->has_seq ? post->seq : 0, from_this_center, post->options };
    /* CNotify_center_current_post inside a handler describes this one: its sender and number. */
    cn_received_post current = { post->name, post->sender, post->origin, post->seq, post->has_seq, 0 };
    cn_mutex_lock(&c->delivery.lock);
    with_delivering_locked(c, &current, run_distributed, &note);
    cn_mutex_unlock(&c->delivery.lock);
    self_queue_kick(c);
}

CN_HOT void cn_deliver(CNotify_center *c, const cn_received_post *post) {
    cn_mutex_lock(&c->delivery.lock);
    deliver_locked(c, post);
    cn_mutex_unlock(&c->delivery.lock);
    self_queue_kick(c); /* `self.` posts made by these callbacks */
}
