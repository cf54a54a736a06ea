/*
 * registry.c: the observer registry of a center. Entries by name and by namespace, the pins
 * that keep an entry alive while a delivery holds it, and removal.
 *
 * Removal rules: an entry marked removed is never called again; a remover on another thread
 * waits while that entry's callback runs; memory and the binding's context are released by
 * whoever drops the last pin (cn_entry.pins).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

void cn_registry_init(CNotify_center *c) {
    pthread_mutex_init(&c->registry.lock, NULL);
    pthread_cond_init(&c->registry.cond, NULL);
}

static void free_entry(cn_entry *e) {
    assert(e->pins == 0);
    if (e->release) e->release(e->context);
    free(e->name);
    free(e);
}

static void free_slot(void *p) {
    cn_name_slot *slot = p;
    free(slot->entries);
    free(slot);
}

void cn_registry_free(CNotify_center *c) {
    for (int ns = 0; ns <= 1; ns++) {
        cn_map *registry = cn_registry_map(c, ns);
        for (size_t b = 0; b < registry->nbuckets; b++)
            for (cn_map_node *node = registry->buckets[b]; node; node = node->next) {
                cn_name_slot *slot = node->value;
                for (size_t i = 0; i < slot->count; i++) free_entry(slot->entries[i]);
            }
        cn_map_clear(registry, free_slot);
    }
    pthread_mutex_destroy(&c->registry.lock);
    pthread_cond_destroy(&c->registry.cond);
}

/* ---- adding ---- */

/* Adds e under its name; *id is read under the lock, as a remove may free e once it is visible. */
static uint32_t add_entry(CNotify_center *c, cn_entry *e, uint64_t *id) {
    cn_map *registry = cn_registry_map(c, e->is_namespace);
    pthread_mutex_lock(&c->registry.lock);
    cn_name_slot *slot = cn_map_get(registry, e->name);
    if (!slot) {
        slot = calloc(1, sizeof *slot);
        if (!slot || cn_map_put(registry, e->name, slot) != 0) {
            free(slot);
            pthread_mutex_unlock(&c->registry.lock);
            cn_set_error("out of memory");
            return NOTIFY_STATUS_FAILED;
        }
    }
    if (slot->count == slot->cap) {
        size_t cap = slot->cap ? slot->cap * 2 : 2;
        cn_entry **n = realloc(slot->entries, cap * sizeof *n);
        if (!n) {
            if (slot->count == 0) free_slot(cn_map_remove(registry, e->name));
            pthread_mutex_unlock(&c->registry.lock);
            cn_set_error("out of memory");
            return NOTIFY_STATUS_FAILED;
        }
        slot->entries = n;
        slot->cap = cap;
    }
    e->id = *id = ++c->registry.next_id;
    slot->entries[slot->count++] = e;
    pthread_mutex_unlock(&c->registry.lock);
    return NOTIFY_STATUS_OK;
}

/* A registration whose rule failed leaves its context with the caller: find the entry by id
 * (it may already be gone) and drop its release before removing it. */
static void withdraw_entry(CNotify_center *c, const char *name, int is_namespace, uint64_t id) {
    pthread_mutex_lock(&c->registry.lock);
    cn_name_slot *slot = cn_map_get(cn_registry_map(c, is_namespace), name);
    for (size_t i = 0; slot && i < slot->count; i++)
        if (slot->entries[i]->id == id) slot->entries[i]->release = NULL;
    pthread_mutex_unlock(&c->registry.lock);
    char saved[CN_RULE_MAX];
    snprintf(saved, sizeof saved, "%s", CNotify_last_error());
    CNotify_center_remove_handler(c, id);
    cn_set_error("%s", saved);
}

static uint32_t register_entry(CNotify_center *c, cn_entry *e, const char *name, uint64_t *out_id) {
    int is_namespace = e->is_namespace;
    int self_only = cn_is_self_key(name, is_namespace); /* delivered in the process: no bus, no rule */
    uint32_t st = cn_fork_check();
    if (st == NOTIFY_STATUS_OK && !self_only) st = cn_center_start(c);
    uint64_t id = 0;
    if (st == NOTIFY_STATUS_OK) st = add_entry(c, e, &id);
    if (st != NOTIFY_STATUS_OK) {
        free(e->name);
        free(e);
        return st;
    }
    if (out_id) *out_id = id;
    if (self_only) return NOTIFY_STATUS_OK;
    st = cn_rules_for_new_name(c, name, is_namespace);
    if (st != NOTIFY_STATUS_OK) withdraw_entry(c, name, is_namespace, id);
    return st;
}

