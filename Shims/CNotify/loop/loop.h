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
#include <sys/epoll.h>
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
    /* Optional (NULL: none): the source's own epoll set, which its prepare names among its
     * descriptors and whose events it takes in its handle with cn_loop_epoll_events. The loop
     * then waits in that set alone, the round's other descriptors added to it as the loop's own
     * entries (one-shot, their data tagged CN_LOOP_MIRROR_TAG, which a source's own data never
     * has). -1: none this time. */
    int (*wait_set)(void *ctx);
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
    /* Waiting in a source's epoll set (cn_loop_source.wait_set): the loop thread's alone. */
    int set_fd;                         /* that set, -1: the loop polls */
    size_t set_at;                      /* the index in fds of its own descriptor */
    int set_failed;                     /* the set refused an entry: this prepare's rounds poll */
    uint32_t set_gen;                   /* tags this prepare's entries (an older one is stale) */
    int registered[1 + CN_LOOP_SOURCES_MAX * CN_LOOP_FDS_PER_SOURCE]; /* fd of index i's entry, -1 */
    short reg_events[1 + CN_LOOP_SOURCES_MAX * CN_LOOP_FDS_PER_SOURCE]; /* the poll events it stands for */
    uint32_t reg_gen[1 + CN_LOOP_SOURCES_MAX * CN_LOOP_FDS_PER_SOURCE];  /* the generation it was armed in */
    unsigned char armed[1 + CN_LOOP_SOURCES_MAX * CN_LOOP_FDS_PER_SOURCE]; /* not fired since armed */
    _Atomic uint32_t closes;            /* cn_loop_note_close: a named descriptor may have closed */
    uint32_t synced_closes;             /* closes when the entries were last checked against the kernel */
    struct epoll_event set_events[64];  /* the source's own events the last wait returned */
    int nset_events;                    /* how many; -1: none taken (the source asks the set) */
    _Atomic uint64_t set_waits;         /* waits made in the set (read by tests) */
} cn_loop;
/* The data of a descriptor the loop adds to a source's set: this bit, its generation, its index. */
#define CN_LOOP_MIRROR_TAG (1ull << 63)

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
/* In the handle of a source with a wait_set, on the loop thread: the events of its own
 * descriptors this round (at most `cap`): those the loop's wait returned, else what the set has
 * ready now (epoll_wait with no wait). The loop's own entries are never among them. */
int cn_loop_epoll_events(cn_loop *l, int set_fd, struct epoll_event *out, int cap);
/* On the loop thread, when a source takes a descriptor out of its set: the events the loop's
 * wait took for it (data.ptr `record`), not yet handed over, are dropped. */
void cn_loop_epoll_forget(cn_loop *l, const void *record);
/* On the loop thread, before a source adds `fd` to its set: the loop's own entry for it (a
 * descriptor of the round, such as a connection the source had the loop poll itself) is taken
 * out, so the source's add is not refused. */
void cn_loop_epoll_release(cn_loop *l, int fd);
/* Any thread, before a source closes (or lets libdbus close) a descriptor its prepare named: the
 * next prepare checks every entry of the loop's against the kernel (a number may be another file
 * then). Between such notes an entry whose number and events stay the same is left as it is. */
void cn_loop_note_close(cn_loop *l);

#endif
