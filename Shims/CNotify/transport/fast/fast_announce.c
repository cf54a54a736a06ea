/*
 * fast_announce.c: what an observer tells posters on the bus (docs/PROTOCOL.md "Fast path",
 * "Signals"): the buckets and namespaces it observes (Endpoint, broadcast when they change), and
 * its answers to Query. Once the center observes something it listens on its endpoint, the
 * channel's listener at the address a random token names.
 *
 * An answer costs the bus a message queued for the asker, read or not: each asker is answered at
 * most once per CN_FAST_ANSWER_MS (queries meanwhile get that one answer, late), and past
 * CN_FAST_ANSWERS_PER_S answers in a second, or CN_FAST_QUERIES_MAX askers waiting, one broadcast
 * (at most one per CN_FAST_ANSWER_MS) answers everyone. So a Query costs this process a map
 * look-up, whoever sends how many.
 *
 * Loop thread only, but the subscription counts, which subscribers change from any thread under
 * endpoint.lock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include "fast.h"

void cn_announce_init(cn_fast_endpoint *e) {
    cn_mutex_init(&e->lock, CN_LOCK_ENDPOINT);
}

void cn_announce_free(cn_fast *f) {
    cn_fast_endpoint *e = &f->endpoint;
    for (size_t i = 0; i < e->nqueries; i++) free(e->queries[i]);
    free(e->queries);
    cn_map_clear(&e->askers, NULL);
    cn_map_clear(&e->namespaces, NULL);
    cn_fast_file_close(f, &e->listen);
    cn_mutex_destroy(&e->lock);
}

void cn_endpoint_subscribed(cn_fast *f, const char *key, cn_key_kind kind, int delta) {
    cn_fast_endpoint *e = &f->endpoint;
    if (kind == CN_KEY_DISTRIBUTED) return; /* distributed notifications stay on the bus */
    cn_mutex_lock(&e->lock);
    if (kind == CN_KEY_NAMESPACE) {
        void **slot = cn_map_upsert(&e->namespaces, key);
        uintptr_t n = slot ? (uintptr_t)*slot : 0;
        if (slot && delta > 0) *slot = (void *)(n + 1);
        else if (slot && n > 1) *slot = (void *)(n - 1);
        else cn_map_remove(&e->namespaces, key); /* its last one (or out of memory: not announced) */
    } else {
        unsigned *count = &e->counts[cn_fast_bucket(key)];
        if (delta > 0) (*count)++;
        else if (*count > 0) (*count)--;
    }
    atomic_store(&e->announce_due, 1);
    cn_mutex_unlock(&e->lock);
    cn_loop_wake(f->loop);
}

void cn_endpoint_reset_counts(cn_fast *f) {
    cn_fast_endpoint *e = &f->endpoint;
    cn_mutex_lock(&e->lock);
    memset(e->counts, 0, sizeof e->counts);
    cn_map_clear(&e->namespaces, NULL);
    atomic_store(&e->announce_due, 1);
    cn_mutex_unlock(&e->lock);
}

/* What an Endpoint announces, copied out under endpoint.lock (then sent with no lock held). */
typedef struct announcement {
    unsigned char bitmap[CN_FAST_BITMAP_BYTES];
    char names[CN_FAST_NAMESPACES_MAX][256];
    const char *namespaces[CN_FAST_NAMESPACES_MAX];
    size_t n;
} announcement;

static void add_namespace(const char *key, void *value, void *arg) {
    (void)value;
    announcement *a = arg;
    if (a->n < CN_FAST_NAMESPACES_MAX) {
        snprintf(a->names[a->n], sizeof a->names[a->n], "%s", key); /* at most 255 bytes: validated */
        a->namespaces[a->n] = a->names[a->n];
    }
    a->n++;
}

/* The buckets and namespaces under endpoint.lock; returns whether anything is observed. Each
 * namespace is announced by name (a poster sends its posts directly); past CN_FAST_NAMESPACES_MAX
 * of them, every bucket is announced instead. */
static int announcement_locked(cn_fast_endpoint *e, announcement *out) {
    assert(cn_mutex_is_held(&e->lock));
    memset(out->bitmap, 0, CN_FAST_BITMAP_BYTES);
    out->n = 0;
    int any = e->namespaces.count > 0;
    for (unsigned b = 0; b <= CN_BUCKET_MASK; b++)
        if (e->counts[b]) { out->bitmap[b >> 3] |= (unsigned char)(1u << (b & 7)); any = 1; }
    cn_map_each(&e->namespaces, add_namespace, out);
    if (out->n > CN_FAST_NAMESPACES_MAX) {
        memset(out->bitmap, 0xff, CN_FAST_BITMAP_BYTES);
        out->n = 0;
    }
    return any;
}

static int start_listening(cn_fast *f) {
    cn_fast_endpoint *e = &f->endpoint;
    if (cn_fast_token_new(e->token) != 0 || !(e->listen.ch = f->chan->listen(e->token))) return -1;
    if (cn_fast_watch(f, &e->listen, EPOLLIN) != 0) {
        f->chan->close(e->listen.ch);
        e->listen.ch = NULL;
        return -1;
    }
    return 0;
}

void cn_endpoint_announce_soon(cn_fast *f) { atomic_store(&f->endpoint.announce_due, 1); }

/* Room for one more answer sent one by one in this second (CN_FAST_ANSWERS_PER_S). */
static int answer_allowed(cn_fast_endpoint *e, uint64_t now) {
    if (now - e->second_at >= 1000) {
        e->second_at = now;
        e->answers_in_second = 0;
    }
    return e->answers_in_second < CN_FAST_ANSWERS_PER_S;
}

/* What the endpoint reads besides frames, announced with it (PROTOCOL.md "Signals"): rings, when
 * its channel reads them. */
