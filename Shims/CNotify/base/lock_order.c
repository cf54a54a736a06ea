/*
 * lock_order.c: the lock order's check (the table is cn_lock_level in base.h). Each thread keeps
 * the locks it holds, with their levels; taking a lock whose level is not above every one held
 * is a lock-order violation: said on stderr, naming both locks, then abort() (a debug build).
 *
 * Built with -DCN_LOCK_ORDER_RECORD=\"DIR\" instead, nothing aborts: each pair (held, taken) seen
 * is appended once per process to DIR/<pid>, so that a run of every test shows the order the
 * code keeps (how the table was found).
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "base.h"

static const char *const names[CN_LOCK_LEVELS] = {
    [CN_LOCK_CENTERS] = "centers_lock", [CN_LOCK_DELIVERY] = "delivery.lock", [CN_LOCK_DISPATCH] = "dispatch target mu",
    [CN_LOCK_TOKENS] = "tok_lock", [CN_LOCK_TOKEN] = "token mu", [CN_LOCK_REGISTRY] = "registry.lock",
    [CN_LOCK_SUBS] = "subs.lock", [CN_LOCK_RULES] = "rules.lock", [CN_LOCK_START] = "start_lock",
    [CN_LOCK_RESTRICTED] = "outbox.restricted_lock", [CN_LOCK_OUTBOX] = "outbox.lock", [CN_LOCK_PEERS] = "peers.lock",
    [CN_LOCK_CALLS] = "calls.lock", [CN_LOCK_LINK] = "link.lock", [CN_LOCK_GATE] = "gate", [CN_LOCK_LIBDBUS] = "libdbus's connection lock",
    [CN_LOCK_WATCHES] = "watches.lock", [CN_LOCK_ROOM] = "room_lock", [CN_LOCK_ENDPOINT] = "endpoint.lock",
    [CN_LOCK_LOOP] = "loop.lock", [CN_LOCK_SELF] = "delivery.self_lock", [CN_LOCK_STATE] = "state.lock",
    [CN_LOCK_LAUNCH] = "once_lock", [CN_LOCK_POLICY] = "policy_lock", [CN_LOCK_COMPLETION] = "completion lock",
    [CN_LOCK_RINGS] = "rings_lock", [CN_LOCK_NOTICE] = "notice lock",
};

const char *cn_lock_level_name(int level) {
    return level > 0 && level < CN_LOCK_LEVELS && names[level] ? names[level] : "an unnamed lock";
}

#if CN_LOCK_CHECK

#define HELD_MAX 32
static __thread struct { const void *lock; int level; } held[HELD_MAX];
static __thread int nheld;

#ifdef CN_LOCK_ORDER_RECORD
#include <pthread.h>
static pthread_mutex_t record_lock = PTHREAD_MUTEX_INITIALIZER; /* not in the table: the check's own */
static unsigned char recorded[CN_LOCK_LEVELS][CN_LOCK_LEVELS];
static void record(int outer, int inner) {
    pthread_mutex_lock(&record_lock);
    if (!recorded[outer][inner]) {
        recorded[outer][inner] = 1;
        char path[256];
        snprintf(path, sizeof path, "%s/%d", CN_LOCK_ORDER_RECORD, (int)getpid());
        FILE *f = fopen(path, "a");
        if (f) {
            fprintf(f, "%s -> %s\n", cn_lock_level_name(outer), cn_lock_level_name(inner));
            fclose(f);
        }
    }
    pthread_mutex_unlock(&record_lock);
}
#endif

static void push(const void *lock, int level) {
    if (nheld < HELD_MAX) {
        held[nheld].lock = lock;
        held[nheld].level = level;
    }
    nheld++;
}

void cn_lock_order_take(const void *lock, int level) {
    for (int i = 0; i < nheld && i < HELD_MAX; i++) {
#ifdef CN_LOCK_ORDER_RECORD
        record(held[i].level, level);
#else
        if (held[i].level >= level) {
            fprintf(stderr, "darwin-notify: lock order violated: taking %s (level %d) while holding %s (level %d); "
                    "the order is base/base.h's cn_lock_level\n",
                    cn_lock_level_name(level), level, cn_lock_level_name(held[i].level), held[i].level);
            abort();
        }
#endif
    }
    push(lock, level);
}

void cn_lock_order_note(const void *lock, int level) { push(lock, level); }

void cn_lock_order_drop(const void *lock) {
    /* Usually the last one taken; not always (hand-over-hand), so search from the end. */
    int n = nheld < HELD_MAX ? nheld : HELD_MAX;
    for (int i = n - 1; i >= 0; i--) {
        if (held[i].lock != lock) continue;
        for (int j = i; j + 1 < n; j++) held[j] = held[j + 1];
        nheld--;
        return;
    }
    if (nheld > HELD_MAX) nheld--; /* it was past the list's end */
}

int cn_lock_order_holds(const void *lock) {
    for (int i = 0; i < nheld && i < HELD_MAX; i++)
        if (held[i].lock == lock) return 1;
    return 0;
}

#endif
