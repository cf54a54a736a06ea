/*
 * registry.c: the observer registrations of a center. Entries by name, by namespace and by id,
 * the pins that keep an entry alive while a delivery holds it, and removal.
 *
 * Removal rules: an entry marked removed is never called again; a remover on another thread
 * waits while that entry's callback runs; memory and the binding's context are released by
 * whoever drops the last pin (cn_entry.pins).
 *
 * The last snapshot's name and entries are kept (a few, under the lock): the next post of that
 * name is a copy of them. Any add or remove empties what is kept, so it never holds an entry
 * that a look-up would not find.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "center.h"

static cn_map *map_of(cn_registry *r, int is_namespace) { return is_namespace ? &r->namespaces : &r->names; }

void cn_registry_init(cn_registry *r) {
    cn_mutex_init(&r->lock, CN_LOCK_REGISTRY);
    pthread_cond_init(&r->cond, NULL);
}

static void free_entry(cn_entry *e) {
    assert(e->pins == 0);
    if (e->release) e->release(e->context);
    free(e->name);
    free(e->object);
    free(e);
}

/* A slot whose entries are freed or moved: its array, unless inline, and itself. */
static void free_slot_only(cn_name_slot *slot) {
    if (slot->entries != slot->first) free(slot->entries);
    free(slot);
}

static void free_slot(void *p) {
    cn_name_slot *slot = p;
    for (size_t i = 0; i < slot->count; i++) free_entry(slot->entries[i]);
    free_slot_only(slot);
}

void cn_registry_free(cn_registry *r) {
    cn_map_clear(&r->ids, NULL);
    cn_map_clear(&r->names, free_slot);
    cn_map_clear(&r->namespaces, free_slot);
    cn_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
}

/* ---- adding ---- */

static cn_name_slot *slot_with_room_locked(cn_registry *r, cn_map *m, const char *key) {
    CN_ASSERT_HELD(&r->lock);
    cn_name_slot *slot = cn_map_get(m, key);
    if (!slot) {
        slot = calloc(1, sizeof *slot);
        if (!slot || cn_map_put(m, key, slot) != 0) { free(slot); return NULL; }
        slot->entries = slot->first;
        slot->cap = CN_SLOT_INLINE;
    }
    if (slot->count == slot->cap) {
        size_t cap = slot->cap * 2;
        int inline_now = slot->entries == slot->first;
        cn_entry **n = inline_now ? malloc(cap * sizeof *n) : realloc(slot->entries, cap * sizeof *n);
        if (n && inline_now) memcpy(n, slot->first, sizeof slot->first);
        if (!n) {
            if (slot->count == 0) free_slot(cn_map_remove(m, key));
            return NULL;
        }
        slot->entries = n;
        slot->cap = cap;
    }
    return slot;
}

/* What the last snapshot kept no longer holds: its entries or names changed. */
static void forget_kept_locked(cn_registry *r) {
    CN_ASSERT_HELD(&r->lock);
    r->has_kept = 0;
    r->nkept = 0;
}

uint32_t cn_registry_add(cn_registry *r, cn_entry *e, uint64_t *id) {
    char idkey[CN_ID_KEY_LEN];
    cn_mutex_lock(&r->lock);
    forget_kept_locked(r);
    cn_name_slot *slot = slot_with_room_locked(r, map_of(r, e->is_namespace), e->name);
    if (slot) {
        e->id = r->next_id + 1;
        if (cn_map_put(&r->ids, cn_id_key(e->id, idkey), e) != 0) slot = NULL;
    }
    if (!slot) {
        cn_mutex_unlock(&r->lock);
        free(e->name);
        free(e->object);
        free(e);
        cn_set_error("out of memory");
        return NOTIFY_STATUS_FAILED;
    }
    /* *id is read under the lock, as a remove may free e once it is visible. */
    *id = ++r->next_id;
    slot->entries[slot->count++] = e;
    cn_mutex_unlock(&r->lock);
    return NOTIFY_STATUS_OK;
}

void cn_registry_disown(cn_registry *r, uint64_t id) {
    char idkey[CN_ID_KEY_LEN];
    cn_mutex_lock(&r->lock);
    cn_entry *e = cn_map_get(&r->ids, cn_id_key(id, idkey));
    if (e) e->release = NULL;
    cn_mutex_unlock(&r->lock);
}

/* ---- removing ---- */

