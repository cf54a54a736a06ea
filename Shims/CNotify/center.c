/*
 * The center: observer registry, dispatch of received posts to callbacks, and posting.
 * Callbacks run on the I/O thread (io_loop.c). Removal rules: an entry marked removed is never
 * called again; a remover on another thread waits while that entry's callback runs; memory and
 * the binding's context are released by whoever drops the last pin (see cn_entry.pins).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"

/* ---- lifetime ---- */

static pthread_mutex_t centers_lock = PTHREAD_MUTEX_INITIALIZER;
static CNotify_center **centers;
static size_t ncenters;

static void flush_all_at_exit(void) {
    if (cn_is_forked_child()) return; /* the connections are the parent's */
    pthread_mutex_lock(&centers_lock);
    for (size_t i = 0; i < ncenters; i++) CNotify_center_flush(centers[i], 2000);
    pthread_mutex_unlock(&centers_lock);
}

static CNotify_center *center_alloc(const char *bus) {
    cn_fork_guard_install();
    CNotify_center *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->bus_spec = bus ? strdup(bus) : NULL;
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->wake_fd < 0 || (bus && !c->bus_spec)) {
        if (c->wake_fd >= 0) close(c->wake_fd);
        free(c->bus_spec);
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->start_lock, NULL);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    pthread_mutex_init(&c->watch_lock, NULL);
    /* Writer preference: a stream of posts must not starve the I/O thread's reads. */
    pthread_rwlockattr_t gate;
    pthread_rwlockattr_init(&gate);
    pthread_rwlockattr_setkind_np(&gate, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&c->io_gate, &gate);
    pthread_rwlockattr_destroy(&gate);
    pthread_mutex_init(&c->reg_lock, NULL);
    pthread_cond_init(&c->reg_cond, NULL);
    pthread_mutex_init(&c->dispatch_lock, NULL);
    pthread_mutex_init(&c->local_lock, NULL);
    static int registered_atexit;
    pthread_mutex_lock(&centers_lock);
    CNotify_center **n = realloc(centers, (ncenters + 1) * sizeof *n);
    if (n) { centers = n; centers[ncenters++] = c; }
    if (!registered_atexit) { registered_atexit = 1; atexit(flush_all_at_exit); }
    pthread_mutex_unlock(&centers_lock);
    return c;
}

static CNotify_center *default_center;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void make_default(void) {
    dbus_threads_init_default();
    default_center = center_alloc(NULL);
}

CNotify_center *CNotify_center_get_darwin_notify_center(void) {
    pthread_once(&default_once, make_default);
    return default_center;
}

CNotify_center *CNotify_center_create(const char *bus, uint32_t *out_status) {
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
        cn_set_error("out of memory");
        st = NOTIFY_STATUS_FAILED;
    }
    if (out_status) *out_status = st;
    return NULL;
}

static void free_entry(cn_entry *e) {
    if (e->release) e->release(e->context);
    free(e->name);
    free(e);
}

static void free_slot(void *p) {
    cn_name_slot *slot = p;
    free(slot->entries);
    free(slot);
}

void CNotify_center_destroy(CNotify_center *c) {
    if (!c || c == default_center) return;
    pthread_mutex_lock(&centers_lock);
    for (size_t i = 0; i < ncenters; i++)
        if (centers[i] == c) { centers[i] = centers[--ncenters]; break; }
    pthread_mutex_unlock(&centers_lock);
    /* Tokens die with their center (darwin_notify.h): notify_check on one now answers
     * INVALID_TOKEN instead of reading freed memory. */
    cn_tokens_cancel_for_center(c);
    /* From one of its own callbacks (a binding releasing its last reference there): on the I/O
     * thread, that thread frees the center when it leaves its loop; on a thread delivering
     * `self.` posts, that thread finishes the destroy once its delivery is over (local.c).
     * Otherwise it has ended here. */
    if (cn_in_dispatch(c) && !cn_on_io_thread(c)) {
        c->destroy_pending = 1;
        return;
    }
    if (cn_io_stop(c)) cn_center_free(c);
}

