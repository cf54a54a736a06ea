/*
 * loop/loop.h: the I/O loop of a center: one thread that polls a set of sources. A source (a
 * transport) brings its own descriptors and deadlines each time round, and handles what became
 * ready; the loop knows nothing of what they are. Other threads wake it through an eventfd.
 *
 * A round after one that only moved data is lean: it polls the same descriptors until the same
 * deadline again, without asking the sources (docs/DESIGN.md "The loop"). So whatever would change
 * what a source's prepare does must say so: another thread wakes the loop (cn_loop_wake); code on
 * the loop thread calls cn_loop_wake (prepare again before sleeping) or cn_loop_unsettle (prepare
 * in the next round); a source's handle returns nonzero.
 *
 * Layer: above base/, below transport/. It reaches up only through the tables it is handed:
 * cn_loop_source (a transport's) and cn_loop_owner (the center's).
 */
#ifndef CNOTIFY_LOOP_H
#define CNOTIFY_LOOP_H

#include <poll.h>
#include "../base/base.h"

#define CN_LOOP_SOURCES_MAX 4
#define CN_LOOP_FDS_PER_SOURCE 16

/* What a source hands the loop. Every function runs on the loop thread. */
typedef struct cn_loop_source {
    void *ctx;
    /* Before each poll: the source's own work first (messages already read, a reconnection due),
     * then the descriptors it waits on into `fds` (at most `cap`), returning how many; it lowers
     * *timeout_ms to its next deadline (-1: none). */
    size_t (*prepare)(void *ctx, struct pollfd *fds, size_t cap, int *timeout_ms);
    /* After the poll: the same descriptors with their revents. Returns 0 when it only moved data
     * (its prepare would do and name the same as last time), nonzero otherwise. */
    int (*handle)(void *ctx, const struct pollfd *fds, size_t n);
    /* The loop is ending: close what the source holds. */
    void (*stop)(void *ctx);
} cn_loop_source;

/* What the loop reports to the one who made it. */
typedef struct cn_loop_owner {
    void *ctx;
    /* On the loop thread, after every source stopped and just before the thread ends: the owner
     * decides whether this thread frees what holds the loop (it was stopped from inside itself). */
    void (*ended)(void *ctx);
} cn_loop_owner;

typedef struct cn_loop {
    cn_mutex lock;               /* sources, start */
    cn_loop_source sources[CN_LOOP_SOURCES_MAX];
    size_t nsources;
    cn_loop_owner owner;
    pthread_t thread;
    _Atomic int started;                /* the thread exists (set once, under lock) */
    _Atomic int stopping;
    int wake_fd;                        /* eventfd: other threads wake the loop */
    _Atomic int wake_pending;           /* a wake is written and not yet drained: skip the syscall */
    /* The loop thread's alone: the last prepared round, polled again by lean rounds. */
    cn_loop_source polled[CN_LOOP_SOURCES_MAX];
    size_t npolled, nfds;
    size_t first[CN_LOOP_SOURCES_MAX + 1];
    struct pollfd fds[1 + CN_LOOP_SOURCES_MAX * CN_LOOP_FDS_PER_SOURCE];
    uint64_t deadline_ms;               /* of the last prepared round (cn_now_ms), UINT64_MAX: none */
    int settled;                        /* the last round only moved data: the next may be lean */
    int rewake, unsettled;              /* cn_loop_wake, cn_loop_unsettle on the loop thread this round */
} cn_loop;

/* For a source's prepare: the poll waits at most `ms` (negative: no bound of this source's). */
static inline void cn_loop_timeout_lower(int *timeout_ms, int ms) {
    if (ms >= 0 && (*timeout_ms < 0 || ms < *timeout_ms)) *timeout_ms = ms;
}
/* ... at most until `deadline_ms` (cn_now_ms's clock), `now_ms` being now: 0 once it passed. */
static inline void cn_loop_timeout_until(int *timeout_ms, uint64_t deadline_ms, uint64_t now_ms) {
    uint64_t left = deadline_ms > now_ms ? deadline_ms - now_ms : 0;
    cn_loop_timeout_lower(timeout_ms, left > INT32_MAX ? INT32_MAX : (int)left);
}

int cn_loop_init(cn_loop *l, cn_loop_owner owner);      /* 0, or -1 out of descriptors */
void cn_loop_free(cn_loop *l);
/* Adds a source (any thread, before or after the start); 0, or -1 when the set is full. */
int cn_loop_add_source(cn_loop *l, const cn_loop_source *s);
/* Starts the thread, once; 0, or -1 with the error set. */
int cn_loop_start(cn_loop *l);
int cn_loop_started(cn_loop *l);
int cn_loop_on_thread(const cn_loop *l);
/* The loop prepares every source before it sleeps again. From another thread it is woken; on the
 * loop thread, in a source's prepare, its poll does not wait; in a handle, the next round
 * prepares. */
void cn_loop_wake(cn_loop *l);
/* On the loop thread: the next round prepares every source (no lean round), without the poll of
 * this round returning early. Elsewhere nothing (another thread's change wakes the loop). */
void cn_loop_unsettle(cn_loop *l);
/* Ends the loop. From any other thread: wakes and joins it, and returns 1 (the caller may free
 * the loop). From the loop thread itself: it ends after the current round and calls
 * owner.ended; returns 0. A loop never started returns 1. */
int cn_loop_stop(cn_loop *l);

#endif