typedef struct removing {
    cn_registry *r;
    cn_entry_pred pred;
    const void *a;
    uint64_t b;
    cn_entry **to_free;
    size_t nfree;
    cn_removal *out;
} removing;

static void note_key(cn_removal *rm, const char *key, int is_namespace, size_t n) {
    __typeof__(rm->keys) grown = realloc(rm->keys, (rm->nkeys + 1) * sizeof *grown);
    char *copy = strdup(key);
    if (!grown || !copy) { free(copy); if (grown) rm->keys = grown; return; } /* its subscription stays: harmless */
    rm->keys = grown;
    rm->keys[rm->nkeys].key = copy;
    rm->keys[rm->nkeys].is_namespace = is_namespace;
    rm->keys[rm->nkeys++].n = n;
}

/* Marks matching entries of one slot removed; collects those no delivery holds. */
static void remove_in_slot_locked(removing *w, int is_namespace, const char *name, cn_name_slot *slot) {
    CN_ASSERT_HELD(&w->r->lock);
    size_t removed = 0, keep = 0;
    char idkey[CN_ID_KEY_LEN];
    for (size_t i = 0; i < slot->count; i++) {
        cn_entry *e = slot->entries[i];
        if (!w->pred(e, w->a, w->b)) { slot->entries[keep++] = e; continue; }
        e->removed = 1;
        removed++;
        cn_map_remove(&w->r->ids, cn_id_key(e->id, idkey));
        if (e->pins == 0) {
            cn_entry **n = realloc(w->to_free, (w->nfree + 1) * sizeof *n);
            if (n) { w->to_free = n; w->to_free[w->nfree++] = e; }
        }
    }
    slot->count = keep;
    if (removed) note_key(w->out, name, is_namespace, removed);
    w->out->removed += removed;
    if (keep == 0) { /* its last observer left */
        free_slot_only(cn_map_remove(map_of(w->r, is_namespace), name));
    }
}

/* Every name and namespace: the keys first, as emptied slots leave the map. */
static void remove_everywhere_locked(removing *w) {
    for (int ns = 0; ns <= 1; ns++) {
        cn_map *m = map_of(w->r, ns);
        char **keys = malloc((m->count + 1) * sizeof *keys);
        size_t nk = 0;
        for (size_t i = 0; keys && i < m->nbuckets; i++)
            for (cn_map_node *node = m->buckets[i]; node; node = node->next) keys[nk++] = strdup(node->key);
        for (size_t i = 0; i < nk; i++) {
            cn_name_slot *slot = keys[i] ? cn_map_get(m, keys[i]) : NULL;
            if (slot) remove_in_slot_locked(w, ns, keys[i], slot);
            free(keys[i]);
        }
        free(keys);
    }
}

void cn_registry_remove(cn_registry *r, const char *name, int is_namespace, uint64_t id, cn_entry_pred pred,
                        const void *a, uint64_t b, int in_delivery, cn_removal *out) {
    removing w = { r, pred, a, b, NULL, 0, out };
    *out = (cn_removal){ NULL, 0, 0 };
    char idkey[CN_ID_KEY_LEN];
    cn_mutex_lock(&r->lock);
    forget_kept_locked(r);
    if (id) { /* one entry: found by its id, not by copying every key */
        cn_entry *e = cn_map_get(&r->ids, cn_id_key(id, idkey));
        if (e) { name = e->name; is_namespace = e->is_namespace; }
        else name = NULL;
        if (!e) goto done;
    }
    if (name) {
        cn_name_slot *slot = cn_map_get(map_of(r, is_namespace), name);
        if (slot) remove_in_slot_locked(&w, is_namespace, name, slot);
    } else {
        remove_everywhere_locked(&w);
    }
    /* Once we return, the callback must not run again: wait out a running invocation. */
    while (r->running && r->running->removed && !in_delivery) {
        r->waiting++;
        cn_cond_wait(&r->cond, &r->lock);
        r->waiting--;
    }
done:
    cn_mutex_unlock(&r->lock);
    for (size_t i = 0; i < w.nfree; i++) free_entry(w.to_free[i]);
    free(w.to_free);
}

void cn_removal_free(cn_removal *rm) {
    for (size_t i = 0; i < rm->nkeys; i++) free(rm->keys[i].key);
    free(rm->keys);
}

/* ---- pins: what a delivery holds ---- */

/* Appends (and pins) a slot's entries to a snapshot, growing it off the stack when it must.
 * NULL when out of memory (the entries pinned so far are unpinned). */