void cn_center_finish_destroy(CNotify_center *c) {
    if (cn_io_stop(c)) cn_center_free(c);
}

void cn_center_free(CNotify_center *c) {
    /* The I/O thread has ended or is ending: nothing is pinned or running any more. */
    for (int ns = 0; ns <= 1; ns++) {
        cn_map *registry = cn_registry(c, ns);
        for (size_t b = 0; b < registry->nbuckets; b++)
            for (cn_map_node *node = registry->buckets[b]; node; node = node->next) {
                cn_name_slot *slot = node->value;
                for (size_t i = 0; i < slot->count; i++) free_entry(slot->entries[i]);
            }
        cn_map_clear(registry, free_slot);
    }
    cn_map_clear(&c->last_seq, NULL);
    cn_map_clear(&c->post_counts, NULL);
    cn_local_free(c);
    cn_map_clear(&c->self_states, NULL);
    free(c->state_dir);
    cn_map_clear(&c->sender_uids, NULL);
    pthread_mutex_destroy(&c->dispatch_lock);
    pthread_mutex_destroy(&c->local_lock);
    close(c->wake_fd);
    free(c->watches);
    free(c->timeouts);
    free(c->timeout_deadline);
    free(c->bus_spec);
    free(c->address);
    pthread_rwlock_destroy(&c->io_gate);
    pthread_mutex_destroy(&c->watch_lock);
    pthread_mutex_destroy(&c->reg_lock);
    pthread_cond_destroy(&c->reg_cond);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->start_lock);
    free(c);
}

const char *CNotify_center_bus_address(CNotify_center *c) {
    return (c && c->address) ? c->address : "";
}

void CNotify_center_get_stats(CNotify_center *c, CNotify_stats *out) {
    if (!c || !out) return;
    out->received = atomic_load(&c->received);
    out->delivered = atomic_load(&c->delivered);
    out->gaps = atomic_load(&c->gaps);
    out->reconnects = atomic_load(&c->reconnects);
    out->rejected = atomic_load(&c->rejected);
}

/* ---- registry ---- */

/* Adds e under its name; *id is read under the lock, as a remove may free e once it is visible. */
static uint32_t add_entry(CNotify_center *c, cn_entry *e, uint64_t *id) {
    cn_map *registry = cn_registry(c, e->is_namespace);
    pthread_mutex_lock(&c->reg_lock);
    cn_name_slot *slot = cn_map_get(registry, e->name);
    if (!slot) {
        slot = calloc(1, sizeof *slot);
        if (!slot || cn_map_put(registry, e->name, slot) != 0) {
            free(slot);
            pthread_mutex_unlock(&c->reg_lock);
            cn_set_error("out of memory");
            return NOTIFY_STATUS_FAILED;
        }
    }
    if (slot->count == slot->cap) {
        size_t cap = slot->cap ? slot->cap * 2 : 2;
        cn_entry **n = realloc(slot->entries, cap * sizeof *n);
        if (!n) {
            if (slot->count == 0) free_slot(cn_map_remove(registry, e->name));
            pthread_mutex_unlock(&c->reg_lock);
            cn_set_error("out of memory");
            return NOTIFY_STATUS_FAILED;
        }
        slot->entries = n;
        slot->cap = cap;
    }
    e->id = *id = ++c->next_id;
    slot->entries[slot->count++] = e;
    pthread_mutex_unlock(&c->reg_lock);
    return NOTIFY_STATUS_OK;
}

/* A registration whose rule failed leaves its context with the caller: find the entry by id
 * (it may already be gone) and drop its release before removing it. */