static uint32_t features_of(const cn_fast *f) { return f->chan->reads_rings ? CN_FAST_FEATURE_RING : 0; }

void cn_announce_prepare(cn_fast *f, int *timeout_ms) {
    cn_fast_endpoint *e = &f->endpoint;
    /* Off and not listening: the buckets wait (switching it on announces them). */
    if (!e->listen.ch && !atomic_load(&f->enabled)) return;
    int due = atomic_exchange(&e->announce_due, 0);
    if (!due && !e->nqueries && !e->broadcast_answer) return; /* most rounds: nothing changed, nobody asked */
    announcement a;
    cn_mutex_lock(&e->lock);
    int any = announcement_locked(e, &a);
    cn_mutex_unlock(&e->lock);
    if (!e->listen.ch) {
        if (!any) return;
        if (start_listening(f) != 0) { /* no fast path for this center yet: the bus has it all */
            atomic_store(&e->announce_due, 1); /* tried again at the next round */
            cn_loop_unsettle(f->loop);          /* a prepared one */
            return;
        }
        due = 1;
    }
    if (due && cn_bus_fast_announce(f->bus_impl, e->token, a.bitmap, a.namespaces, a.n, features_of(f), NULL) != NOTIFY_STATUS_OK)
        atomic_store(&e->announce_due, 1); /* once reconnected */
    uint64_t now = cn_now_ms();
    if (due) { /* a broadcast answers everyone who waits */
        e->broadcast_answer = 1;
        e->broadcast_at = 0;
    }
    size_t kept = 0;
    for (size_t i = 0; i < e->nqueries; i++) {
        char *asker = e->queries[i];
        void **slot = cn_map_upsert(&e->askers, asker);
        uint64_t last = slot ? (uint64_t)(uintptr_t)*slot >> 1 : 0;
        if (e->broadcast_answer) {
            if (slot) *slot = (void *)(uintptr_t)(now << 1);
            free(asker);
        } else if (last && now - last < CN_FAST_ANSWER_MS) {
            cn_loop_timeout_until(timeout_ms, last + CN_FAST_ANSWER_MS, now);
            e->queries[kept++] = asker; /* answered again at the end of its interval */
        } else if (!answer_allowed(e, now)) {
            e->broadcast_answer = 1; /* past the second's answers: one broadcast for all */
            if (slot) *slot = (void *)(uintptr_t)(now << 1);
            free(asker);
        } else {
            cn_bus_fast_announce(f->bus_impl, e->token, a.bitmap, a.namespaces, a.n, features_of(f), asker);
            e->answers_in_second++;
            atomic_fetch_add(&f->answers, 1);
            if (slot) *slot = (void *)(uintptr_t)(now << 1);
            free(asker);
        }
    }
    e->nqueries = kept;
    if (e->broadcast_answer) {
        if (due || now - e->broadcast_at >= CN_FAST_ANSWER_MS) {
            if (!due) cn_bus_fast_announce(f->bus_impl, e->token, a.bitmap, a.namespaces, a.n, features_of(f), NULL);
            atomic_fetch_add(&f->answers, 1);
            e->broadcast_at = now;
            e->broadcast_answer = 0;
        } else {
            cn_loop_timeout_until(timeout_ms, e->broadcast_at + CN_FAST_ANSWER_MS, now);
        }
    }
}

void cn_endpoint_query(cn_fast *f, const char *sender) {
    cn_fast_endpoint *e = &f->endpoint;
    /* No endpoint (this center observes nothing): nothing to answer; its first announcement, when
     * it listens, is a broadcast, which answers everyone. */
    if (!e->listen.ch) return;
    if (e->askers.count >= CN_FAST_ASKERS_KEPT) { /* bounded: forgotten, and answered all at once */
        for (size_t i = 0; i < e->nqueries; i++) free(e->queries[i]);
        e->nqueries = 0;
        cn_map_clear(&e->askers, NULL);
        e->broadcast_answer = 1;
    }
    void **slot = cn_map_upsert(&e->askers, sender);
    if (slot && ((uintptr_t)*slot & 1)) { /* it waits for an answer already: that one answers this too */
        atomic_fetch_add(&f->answers_coalesced, 1);
        return;
    }
    if (e->broadcast_answer) {
        atomic_fetch_add(&f->answers_coalesced, 1);
        return;
    }
    if (!slot || e->nqueries >= CN_FAST_QUERIES_MAX) {
        e->broadcast_answer = 1;
        atomic_fetch_add(&f->answers_coalesced, 1);
        return;
    }
    if (e->nqueries == e->capqueries) {
        size_t cap = e->capqueries ? 2 * e->capqueries : 16;
        char **q = realloc(e->queries, cap * sizeof *q);
        if (!q) { e->broadcast_answer = 1; return; }
        e->queries = q;
        e->capqueries = cap;
    }
    char *copy = strdup(sender);
    if (!copy) { e->broadcast_answer = 1; return; }
    e->queries[e->nqueries++] = copy;
    *slot = (void *)((uintptr_t)*slot | 1);
}

void cn_announce_forget(cn_fast *f, const char *unique) {
    cn_fast_endpoint *e = &f->endpoint;
    uintptr_t v = (uintptr_t)cn_map_get(&e->askers, unique);
    if (v && !(v & 1)) cn_map_remove(&e->askers, unique); /* one awaiting its answer stays until then */
}

void cn_announce_disconnected(cn_fast *f) {
    cn_fast_endpoint *e = &f->endpoint;
    for (size_t i = 0; i < e->nqueries; i++) free(e->queries[i]);
    e->nqueries = 0;
    e->broadcast_answer = 0;
    cn_map_clear(&e->askers, NULL);
    atomic_store(&e->announce_due, 1);
}
