/*
 * test_registry.c: a registry's snapshots (registry.c) while the last one is kept. A snapshot
 * gives the entries of a name, exact and through namespaces, pinned; the next snapshot of the
 * same name copies what was kept. Every add and every remove must empty what is kept: a
 * snapshot never misses an entry added since, never gives one removed (under ASan, a removed
 * entry no delivery held is freed at once: giving it would be a use after free), and a name
 * with no entry is kept as such until one comes. A remover on another thread waits while the
 * entry's callback runs, and the end of that callback wakes it (end_run signals only when a
 * remover waits).
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../center.h"
#include "../../base/tests/check.h"

/* As the center removes one entry: the one whose id is b. */
static int match_id(const cn_entry *e, const void *a, uint64_t b) { (void)a; return e->id == b; }

static uint64_t add(cn_registry *r, const char *name, int is_namespace) {
    cn_entry *e = calloc(1, sizeof *e);
    e->name = strdup(name);
    e->is_namespace = is_namespace;
    uint64_t id = 0;
    CHECK(cn_registry_add(r, e, &id) == NOTIFY_STATUS_OK, "add %s", name);
    return id;
}

/* A snapshot of `name`: its entries' ids into ids (sorted by the order given), unpinned again
 * as a delivery that ran none of them would. How many. */
static size_t snapshot(cn_registry *r, const char *name, uint64_t ids[16]) {
    cn_entry *stack[16], **snap;
    size_t n = cn_registry_snapshot(r, name, stack, 16, &snap);
    for (size_t i = 0; i < n; i++) {
        ids[i] = snap[i]->id;
        cn_registry_end_run(r, snap[i], 0);
    }
    if (snap != stack) free(snap);
    return n;
}

static int has(const uint64_t *ids, size_t n, uint64_t id) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id) return 1;
    return 0;
}

static void remove_id(cn_registry *r, uint64_t id) {
    cn_removal rm;
    cn_registry_remove(r, NULL, 0, id, match_id, NULL, id, 0, &rm);
    CHECK(rm.removed == 1, "removed %zu for id %llu", rm.removed, (unsigned long long)id);
    cn_removal_free(&rm);
}

typedef struct remover {
    cn_registry *r;
    uint64_t id;
    atomic_int returned;
} remover;

static void *remove_on_thread(void *arg) {
    remover *w = arg;
    remove_id(w->r, w->id);
    atomic_store(&w->returned, 1);
    return NULL;
}

static unsigned waiting(cn_registry *r) {
    cn_mutex_lock(&r->lock);
    unsigned n = r->waiting;
    cn_mutex_unlock(&r->lock);
    return n;
}

/* A callback runs (begin_run) while another thread removes its entry: the remover is still
 * waiting until end_run, which wakes it. */
static void remover_waits_for_the_callback(cn_registry *r) {
    uint64_t id = add(r, "running", 0);
    cn_entry *stack[16], **snap;
    size_t n = cn_registry_snapshot(r, "running", stack, 16, &snap);
    CHECK(n == 1 && cn_registry_begin_run(r, snap[0]), "the callback could not start");
    if (n != 1) return;
    remover w = { r, id, 0 };
    pthread_t t;
    CHECK(pthread_create(&t, NULL, remove_on_thread, &w) == 0, "no remover thread");
    struct timespec limit;
    clock_gettime(CLOCK_MONOTONIC, &limit);
    limit.tv_sec += 10;
    int seen = 0; /* the remover waits on the condition: the handshake, no sleep */
    for (struct timespec now; !(seen = waiting(r) == 1);) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > limit.tv_sec || (now.tv_sec == limit.tv_sec && now.tv_nsec >= limit.tv_nsec)) break;
        sched_yield();
    }
    CHECK(seen, "the remover never waited for the running callback");
    CHECK(!atomic_load(&w.returned), "the remove returned while the callback ran");
    cn_registry_end_run(r, snap[0], 1); /* the callback ends: the remover must be woken */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    int joined = pthread_timedjoin_np(t, NULL, &deadline) == 0;
    CHECK(joined, "the remover was not woken when the callback ended");
    if (!joined) _exit(1); /* it waits on r, which main frees */
    CHECK(atomic_load(&w.returned) && waiting(r) == 0, "after the callback: returned %d, waiting %u", atomic_load(&w.returned), waiting(r));
}

