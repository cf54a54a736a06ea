/*
 * delivery.c: handing a post to the observers of its name, one callback of a center at a time.
 * Also the sequence numbers of received posts (a gap is a post the bus dropped on the way to
 * us), and the queue of `self.` posts.
 *
 * `self.` names (Apple's prefix) are posted and observed within one process, never sent to the
 * bus, and usable with no bus at all. A post is delivered by the posting thread before the post
 * returns, as on macOS, under delivery.lock so callbacks still run one at a time: if another
 * thread is running callbacks of the center, the poster waits for it. A post made from inside a
 * callback of the same center is queued instead and delivered once that callback returns, so a
 * callback that posts its own `self.` name never recurses.
 */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

typedef struct cn_queued_post {
    struct cn_queued_post *next;
    char name[];
} cn_queued_post;

static __thread CNotify_center *tl_delivering; /* the center whose callbacks this thread runs */
/* What CNotify_center_current_post reports: the post tl_delivering is delivering. */
static __thread struct { const char *sender; uint64_t seq; int has_seq; } tl_post;

static cn_queued_post *self_pop(CNotify_center *c);

void cn_delivery_init(CNotify_center *c) {
    pthread_mutex_init(&c->delivery.lock, NULL);
    pthread_mutex_init(&c->delivery.self_lock, NULL);
}

void cn_delivery_free(CNotify_center *c) {
    for (cn_queued_post *p; (p = self_pop(c));) free(p);
    cn_map_clear(&c->delivery.last_seq, NULL);
    pthread_mutex_destroy(&c->delivery.lock);
    pthread_mutex_destroy(&c->delivery.self_lock);
}

int cn_in_delivery(CNotify_center *c) { return tl_delivering == c; }

/* ---- sequence numbers of received posts ---- */

/* What one sender may still add to `gaps`, kept in the same map under "sender\n" (no name is
 * empty): every sender starts with CN_GAP_SENDER_MAX, so whatever numbers it sends, on however
 * many names, it adds no more than that (until the map is cleared at its bound, which takes
 * CN_MAP_BOUND new keys). */
static uint64_t take_gap_budget(CNotify_center *c, const char *sender, size_t ls, uint64_t lost) {
    char key[256 + 2];
    if (ls + 2 > sizeof key) return 0;
    memcpy(key, sender, ls);
    key[ls] = '\n';
    key[ls + 1] = '\0';
    void **slot = cn_map_upsert(&c->delivery.last_seq, key);
    if (!slot) return 0;
    uint64_t spent = (uintptr_t)*slot;
    uint64_t left = spent >= CN_GAP_SENDER_MAX ? 0 : CN_GAP_SENDER_MAX - spent;
    uint64_t take = lost < left ? lost : left;
    *slot = (void *)(uintptr_t)(spent + take);
    return take;
}

/* Posts are numbered per (sender, name); a jump means the bus dropped some on the way to us. */
static void track_sequence(CNotify_center *c, const char *sender, const char *name, uint64_t seq) {
    if (!sender) return;
    char key[CNOTIFY_NAME_MAX + 256];
    size_t ls = strlen(sender), ln = strlen(name);
    if (ls + ln + 2 > sizeof key) return;
    memcpy(key, sender, ls); /* "sender\nname", built by hand: this runs for every post */
    key[ls] = '\n';
    memcpy(key + ls + 1, name, ln + 1);
    if (c->delivery.last_seq.count > CN_MAP_BOUND) cn_map_clear(&c->delivery.last_seq, NULL);
    void **slot = cn_map_upsert(&c->delivery.last_seq, key);
    if (!slot) return;
    uint64_t last = (uintptr_t)*slot;
    *slot = (void *)(uintptr_t)seq;
    /* A jump forward by more than one is that many lost, up to a bound per jump and per sender:
     * the number is the sender's word, and a forged 2^64-1, or 1 and 2^20+2 alternating, must
     * not count without end. A jump back is a new numbering (the sender reconnected), not a loss. */
    if (last && seq > last && seq - last > 1) { /* not seq > last + 1: last may be 2^64-1 */
        uint64_t lost = seq - last - 1;
        if (lost > CN_GAP_JUMP_MAX) lost = CN_GAP_JUMP_MAX;
        lost = take_gap_budget(c, sender, ls, lost);
        if (lost) atomic_fetch_add(&c->counters.gaps, lost);
    }
}

void cn_delivery_reset_sequences(CNotify_center *c) { cn_map_clear(&c->delivery.last_seq, NULL); }

/* ---- delivering ---- */