static void withdraw_entry(CNotify_center *c, const char *name, int is_namespace, uint64_t id) {
    pthread_mutex_lock(&c->reg_lock);
    cn_name_slot *slot = cn_map_get(cn_registry(c, is_namespace), name);
    for (size_t i = 0; slot && i < slot->count; i++)
        if (slot->entries[i]->id == id) slot->entries[i]->release = NULL;
    pthread_mutex_unlock(&c->reg_lock);
    char saved[CN_RULE_MAX];
    snprintf(saved, sizeof saved, "%s", CNotify_last_error());
    CNotify_center_remove_handler(c, id);
    cn_set_error("%s", saved);
}

/* A `self.` name or namespace: delivered in the process only, so it needs no bus and no rule. */
static int is_local_key(const char *key, int is_namespace) {
    return is_namespace ? cn_is_self_namespace(key) : cn_is_self_name(key);
}

static uint32_t register_entry(CNotify_center *c, cn_entry *e, const char *name, uint64_t *out_id) {
    int is_namespace = e->is_namespace;
    int local = is_local_key(name, is_namespace);
    uint32_t st = cn_fork_check();
    if (st == NOTIFY_STATUS_OK && !local) st = cn_center_start(c);
    uint64_t id = 0;
    if (st == NOTIFY_STATUS_OK) st = add_entry(c, e, &id);
    if (st != NOTIFY_STATUS_OK) {
        free(e->name);
        free(e);
        return st;
    }
    if (out_id) *out_id = id;
    if (local) return NOTIFY_STATUS_OK;
    st = cn_rules_for_new_name(c, name, is_namespace);
    if (st != NOTIFY_STATUS_OK) withdraw_entry(c, name, is_namespace, id);
    return st;
}

typedef int (*entry_pred)(const cn_entry *e, const void *a, uint64_t b);

/* Marks matching entries of one slot removed; frees those no dispatch holds. Lock held. */
static size_t remove_in_slot(CNotify_center *c, int is_namespace, const char *name, cn_name_slot *slot, entry_pred pred,
                             const void *a, uint64_t b, cn_entry ***to_free, size_t *nfree) {
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
        if (!is_local_key(name, is_namespace)) cn_rules_for_gone_name(c, slot, name, is_namespace);
        free_slot(cn_map_remove(cn_registry(c, is_namespace), name));
    }
    return removed;
}

static uint32_t remove_where(CNotify_center *c, const char *name, int is_namespace, entry_pred pred, const void *a, uint64_t b) {
    if (cn_is_forked_child()) return 0; /* nothing of the parent's is ours to change */
    cn_entry **to_free = NULL;
    size_t nfree = 0, removed = 0;
    pthread_mutex_lock(&c->reg_lock);
    if (name) {
        cn_name_slot *slot = cn_map_get(cn_registry(c, is_namespace), name);
        if (slot) removed = remove_in_slot(c, is_namespace, name, slot, pred, a, b, &to_free, &nfree);
    } else {
        /* Every name and namespace: collect the keys first, as emptied slots leave the map. */
        for (int ns = 0; ns <= 1; ns++) {
            cn_map *registry = cn_registry(c, ns);
            char **keys = malloc((registry->count + 1) * sizeof *keys);
            size_t nk = 0;
            for (size_t i = 0; keys && i < registry->nbuckets; i++)
                for (cn_map_node *node = registry->buckets[i]; node; node = node->next) keys[nk++] = strdup(node->key);
            for (size_t i = 0; i < nk; i++) {
                cn_name_slot *slot = keys[i] ? cn_map_get(registry, keys[i]) : NULL;
                if (slot) removed += remove_in_slot(c, ns, keys[i], slot, pred, a, b, &to_free, &nfree);
                free(keys[i]);
            }
            free(keys);
        }
    }
    /* Once we return, the callback must not run again: wait out a running invocation. */
    while (c->running && c->running->removed && !cn_in_dispatch(c)) pthread_cond_wait(&c->reg_cond, &c->reg_lock);
    pthread_mutex_unlock(&c->reg_lock);
    for (size_t i = 0; i < nfree; i++) free_entry(to_free[i]);
    free(to_free);
    return removed;
}