int main(void) {
    cn_registry r = { 0 };
    cn_registry_init(&r);
    uint64_t ids[16];

    /* A name with no entry, asked twice (kept as none), then one comes: the next snapshot has it. */
    CHECK(snapshot(&r, "a.b", ids) == 0, "nothing observes a.b yet");
    CHECK(snapshot(&r, "a.b", ids) == 0, "still nothing");
    uint64_t first = add(&r, "a.b", 0);
    size_t n = snapshot(&r, "a.b", ids);
    CHECK(n == 1 && ids[0] == first, "the entry added after a kept empty snapshot: %zu", n);
    CHECK(snapshot(&r, "a.b", ids) == 1 && ids[0] == first, "the kept one, again");

    /* A second entry of the name, and one of a namespace above it. */
    uint64_t second = add(&r, "a.b", 0);
    n = snapshot(&r, "a.b", ids);
    CHECK(n == 2 && has(ids, n, first) && has(ids, n, second), "two after the second add: %zu", n);
    uint64_t under = add(&r, "a", 1);
    n = snapshot(&r, "a.b", ids);
    CHECK(n == 3 && has(ids, n, under), "the namespace's entry too: %zu", n);
    CHECK(snapshot(&r, "a.b", ids) == 3, "kept: three");

    /* Another name between: what is kept is that one's, and a.b's comes back whole. */
    CHECK(snapshot(&r, "a.c", ids) == 1 && ids[0] == under, "a.c: only the namespace's");
    CHECK(snapshot(&r, "a.b", ids) == 3, "a.b again: three");

    /* Removed: never given again, though it was kept (freed at once: no delivery holds it). */
    remove_id(&r, first);
    n = snapshot(&r, "a.b", ids);
    CHECK(n == 2 && !has(ids, n, first), "the removed entry is gone: %zu", n);
    remove_id(&r, under);
    n = snapshot(&r, "a.b", ids);
    CHECK(n == 1 && ids[0] == second, "the namespace's entry is gone: %zu", n);

    /* A removal while a delivery holds the kept entry: not given to the next snapshot, freed by
     * the delivery's last unpin. */
    cn_entry *stack[16], **snap;
    n = cn_registry_snapshot(&r, "a.b", stack, 16, &snap);
    CHECK(n == 1, "held: %zu", n);
    cn_removal rm;
    cn_registry_remove(&r, NULL, 0, second, match_id, NULL, second, 1, &rm);
    cn_removal_free(&rm);
    CHECK(snapshot(&r, "a.b", ids) == 0, "removed while held: not given");
    for (size_t i = 0; i < n; i++) cn_registry_end_run(&r, snap[i], 0);

    /* More entries than are kept: every one, every time. */
    for (int i = 0; i < CN_REGISTRY_KEPT + 2; i++) add(&r, "many", 0);
    CHECK(snapshot(&r, "many", ids) == CN_REGISTRY_KEPT + 2, "many, first");
    CHECK(snapshot(&r, "many", ids) == CN_REGISTRY_KEPT + 2, "many, second");

    /* The distributed registry's key for every name is "": kept like any other. */
    CHECK(snapshot(&r, "", ids) == 0, "nothing under \"\"");
    uint64_t all = add(&r, "", 0);
    CHECK(snapshot(&r, "", ids) == 1 && ids[0] == all, "one under \"\" after it was kept empty");

    remover_waits_for_the_callback(&r);

    cn_registry_free(&r);
    return check_result("test_registry");
}