static void deliver_post_locked(CNotify_center *c, const char *name, const char *sender, int has_seq, uint64_t seq) {
    CN_ASSERT_HELD(&c->delivery.lock);
    CNotify_center *outer = tl_delivering;
    __typeof__(tl_post) outer_post = tl_post;
    tl_delivering = c;
    tl_post.sender = sender;
    tl_post.seq = seq;
    tl_post.has_seq = has_seq;
    atomic_fetch_add_explicit(&c->counters.received, 1, memory_order_relaxed);
    if (has_seq) track_sequence(c, sender, name, seq);
    cn_entry *stack[16], **snap;
    size_t n = cn_registry_snapshot(c, name, stack, 16, &snap);
    if (n == 0) atomic_fetch_add_explicit(&c->counters.unmatched, 1, memory_order_relaxed);
    for (size_t i = 0; i < n; i++) {
        cn_entry *e = snap[i];
        int run = cn_registry_begin_run(c, e);
        if (run) {
            if (e->cf_callback) e->cf_callback(c, (void *)e->observer, name, NULL, NULL);
            else e->handler(e->context, name);
            atomic_fetch_add_explicit(&c->counters.delivered, 1, memory_order_relaxed);
        }
        cn_registry_end_run(c, e, run);
    }
    if (snap != stack) free(snap);
    tl_delivering = outer;
    tl_post = outer_post;
}

/* ---- the `self.` queue ---- */

static cn_queued_post *self_pop(CNotify_center *c) {
    pthread_mutex_lock(&c->delivery.self_lock);
    cn_queued_post *p = c->delivery.self_head;
    if (p && !(c->delivery.self_head = p->next)) c->delivery.self_tail = NULL;
    if (p) atomic_fetch_sub_explicit(&c->delivery.self_queued, 1, memory_order_relaxed);
    pthread_mutex_unlock(&c->delivery.self_lock);
    return p;
}

static void deliver_self_queue_locked(CNotify_center *c) {
    for (cn_queued_post *p; (p = self_pop(c));) {
        deliver_post_locked(c, p->name, NULL, 0, 0);
        free(p);
    }
}

/* Delivers queued `self.` posts unless another thread is running callbacks of `c`. Whoever holds
 * delivery.lock calls this again after releasing it, so a post queued while the trylock fails is
 * never stranded. Returns 1 if a callback destroyed the center (it is gone). */
static int self_queue_kick(CNotify_center *c) {
    while (atomic_load_explicit(&c->delivery.self_queued, memory_order_acquire) > 0) {
        if (pthread_mutex_trylock(&c->delivery.lock) != 0) return 0;
        deliver_self_queue_locked(c);
        int destroyed = cn_lifecycle_get(c) == CN_LIFE_DESTROY_DEFERRED;
        pthread_mutex_unlock(&c->delivery.lock);
        if (destroyed) { cn_center_finish_destroy(c); return 1; }
    }
    return 0;
}

uint32_t cn_self_post(CNotify_center *c, const char *name) {
    size_t len = strlen(name) + 1;
    cn_queued_post *p = malloc(sizeof *p + len);
    if (!p) { cn_set_error("out of memory"); return NOTIFY_STATUS_FAILED; }
    p->next = NULL;
    memcpy(p->name, name, len);
    pthread_mutex_lock(&c->delivery.self_lock);
    if (c->delivery.self_tail) c->delivery.self_tail->next = p; else c->delivery.self_head = p;
    c->delivery.self_tail = p;
    atomic_fetch_add_explicit(&c->delivery.self_queued, 1, memory_order_release);
    pthread_mutex_unlock(&c->delivery.self_lock);
    if (cn_in_delivery(c)) return NOTIFY_STATUS_OK; /* delivered when this callback returns */
    pthread_mutex_lock(&c->delivery.lock);
    deliver_self_queue_locked(c);
    int destroyed = cn_lifecycle_get(c) == CN_LIFE_DESTROY_DEFERRED; /* a callback destroyed the center */
    pthread_mutex_unlock(&c->delivery.lock);
    if (destroyed) { cn_center_finish_destroy(c); return NOTIFY_STATUS_OK; }
    self_queue_kick(c);
    return NOTIFY_STATUS_OK;
}

void cn_deliver_post(CNotify_center *c, const char *name, const char *sender, int has_seq, uint64_t seq) {
    pthread_mutex_lock(&c->delivery.lock);
    deliver_post_locked(c, name, sender, has_seq, seq);
    pthread_mutex_unlock(&c->delivery.lock);
    self_queue_kick(c); /* `self.` posts made by these callbacks */
}

uint32_t CNotify_center_current_post(CNotify_center *c, CNotify_post_info *out) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    CN_RETURN_IF_NULL(out, "info pointer");
    if (tl_delivering != c) {
        cn_set_error("no post of this center is being delivered on this thread");
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    out->sender = tl_post.sender;
    out->sequence = tl_post.seq;
    out->has_sequence = tl_post.has_seq;
    pthread_mutex_lock(&c->link.lock);
    out->from_this_center = !tl_post.sender || strcmp(tl_post.sender, c->link.unique_name) == 0;
    pthread_mutex_unlock(&c->link.lock);
    return NOTIFY_STATUS_OK;
}