/* The one way in for every registration: exact or namespace, CF-style callback or handler. It
 * makes the entry checks of all four public functions below, which differ only in arguments. */
static uint32_t add_registration(CNotify_center *c, const char *key, int is_namespace, const void *observer,
                                 CNotify_callback callback, CNotify_handler handler, void *context,
                                 CNotify_release release, uint64_t *out_id) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    if (!callback) {
        CN_RETURN_IF_NULL(handler, "handler");
        CN_RETURN_IF_NULL(out_id, "id pointer");
    }
    uint32_t st = is_namespace ? cn_validate_namespace(key) : CNotify_validate_name(key);
    if (st != NOTIFY_STATUS_OK) return st;
    cn_entry *e = calloc(1, sizeof *e);
    if (e && !(e->name = strdup(key))) { free(e); e = NULL; }
    if (!e) { cn_set_error("out of memory"); return NOTIFY_STATUS_FAILED; }
    e->observer = observer;
    e->cf_callback = callback;
    e->handler = handler;
    e->context = context;
    e->release = release;
    e->is_namespace = is_namespace;
    return register_entry(c, e, key, out_id);
}

uint32_t CNotify_center_add_observer(CNotify_center *c, const void *observer, CNotify_callback callback, const char *name) {
    if (!callback) { cn_set_error("callback is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    return add_registration(c, name, 0, observer, callback, NULL, NULL, NULL, NULL);
}

uint32_t CNotify_center_add_handler(CNotify_center *c, const char *name, CNotify_handler handler, void *context,
                                    CNotify_release release, uint64_t *out_id) {
    return add_registration(c, name, 0, NULL, NULL, handler, context, release, out_id);
}

uint32_t CNotify_center_add_namespace_observer(CNotify_center *c, const void *observer, CNotify_callback callback,
                                               const char *ns) {
    if (!callback) { cn_set_error("callback is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    return add_registration(c, ns, 1, observer, callback, NULL, NULL, NULL, NULL);
}

uint32_t CNotify_center_add_namespace_handler(CNotify_center *c, const char *ns, CNotify_handler handler, void *context,
                                              CNotify_release release, uint64_t *out_id) {
    return add_registration(c, ns, 1, NULL, NULL, handler, context, release, out_id);
}

/* ---- removing ---- */

typedef int (*entry_pred)(const cn_entry *e, const void *a, uint64_t b);

/* Marks matching entries of one slot removed; collects those no delivery holds. */
static size_t remove_in_slot_locked(CNotify_center *c, int is_namespace, const char *name, cn_name_slot *slot,
                                    entry_pred pred, const void *a, uint64_t b, cn_entry ***to_free, size_t *nfree) {
    CN_ASSERT_HELD(&c->registry.lock);
    size_t removed = 0, keep = 0;
    for (size_t i = 0; i < slot->count; i++) {
        cn_entry *e = slot->entries[i];
        if (!pred(e, a, b)) { slot->entries[keep++] = e; continue; }
        e->removed = 1;
        removed++;
        if (e->pins == 0) {
            cn_entry **n = realloc(*to_free, (*nfree + 1) * sizeof *n);
            if (n) { *to_free = n; (*to_free)[(*nfree)++] = e; }
        }
    }
    slot->count = keep;
    if (keep == 0) { /* its last observer left */
        if (!cn_is_self_key(name, is_namespace)) cn_rules_for_gone_name_locked(c, slot, name, is_namespace);
        free_slot(cn_map_remove(cn_registry_map(c, is_namespace), name));
    }
    return removed;
}

static size_t remove_where(CNotify_center *c, const char *name, int is_namespace, entry_pred pred, const void *a, uint64_t b) {
    cn_entry **to_free = NULL;
    size_t nfree = 0, removed = 0;
    pthread_mutex_lock(&c->registry.lock);
    if (name) {
        cn_name_slot *slot = cn_map_get(cn_registry_map(c, is_namespace), name);
        if (slot) removed = remove_in_slot_locked(c, is_namespace, name, slot, pred, a, b, &to_free, &nfree);
    } else {
        /* Every name and namespace: collect the keys first, as emptied slots leave the map. */
        for (int ns = 0; ns <= 1; ns++) {
            cn_map *registry = cn_registry_map(c, ns);
            char **keys = malloc((registry->count + 1) * sizeof *keys);
            size_t nk = 0;
            for (size_t i = 0; keys && i < registry->nbuckets; i++)
                for (cn_map_node *node = registry->buckets[i]; node; node = node->next) keys[nk++] = strdup(node->key);
            for (size_t i = 0; i < nk; i++) {
                cn_name_slot *slot = keys[i] ? cn_map_get(registry, keys[i]) : NULL;
                if (slot) removed += remove_in_slot_locked(c, ns, keys[i], slot, pred, a, b, &to_free, &nfree);
                free(keys[i]);
            }
            free(keys);
        }
    }
    /* Once we return, the callback must not run again: wait out a running invocation. */
    while (c->registry.running && c->registry.running->removed && !cn_in_delivery(c))
        pthread_cond_wait(&c->registry.cond, &c->registry.lock);
    pthread_mutex_unlock(&c->registry.lock);
    for (size_t i = 0; i < nfree; i++) free_entry(to_free[i]);
    free(to_free);
    return removed;
}

static int match_observer(const cn_entry *e, const void *observer, uint64_t unused) {
    (void)unused;
    return e->cf_callback && e->observer == observer;
}

static int match_id(const cn_entry *e, const void *unused, uint64_t id) {
    (void)unused;
    return e->id == id;
}

uint32_t CNotify_center_remove_observer(CNotify_center *c, const void *observer, const char *name) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    CN_RETURN_IF_FORKED(); /* nothing of the parent's is ours to change */
    remove_where(c, name, 0, match_observer, observer, 0);
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_center_remove_namespace_observer(CNotify_center *c, const void *observer, const char *ns) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    uint32_t st = cn_validate_namespace(ns);
    if (st != NOTIFY_STATUS_OK) return st;
    CN_RETURN_IF_FORKED();
    remove_where(c, ns, 1, match_observer, observer, 0);
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_center_remove_every_observer(CNotify_center *c, const void *observer) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    CN_RETURN_IF_FORKED();
    remove_where(c, NULL, 0, match_observer, observer, 0);
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_center_remove_handler(CNotify_center *c, uint64_t id) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    CN_RETURN_IF_FORKED();
    if (remove_where(c, NULL, 0, match_id, NULL, id) == 0) {
        cn_set_error("no registration with id %llu", (unsigned long long)id);
        return NOTIFY_STATUS_INVALID_TOKEN;
    }
    return NOTIFY_STATUS_OK;
}

/* ---- pins: what a delivery holds ---- */

/* Appends (and pins) a slot's entries to a snapshot, growing it off the stack when it must.
 * NULL when out of memory (the entries pinned so far are unpinned). */
static cn_entry **snapshot_add_locked(CNotify_center *c, cn_entry **snap, cn_entry **stack, size_t *n, size_t *cap,
                                      cn_name_slot *slot) {
    CN_ASSERT_HELD(&c->registry.lock);
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

size_t cn_registry_snapshot(CNotify_center *c, const char *name, cn_entry **stack, size_t stack_len, cn_entry ***out) {
    cn_entry **snap = stack;
    size_t n = 0, cap = stack_len;
    pthread_mutex_lock(&c->registry.lock);
    cn_name_slot *slot = cn_map_get(&c->registry.names, name);
    if (slot && slot->count) snap = snapshot_add_locked(c, snap, stack, &n, &cap, slot);
    /* Namespace observers: of each prefix of the name that ends at a dot, and of the whole name
     * (`a.b.c` is under `a`, `a.b` and `a.b.c`). Nothing to look at when nobody observes one. */
    if (snap && c->registry.namespaces.count) {
        char prefix[CNOTIFY_NAME_MAX + 1];
        size_t len = strlen(name);
        for (size_t i = 1; snap && i <= len && len <= CNOTIFY_NAME_MAX; i++) {
            if (name[i] != '.' && name[i] != '\0') continue;
            memcpy(prefix, name, i);
            prefix[i] = '\0';
            cn_name_slot *ns = cn_map_get(&c->registry.namespaces, prefix);
            if (ns && ns->count) snap = snapshot_add_locked(c, snap, stack, &n, &cap, ns);
        }
    }
    pthread_mutex_unlock(&c->registry.lock);
    *out = snap ? snap : stack;
    return snap ? n : 0;
}

int cn_registry_begin_run(CNotify_center *c, cn_entry *e) {
    pthread_mutex_lock(&c->registry.lock);
    assert(e->pins > 0);
    int run = !e->removed;
    if (run) c->registry.running = e;
    pthread_mutex_unlock(&c->registry.lock);
    return run;
}

void cn_registry_end_run(CNotify_center *c, cn_entry *e, int ran) {
    pthread_mutex_lock(&c->registry.lock);
    if (ran) c->registry.running = NULL;
    assert(e->pins > 0);
    int last = --e->pins == 0 && e->removed;
    pthread_cond_broadcast(&c->registry.cond);
    pthread_mutex_unlock(&c->registry.lock);
    if (last) free_entry(e);
}