static cn_entry **snapshot_add_locked(cn_registry *r, cn_entry **snap, cn_entry **stack, size_t *n, size_t *cap,
                                      cn_name_slot *slot) {
    CN_ASSERT_HELD(&r->lock);
    if (*n + slot->count > *cap) {
        size_t grown = (*n + slot->count) * 2;
        cn_entry **bigger = malloc(grown * sizeof *bigger);
        if (!bigger) {
            for (size_t i = 0; i < *n; i++) snap[i]->pins--;
            if (snap != stack) free(snap);
            return NULL;
        }
        memcpy(bigger, snap, *n * sizeof *bigger);
        if (snap != stack) free(snap);
        snap = bigger;
        *cap = grown;
    }
    for (size_t i = 0; i < slot->count; i++) { snap[*n] = slot->entries[i]; snap[*n]->pins++; (*n)++; }
    return snap;
}

/* The kept entries of `name`, pinned into `stack`: how many, or -1 when none are kept for it. */
CN_HOT static long kept_locked(cn_registry *r, const char *name, cn_entry **stack, size_t stack_len) {
    CN_ASSERT_HELD(&r->lock);
    if (!r->has_kept || r->nkept > stack_len || strcmp(r->kept_name, name) != 0) return -1;
    for (size_t i = 0; i < r->nkept; i++) {
        stack[i] = r->kept[i];
        stack[i]->pins++;
    }
    return (long)r->nkept;
}

/* A snapshot of `name` of `n` entries, kept for the next one when it is small. */
static void keep_locked(cn_registry *r, const char *name, cn_entry *const *snap, size_t n) {
    CN_ASSERT_HELD(&r->lock);
    size_t len = strlen(name);
    if (n > CN_REGISTRY_KEPT || len >= sizeof r->kept_name) return;
    memcpy(r->kept_name, name, len + 1);
    memcpy(r->kept, snap, n * sizeof *snap);
    r->nkept = n;
    r->has_kept = 1;
}

CN_HOT size_t cn_registry_snapshot(cn_registry *r, const char *name, cn_entry **stack, size_t stack_len, cn_entry ***out) {
    cn_entry **snap = stack;
    size_t n = 0, cap = stack_len;
    cn_mutex_lock(&r->lock);
    long kept = kept_locked(r, name, stack, stack_len);
    if (kept >= 0) {
        cn_mutex_unlock(&r->lock);
        *out = stack;
        return (size_t)kept;
    }
    cn_name_slot *slot = cn_map_get(&r->names, name);
    if (slot && slot->count) snap = snapshot_add_locked(r, snap, stack, &n, &cap, slot);
    /* Namespace observers: of each prefix of the name that ends at a dot, and of the whole name
     * (`a.b.c` is under `a`, `a.b` and `a.b.c`). Nothing to look at when nobody observes one. */
    if (snap && r->namespaces.count) {
        char prefix[CNOTIFY_NAME_MAX + 1];
        size_t len = strlen(name);
        for (size_t i = 1; snap && i <= len && len <= CNOTIFY_NAME_MAX; i++) {
            if (name[i] != '.' && name[i] != '\0') continue;
            memcpy(prefix, name, i);
            prefix[i] = '\0';
            cn_name_slot *ns = cn_map_get(&r->namespaces, prefix);
            if (ns && ns->count) snap = snapshot_add_locked(r, snap, stack, &n, &cap, ns);
        }
    }
    if (snap) keep_locked(r, name, snap, n);
    cn_mutex_unlock(&r->lock);
    *out = snap ? snap : stack;
    return snap ? n : 0;
}

CN_HOT int cn_registry_begin_run(cn_registry *r, cn_entry *e) {
    cn_mutex_lock(&r->lock);
    assert(e->pins > 0);
    int run = !e->removed;
    if (run) r->running = e;
    cn_mutex_unlock(&r->lock);
    return run;
}

CN_HOT void cn_registry_end_run(cn_registry *r, cn_entry *e, int ran) {
    cn_mutex_lock(&r->lock);
    if (ran) r->running = NULL;
    assert(e->pins > 0);
    int last = --e->pins == 0 && e->removed;
    if (r->waiting) pthread_cond_broadcast(&r->cond); /* a remover waits for this callback to end */
    cn_mutex_unlock(&r->lock);
    if (last) free_entry(e);
}