/* ---- dispatch (I/O thread) ---- */

/* Posts are numbered per (sender, name); a jump means the bus dropped some on the way to us. */
static void track_sequence(CNotify_center *c, const char *sender, const char *name, uint64_t seq) {
    if (!sender) return;
    char key[CNOTIFY_NAME_MAX + 256];
    size_t ls = strlen(sender), ln = strlen(name);
    if (ls + ln + 2 > sizeof key) return;
    memcpy(key, sender, ls); /* "sender\nname", built by hand: this runs for every post */
    key[ls] = '\n';
    memcpy(key + ls + 1, name, ln + 1);
    if (c->last_seq.count > 65536) cn_map_clear(&c->last_seq, NULL); /* bounded memory */
    void **slot = cn_map_upsert(&c->last_seq, key);
    if (!slot) return;
    uint64_t last = (uintptr_t)*slot;
    /* A jump forward by more than one is that many lost, up to a bound: the number is the
     * sender's word, and a forged 2^64-1 must not count as 2^64 losses. A jump back is a new
     * numbering (the sender reconnected), not a loss. */
    if (last && seq > last && seq - last > 1) { /* not seq > last + 1: last may be 2^64-1 */
        uint64_t lost = seq - last - 1;
        atomic_fetch_add(&c->gaps, lost > CN_GAP_JUMP_MAX ? CN_GAP_JUMP_MAX : lost);
    }
    *slot = (void *)(uintptr_t)seq;
}

static __thread CNotify_center *tl_dispatching; /* the center whose callbacks this thread runs */
/* What CNotify_center_current_post reports: the post tl_dispatching is delivering. */
static __thread struct { const char *sender; uint64_t seq; int has_seq; } tl_post;

/* Appends (and pins) a slot's entries to a dispatch snapshot, growing it off the stack when it
 * must; reg_lock held. NULL when out of memory (the entries pinned so far are unpinned). */
