/*
 * subscriptions.c: the subscription set. Each key (a name, a namespace, or a distributed name:
 * cn_key_kind) with at least one registration (`self.` keys aside: they never travel) is a subscription the transport must bring, counted by
 * registrations, and marked with the connection generation it was made on. A registration
 * returns only once its subscription is in place, so posts made by others after it returns are
 * delivered; the last registration gone, the subscription goes too.
 *
 * The set is decided and the request sent under subs.lock, so a reconnection (which re-adds
 * every key, cn_subs_resubscribe) cannot slip between deciding and sending: a key is added once
 * per connection however registrations and reconnections interleave. Answers are awaited with
 * no lock held.
 */
#include <stdlib.h>
#include "center.h"

typedef struct cn_subscription {
    size_t refs;                /* registrations of the key */
    uint64_t gen;               /* connection generation that has it; 0: none */
    int in_flight;              /* requested on `gen`, not yet answered: others wait */
} cn_subscription;

void cn_subs_init(cn_subscriptions *s) {
    cn_mutex_init(&s->lock, CN_LOCK_SUBS);
    pthread_cond_init(&s->cond, NULL);
}

void cn_subs_free(cn_subscriptions *s) {
    for (int kind = 0; kind < CN_KEY_KINDS; kind++) cn_map_clear(&s->keys[kind], free);
    cn_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
}

static cn_map *map_of(cn_subscriptions *s, cn_key_kind kind) { return &s->keys[kind]; }

/* Waits (subs.lock held, released while waiting) while another thread's request for `key` on
 * `gen` is unanswered. Returns the subscription, or NULL when the key went meanwhile. */
static cn_subscription *await_in_flight_locked(cn_subscriptions *s, cn_transport *t, const char *key,
                                               cn_key_kind kind, uint64_t gen) {
    CN_ASSERT_HELD(&s->lock);
    cn_subscription *sub;
    while ((sub = cn_map_get(map_of(s, kind), key)) && sub->in_flight && sub->gen == gen &&
           t->ops->generation(t) == gen)
        cn_cond_wait(&s->cond, &s->lock);
    return sub;
}

uint32_t cn_subs_retain(cn_subscriptions *s, cn_transport *t, const char *key, cn_key_kind kind, int may_wait) {
    cn_mutex_lock(&s->lock);
    void **slot = cn_map_upsert(map_of(s, kind), key);
    cn_subscription *sub = slot ? (*slot ? *slot : (*slot = calloc(1, sizeof(cn_subscription)))) : NULL;
    if (!sub) {
        if (slot) cn_map_remove(map_of(s, kind), key);
        cn_mutex_unlock(&s->lock);
        cn_set_error("out of memory");
        return NOTIFY_STATUS_FAILED;
    }
    sub->refs++;
    uint64_t gen = t->ops->generation(t);
    if (gen == 0 || sub->gen == gen) { /* reconnecting (it will be added), or there already */
        /* Another thread is adding it: return only once the transport has it (not on the loop
         * thread, which would be the one to read the answer). */
        if (gen && sub->in_flight && may_wait) await_in_flight_locked(s, t, key, kind, gen);
        cn_mutex_unlock(&s->lock);
        return NOTIFY_STATUS_OK;
    }
    sub->gen = gen;
    sub->in_flight = 1;
    cn_rule_request *request = t->ops->subscribe_begin(t, key, kind, gen);
    cn_mutex_unlock(&s->lock);
    uint32_t st = t->ops->subscribe_finish(t, request, key);
    cn_mutex_lock(&s->lock);
    sub = cn_map_get(map_of(s, kind), key);
    if (sub && sub->gen == gen) {
        sub->in_flight = 0;
        if (st != NOTIFY_STATUS_OK) sub->gen = 0; /* never added: nothing to remove */
    }
    pthread_cond_broadcast(&s->cond);
    cn_mutex_unlock(&s->lock);
    return st;
}

void cn_subs_release(cn_subscriptions *s, cn_transport *t, const char *key, cn_key_kind kind, size_t n) {
    cn_mutex_lock(&s->lock);
    cn_subscription *sub = cn_map_get(map_of(s, kind), key);
    if (sub && (sub->refs -= sub->refs < n ? sub->refs : n) == 0) {
        if (sub->gen) t->ops->unsubscribe(t, key, kind, sub->gen);
        free(cn_map_remove(map_of(s, kind), key));
        pthread_cond_broadcast(&s->cond); /* a waiter on its request: the key is gone */
    }
    cn_mutex_unlock(&s->lock);
}

typedef struct { cn_transport *t; uint64_t gen; cn_key_kind kind; } resubscribing;

static void resubscribe_one(const char *key, void *value, void *arg) {
    resubscribing *r = arg;
    cn_subscription *sub = value;
    if (sub->gen == r->gen) return; /* a registrant added it on this connection already */
    r->t->ops->subscribe_now(r->t, key, r->kind, r->gen);
    sub->gen = r->gen;
    sub->in_flight = 0;
}

void cn_subs_resubscribe(cn_subscriptions *s, cn_transport *t, uint64_t gen) {
    cn_mutex_lock(&s->lock);
    for (int kind = 0; kind < CN_KEY_KINDS; kind++) {
        resubscribing r = { t, gen, (cn_key_kind)kind };
        cn_map_each(map_of(s, (cn_key_kind)kind), resubscribe_one, &r);
    }
    pthread_cond_broadcast(&s->cond); /* registrants waiting on the old connection's requests */
    cn_mutex_unlock(&s->lock);
}
