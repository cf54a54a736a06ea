/*
 * `self.` names (Apple: "self." prefix): posted and observed within one process, never sent to
 * the bus, and usable with no bus at all. A post is delivered by the posting thread before
 * notify_post returns, as on macOS, under the center's dispatch lock so callbacks still run one
 * at a time: if another thread is running callbacks of the center, the poster waits for it. A
 * post made from inside a callback of the same center is queued instead and delivered once that
 * callback returns, so a callback that posts its own `self.` name never recurses.
 */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

typedef struct cn_queued_post {
    struct cn_queued_post *next;
    char name[];
} cn_queued_post;

static void deliver_queued(CNotify_center *c);

int cn_is_self_name(const char *name) { return name && strncmp(name, "self.", 5) == 0; }

int cn_is_self_namespace(const char *ns) { return ns && (strcmp(ns, "self") == 0 || cn_is_self_name(ns)); }

uint32_t cn_local_post(CNotify_center *c, const char *name) {
    size_t len = strlen(name) + 1;
    cn_queued_post *p = malloc(sizeof *p + len);
    if (!p) { cn_set_error("out of memory"); return NOTIFY_STATUS_FAILED; }
    p->next = NULL;
    memcpy(p->name, name, len);
    pthread_mutex_lock(&c->local_lock);
    if (c->local_tail) c->local_tail->next = p; else c->local_head = p;
    c->local_tail = p;
    atomic_fetch_add_explicit(&c->local_queued, 1, memory_order_release);
    pthread_mutex_unlock(&c->local_lock);
    if (cn_in_dispatch(c)) return NOTIFY_STATUS_OK; /* delivered when this callback returns */
    pthread_mutex_lock(&c->dispatch_lock);
    deliver_queued(c);
    int destroyed = c->destroy_pending; /* a callback destroyed the center: finish it now */
    pthread_mutex_unlock(&c->dispatch_lock);
    if (destroyed) { cn_center_finish_destroy(c); return NOTIFY_STATUS_OK; }
    cn_local_kick(c);
    return NOTIFY_STATUS_OK;
}

static cn_queued_post *pop(CNotify_center *c) {
    pthread_mutex_lock(&c->local_lock);
    cn_queued_post *p = c->local_head;
    if (p && !(c->local_head = p->next)) c->local_tail = NULL;
    if (p) atomic_fetch_sub_explicit(&c->local_queued, 1, memory_order_relaxed);
    pthread_mutex_unlock(&c->local_lock);
    return p;
}

/* dispatch_lock held. */
static void deliver_queued(CNotify_center *c) {
    for (cn_queued_post *p; (p = pop(c));) {
        cn_dispatch_post_locked(c, p->name, NULL, 0, 0);
        free(p);
    }
}

/* Runs after every dispatched bus post: an atomic load, not the queue's lock. */
static int pending(CNotify_center *c) {
    return atomic_load_explicit(&c->local_queued, memory_order_acquire) > 0;
}

void cn_local_kick(CNotify_center *c) {
    /* Whoever holds dispatch_lock calls this again after releasing it, so a post queued while
     * the trylock fails is never stranded. */
    while (pending(c)) {
        if (pthread_mutex_trylock(&c->dispatch_lock) != 0) return;
        deliver_queued(c);
        int destroyed = c->destroy_pending;
        pthread_mutex_unlock(&c->dispatch_lock);
        if (destroyed) { cn_center_finish_destroy(c); return; }
    }
}

void cn_local_free(CNotify_center *c) {
    for (cn_queued_post *p; (p = pop(c));) free(p);
}