static cn_entry **snapshot_add_locked(cn_entry **snap, cn_entry **stack, size_t *n, size_t *cap, cn_name_slot *slot) {
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

int cn_in_dispatch(CNotify_center *c) { return tl_dispatching == c; }

void cn_dispatch_post(CNotify_center *c, const char *name, const char *sender, int has_seq, uint64_t seq) {
    pthread_mutex_lock(&c->dispatch_lock);
    cn_dispatch_post_locked(c, name, sender, has_seq, seq);
    pthread_mutex_unlock(&c->dispatch_lock);
    cn_local_kick(c); /* `self.` posts made by these callbacks */
}

void cn_dispatch_post_locked(CNotify_center *c, const char *name, const char *sender, int has_seq, uint64_t seq) {
    CNotify_center *outer = tl_dispatching;
    __typeof__(tl_post) outer_post = tl_post;
    tl_dispatching = c;
    tl_post.sender = sender;
    tl_post.seq = seq;
    tl_post.has_seq = has_seq;
    atomic_fetch_add_explicit(&c->received, 1, memory_order_relaxed);
    if (has_seq) track_sequence(c, sender, name, seq);
    cn_entry *stack[16], **snap = stack;
    size_t n = 0, cap = 16;
    pthread_mutex_lock(&c->reg_lock);
    cn_name_slot *slot = cn_map_get(&c->names, name);
    if (slot && slot->count) snap = snapshot_add_locked(snap, stack, &n, &cap, slot);
    /* Namespace observers: of each prefix of the name that ends at a dot, and of the whole name
     * (`a.b.c` is under `a`, `a.b` and `a.b.c`). Nothing to look at when nobody observes one. */
    if (snap && c->namespaces.count) {
        char prefix[CNOTIFY_NAME_MAX + 1];
        size_t len = strlen(name);
        for (size_t i = 1; snap && i <= len && len <= CNOTIFY_NAME_MAX; i++) {
            if (name[i] != '.' && name[i] != '\0') continue;
            memcpy(prefix, name, i);
            prefix[i] = '\0';
            cn_name_slot *ns = cn_map_get(&c->namespaces, prefix);
            if (ns && ns->count) snap = snapshot_add_locked(snap, stack, &n, &cap, ns);
        }
    }
    if (!snap) n = 0;
    pthread_mutex_unlock(&c->reg_lock);
    for (size_t i = 0; i < n; i++) {
        cn_entry *e = snap[i];
        pthread_mutex_lock(&c->reg_lock);
        int run = !e->removed;
        if (run) c->running = e;
        pthread_mutex_unlock(&c->reg_lock);
        if (run) {
            if (e->cf_callback) e->cf_callback(c, (void *)e->observer, name, NULL, NULL);
            else e->handler(e->context, name);
            atomic_fetch_add_explicit(&c->delivered, 1, memory_order_relaxed);
        }
        pthread_mutex_lock(&c->reg_lock);
        c->running = NULL;
        int last = --e->pins == 0 && e->removed;
        pthread_cond_broadcast(&c->reg_cond);
        pthread_mutex_unlock(&c->reg_lock);
        if (last) free_entry(e);
    }
    if (snap && snap != stack) free(snap);
    tl_dispatching = outer;
    tl_post = outer_post;
}

uint32_t CNotify_center_current_post(CNotify_center *c, CNotify_post_info *out) {
    cn_clear_error();
    if (!c || !out) { cn_set_error("center or info pointer is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    if (tl_dispatching != c) {
        cn_set_error("no post of this center is being delivered on this thread");
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    out->sender = tl_post.sender;
    out->sequence = tl_post.seq;
    out->has_sequence = tl_post.has_seq;
    pthread_mutex_lock(&c->lock);
    out->from_this_center = !tl_post.sender || strcmp(tl_post.sender, c->unique_name) == 0;
    pthread_mutex_unlock(&c->lock);
    return NOTIFY_STATUS_OK;
}

/* ---- public API ---- */

static cn_entry *new_entry(const char *name) {
    cn_entry *e = calloc(1, sizeof *e);
    if (e && !(e->name = strdup(name))) { free(e); e = NULL; }
    if (!e) cn_set_error("out of memory");
    return e;
}

/* The one way in for every registration: exact or namespace, CF-style callback or handler. The
 * public functions below differ only in their arguments' checks. */
static uint32_t add_registration(CNotify_center *c, const char *key, int is_namespace, const void *observer,
                                 CNotify_callback callback, CNotify_handler handler, void *context,
                                 CNotify_release release, uint64_t *out_id) {
    uint32_t st = is_namespace ? cn_validate_namespace(key) : CNotify_validate_name(key);
    if (st != NOTIFY_STATUS_OK) return st;
    cn_entry *e = new_entry(key);
    if (!e) return NOTIFY_STATUS_FAILED;
    e->observer = observer;
    e->cf_callback = callback;
    e->handler = handler;
    e->context = context;
    e->release = release;
    e->is_namespace = is_namespace;
    return register_entry(c, e, key, out_id);
}

uint32_t CNotify_center_add_observer(CNotify_center *c, const void *observer, CNotify_callback callback, const char *name) {
    cn_clear_error();
    if (!c || !callback) { cn_set_error("center or callback is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    return add_registration(c, name, 0, observer, callback, NULL, NULL, NULL, NULL);
}

uint32_t CNotify_center_add_handler(CNotify_center *c, const char *name, CNotify_handler handler, void *context,
                                    CNotify_release release, uint64_t *out_id) {
    cn_clear_error();
    if (!c || !handler || !out_id) { cn_set_error("center, handler or id pointer is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    return add_registration(c, name, 0, NULL, NULL, handler, context, release, out_id);
}

uint32_t CNotify_center_add_namespace_observer(CNotify_center *c, const void *observer, CNotify_callback callback,
                                               const char *ns) {
    cn_clear_error();
    if (!c || !callback) { cn_set_error("center or callback is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    return add_registration(c, ns, 1, observer, callback, NULL, NULL, NULL, NULL);
}

uint32_t CNotify_center_add_namespace_handler(CNotify_center *c, const char *ns, CNotify_handler handler, void *context,
                                              CNotify_release release, uint64_t *out_id) {
    cn_clear_error();
    if (!c || !handler || !out_id) { cn_set_error("center, handler or id pointer is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    return add_registration(c, ns, 1, NULL, NULL, handler, context, release, out_id);
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
    if (cn_fork_check() != NOTIFY_STATUS_OK) return NOTIFY_STATUS_OPT_DISABLE;
    if (!c) { cn_set_error("center is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    remove_where(c, name, 0, match_observer, observer, 0);
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_center_remove_namespace_observer(CNotify_center *c, const void *observer, const char *ns) {
    cn_clear_error();
    if (cn_fork_check() != NOTIFY_STATUS_OK) return NOTIFY_STATUS_OPT_DISABLE;
    if (!c) { cn_set_error("center is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    uint32_t st = cn_validate_namespace(ns);
    if (st != NOTIFY_STATUS_OK) return st;
    remove_where(c, ns, 1, match_observer, observer, 0);
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_center_remove_every_observer(CNotify_center *c, const void *observer) {
    cn_clear_error();
    if (cn_fork_check() != NOTIFY_STATUS_OK) return NOTIFY_STATUS_OPT_DISABLE;
    if (!c) { cn_set_error("center is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    remove_where(c, NULL, 0, match_observer, observer, 0);
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_center_remove_handler(CNotify_center *c, uint64_t id) {
    if (!c) { cn_set_error("center is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    if (cn_fork_check() != NOTIFY_STATUS_OK) return NOTIFY_STATUS_OPT_DISABLE;
    if (remove_where(c, NULL, 0, match_id, NULL, id) == 0) {
        cn_set_error("no registration with id %llu", (unsigned long long)id);
        return NOTIFY_STATUS_INVALID_TOKEN;
    }
    return NOTIFY_STATUS_OK;
}

/* Waits (c->lock and the gate held) until the bus has taken the posts queued before this one
 * down to CN_OUTGOING_MAX bytes: a poster faster than the bus must not grow without bound.
 * libdbus writes (and reads, for the I/O thread to dispatch) while we wait. Returns 0 if the bus
 * took nothing for CN_POST_STALL_MS or went away. */
static int await_outgoing_room_locked(DBusConnection *conn) {
    if (dbus_connection_get_outgoing_size(conn) <= (long)CN_OUTGOING_MAX) return 1;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        long waited = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (waited >= CN_POST_STALL_MS || !dbus_connection_get_is_connected(conn)) return 0;
        dbus_connection_read_write(conn, (int)(CN_POST_STALL_MS - waited));
        if (dbus_connection_get_outgoing_size(conn) <= (long)CN_OUTGOING_MAX / 2) return 1;
    }
}

uint32_t CNotify_center_post(CNotify_center *c, const char *name) {
    cn_clear_error();
    if (!c) { cn_set_error("center is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    if ((st = cn_fork_check()) != NOTIFY_STATUS_OK) return st;
    if (cn_is_self_name(name)) return cn_local_post(c, name); /* never leaves the process */
    int restricted;
    if ((st = cn_may_write(name, &restricted)) != NOTIFY_STATUS_OK) return st; /* user.uid.N: N or root */
    st = cn_center_start(c);
    if (st != NOTIFY_STATUS_OK) return st;
    char iface[32];
    cn_bucket_interface(name, iface);
    DBusMessage *m = dbus_message_new_signal(CN_PATH, iface, CN_MEMBER);
    if (!m) { cn_set_error("out of memory"); return NOTIFY_STATUS_FAILED; }
    pthread_mutex_lock(&c->lock);
    if (!c->connected || !c->conn) {
        pthread_mutex_unlock(&c->lock);
        dbus_message_unref(m);
        cn_set_error("no bus is reachable at %s (reconnecting in the background)", c->address ? c->address : "?");
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    /* Numbered per (sender, name), so a receiver can tell when the bus dropped some (DESIGN.md).
     * The table is bounded; a receiver reads a restart at 1 as a reset, not as a gap. */
    if (c->post_counts.count > 65536) cn_map_clear(&c->post_counts, NULL);
    void **count = cn_map_upsert(&c->post_counts, name);
    dbus_uint64_t seq = count ? (uintptr_t)*count + 1 : 0;
    if (count) *count = (void *)(uintptr_t)seq;
    int ok = dbus_message_append_args(m, DBUS_TYPE_STRING, &name, DBUS_TYPE_UINT64, &seq, DBUS_TYPE_INVALID);
    /* A restricted name carries proof of our uid that outlives us (credentials.c). */
    if (ok && restricted && c->can_pass_fds && c->bus_id[0] && c->unique_name[0]) {
        int fd = cn_credential_create(c->bus_id, c->unique_name, name, seq);
        if (fd < 0) {
            pthread_mutex_unlock(&c->lock);
            dbus_message_unref(m);
            return NOTIFY_STATUS_FAILED;
        }
        ok = dbus_message_append_args(m, DBUS_TYPE_UNIX_FD, &fd, DBUS_TYPE_INVALID); /* libdbus keeps a dup */
        close(fd);
    }
    /* Sent from the caller's thread: libdbus writes at once if the socket takes it; what it could
     * not write goes out with the next post, or from the I/O thread after a grace (io_loop.c,
     * quiet sends). No thread hop on the hot path. */
    int room = 1;
    if (ok) {
        cn_send_enter(c);
        room = await_outgoing_room_locked(c->conn);
        if (room) ok = dbus_connection_send(c->conn, m, NULL);
        cn_send_leave(c, c->conn);
    }
    size_t unsent = room ? 0 : (size_t)dbus_connection_get_outgoing_size(c->conn);
    pthread_mutex_unlock(&c->lock);
    dbus_message_unref(m);
    if (!room) {
        cn_set_error("the bus has not taken %zu bytes of earlier posts for %d s (is dbus-daemon stopped or "
                     "overloaded?); %s was not posted", unsent, CN_POST_STALL_MS / 1000, name);
        return NOTIFY_STATUS_FAILED;
    }
    if (!ok) { cn_set_error("out of memory"); return NOTIFY_STATUS_FAILED; }
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_center_flush(CNotify_center *c, int timeout_ms) {
    (void)timeout_ms; /* dbus_connection_flush waits until written or disconnected */
    if (!c) return NOTIFY_STATUS_NULL_INPUT;
    uint32_t st = cn_fork_check();
    if (st != NOTIFY_STATUS_OK) return st;
    if (!atomic_load(&c->started)) return NOTIFY_STATUS_OK;
    pthread_mutex_lock(&c->lock);
    DBusConnection *conn = c->conn ? dbus_connection_ref(c->conn) : NULL;
    pthread_mutex_unlock(&c->lock);
    if (!conn) {
        cn_set_error("no bus is reachable: posts could not be written");
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    cn_gate_enter(c);
    dbus_connection_flush(conn);
    cn_gate_leave(c);
    int connected = dbus_connection_get_is_connected(conn);
    dbus_connection_unref(conn);
    if (!connected) {
        cn_set_error("the bus went away before the posts were written");
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    return NOTIFY_STATUS_OK;
}
