/*
 * loop.c: the loop thread. Each round: every source prepares (does its own work, names its
 * descriptors and deadline), one poll over the wake fd and all of them, then every source handles
 * what became ready. A round after one in which every source only moved data, nobody woke or
 * unsettled the loop and no deadline came, is lean: the same descriptors are polled again until
 * the same deadline, and handled, with no prepare (a post's delivery is one wait and its reading).
 * When a source has an epoll set of its own, the loop waits in that set alone (below).
 * Started by the first call that needs it; stopped by the center's destroy.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "loop.h"

/* Set by the loop thread as its first act: it knows itself from its first instruction, not from
 * `started`, which its creator sets only after pthread_create returns (a callback run before that
 * would otherwise take the gate as a poster and leave it as the loop thread). */
static __thread const cn_loop *tl_loop;

int cn_loop_init(cn_loop *l, cn_loop_owner owner) {
    l->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (l->wake_fd < 0) return -1;
    cn_mutex_init(&l->lock, CN_LOCK_LOOP);
    l->owner = owner;
    l->settled = 0; /* the first round prepares */
    l->deadline_ms = UINT64_MAX;
    l->set_fd = -1;
    l->nset_events = -1;
    for (size_t i = 0; i < sizeof l->registered / sizeof l->registered[0]; i++) l->registered[i] = -1;
    return 0;
}

void cn_loop_free(cn_loop *l) {
    close(l->wake_fd);
    cn_mutex_destroy(&l->lock);
}

int cn_loop_add_source(cn_loop *l, const cn_loop_source *s) {
    cn_mutex_lock(&l->lock);
    int ok = l->nsources < CN_LOOP_SOURCES_MAX;
    if (ok) l->sources[l->nsources++] = *s;
    cn_mutex_unlock(&l->lock);
    if (ok) cn_loop_wake(l);
    return ok ? 0 : -1;
}

int cn_loop_on_thread(const cn_loop *l) { return tl_loop == l; }

int cn_loop_started(cn_loop *l) { return atomic_load_explicit(&l->started, memory_order_acquire); }

void cn_loop_wake(cn_loop *l) {
    if (tl_loop == l) { /* the thread itself: no system call, the round says what to do */
        l->rewake = 1;
        return;
    }
    /* One write per sleep of the loop: a flood of posts into a full socket would otherwise pay a
     * system call each (measured: 5x the floor's kernel time). */
    if (atomic_exchange_explicit(&l->wake_pending, 1, memory_order_acq_rel)) return;
    uint64_t one = 1;
    ssize_t r = write(l->wake_fd, &one, sizeof one);
    (void)r; /* EAGAIN means the counter is already non-zero: the thread will wake anyway */
}

CN_HOT static void drain_wake(cn_loop *l) {
    /* Cleared before the sources look at their work, so a wake racing with it is never lost. */
    uint64_t v;
    ssize_t r = read(l->wake_fd, &v, sizeof v);
    (void)r;
    atomic_store_explicit(&l->wake_pending, 0, memory_order_release);
}

void cn_loop_unsettle(cn_loop *l) {
    if (tl_loop == l) l->unsettled = 1;
}

/* The handles, after a wait that found `r` descriptors ready (0: its time ran out). */
CN_HOT static void handle_ready(cn_loop *l, int r) {
    int woken = r > 0 && (l->fds[0].revents & POLLIN);
    if (woken) drain_wake(l);
    int changed = 0;
    for (size_t i = 0; i < l->npolled; i++)
        changed |= l->polled[i].handle(l->polled[i].ctx, l->fds + l->first[i], l->first[i + 1] - l->first[i]);
    /* Nothing timed out, woke the loop or changed what a prepare would say. */
    l->settled = r > 0 && !woken && !changed && !l->rewake && !l->unsettled;
}

/* The poll and the handles, of a round with no set to wait in. */
CN_HOT static void poll_and_handle(cn_loop *l, int timeout) {
    int r = poll(l->fds, (nfds_t)l->nfds, timeout);
    if (r < 0 && errno != EINTR) {
        l->settled = 0;
        return;
    }
    handle_ready(l, r);
}

/* ---- waiting in a source's epoll set ----
 *
 * Polling the fast path's set among the round's other descriptors made two system calls for
 * every wake-up by a ring's bell (poll, then the source's epoll_wait), and poll sets up and takes
 * down a wait on each descriptor every time. Instead each descriptor of the round but the set's
 * own has an entry of the loop's in that set, and a round waits with one epoll_wait. The entries
 * are one-shot (one that fired is armed again before the next wait) and tagged with their index
 * and the generation they were armed in. After a prepare, an index that names a new number, or
 * new events, gets its entry again; and once a source noted that a descriptor it named may have
 * closed (cn_loop_note_close), every entry is changed in place (EPOLL_CTL_MOD, which the kernel
 * refuses when that number is another file now: then it is added), so a number closed and reused
 * is never taken for its old file. Otherwise a prepare costs no epoll_ctl. The kernel keeps the
 * entry of a descriptor closed while another reference to its file lives (a forked child's copy):
 * its generation is older than its index's, it fires at most once, and it reaches nobody. */

static uint32_t epoll_of(short events) {
    return (events & POLLIN ? EPOLLIN : 0u) | (events & POLLOUT ? EPOLLOUT : 0u) | (events & POLLPRI ? EPOLLPRI : 0u);
}
static short poll_of(uint32_t events) {
    return (short)((events & EPOLLIN ? POLLIN : 0) | (events & EPOLLOUT ? POLLOUT : 0) | (events & EPOLLPRI ? POLLPRI : 0) |
                   (events & EPOLLERR ? POLLERR : 0) | (events & EPOLLHUP ? POLLHUP : 0));
}
#define GEN_MASK 0x7fffffffu

/* Every entry of the loop out of `set_fd` (the set refused one, or it is no longer the set). */
static void drop_entries(cn_loop *l, int set_fd) {
    for (size_t i = 0; i < sizeof l->registered / sizeof l->registered[0]; i++)
        if (l->registered[i] >= 0) {
            epoll_ctl(set_fd, EPOLL_CTL_DEL, l->registered[i], NULL); /* closed since: refused, harmless */
            l->registered[i] = -1;
            l->armed[i] = 0;
        }
}

/* Index i's entry armed for fds[i] under this generation: changed in place when it names that
 * number already, else added; an entry a later index of this pass held for the number is taken
 * over. 0 when the set refuses it (the number twice in the round, the source's own). */
static int arm(cn_loop *l, size_t i) {
    int fd = l->fds[i].fd;
    struct epoll_event ev = { .events = epoll_of(l->fds[i].events) | EPOLLONESHOT,
                              .data.u64 = CN_LOOP_MIRROR_TAG | (uint64_t)(l->set_gen & GEN_MASK) << 32 | (uint64_t)i };
    if (!(l->registered[i] == fd && epoll_ctl(l->set_fd, EPOLL_CTL_MOD, fd, &ev) == 0) &&
        epoll_ctl(l->set_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        /* The number is in the set already: an earlier index of this pass holds it (the same
         * descriptor twice: refused), or an entry of the loop's no index holds any more (forgotten
         * after a noted close, or a later index's): taken over. A descriptor the loop names is
         * never one of the source's own entries. */
        for (size_t j = 0; j < i; j++)
            if (l->registered[j] == fd) return 0;
        if (errno != EEXIST || epoll_ctl(l->set_fd, EPOLL_CTL_MOD, fd, &ev) != 0) return 0;
        for (size_t j = i + 1; j < sizeof l->registered / sizeof l->registered[0]; j++)
            if (l->registered[j] == fd) { /* that index's entry is this one's now */
                l->registered[j] = -1;
                l->armed[j] = 0;
            }
    }
    l->registered[i] = fd;
    l->reg_events[i] = l->fds[i].events;
    l->reg_gen[i] = l->set_gen;
    l->armed[i] = 1;
    return 1;
}

/* After a prepare: the round's descriptors (`old_n` in the last) have their entries, armed. */
static int sync_entries(cn_loop *l, size_t old_n) {
    l->set_gen++;
    uint32_t closes = atomic_load_explicit(&l->closes, memory_order_acquire);
    int check = closes != l->synced_closes;
    l->synced_closes = closes;
    size_t top = old_n > l->nfds ? old_n : l->nfds;
    for (size_t i = 0; i < top; i++) {
        int fd = i < l->nfds && i != l->set_at ? l->fds[i].fd : -1;
        if (l->registered[i] >= 0 && l->registered[i] != fd) {
            /* After a noted close the number may be a new file the source added to its set: not
             * deleted by number then, only forgotten (a closed file's entry is gone, a stale one
             * fires once and is told apart; one still open is taken over if named again). */
            if (!check) epoll_ctl(l->set_fd, EPOLL_CTL_DEL, l->registered[i], NULL);
            l->registered[i] = -1;
            l->armed[i] = 0;
        }
        if (fd < 0) continue;
        if (!check && l->registered[i] == fd && l->reg_events[i] == l->fds[i].events && l->armed[i]) continue;
        if (!arm(l, i)) return 0;
    }
    return 1;
}

/* Before a lean round's wait: each entry that fired armed again. */
static int rearm(cn_loop *l) {
    for (size_t i = 0; i < l->nfds; i++)
        if (l->registered[i] >= 0 && !l->armed[i] && !arm(l, i)) return 0;
    return 1;
}

/* The wait in the set: the source's own events kept for it (cn_loop_epoll_events), the round's
 * descriptors given the revents a poll would have. */
CN_HOT static void wait_in_set(cn_loop *l, int timeout) {
    struct epoll_event got[64];
    atomic_fetch_add_explicit(&l->set_waits, 1, memory_order_relaxed);
    int r = epoll_wait(l->set_fd, got, 64, timeout);
    if (r < 0 && errno != EINTR) {
        l->settled = 0;
        return;
    }
    int ready = 0;
    l->nset_events = 0;
    for (int k = 0; k < r; k++) {
        uint64_t data = got[k].data.u64;
        if (!(data & CN_LOOP_MIRROR_TAG)) {
            l->set_events[l->nset_events++] = got[k];
            continue;
        }
        size_t i = (size_t)(uint32_t)data;
        if (i >= l->nfds || l->registered[i] < 0 || ((data >> 32) & GEN_MASK) != (l->reg_gen[i] & GEN_MASK))
            continue; /* stale: fired once, never again */
        l->fds[i].revents = poll_of(got[k].events);
        l->armed[i] = 0;
        ready++;
    }
    if (l->nset_events > 0) {
        l->fds[l->set_at].revents = POLLIN;
        ready++;
    }
    handle_ready(l, ready);
    l->nset_events = -1;
}

/* A round's wait: in the set when there is one that took every entry, else a poll. */
CN_HOT static void wait_and_handle(cn_loop *l, int timeout) {
    if (l->set_fd >= 0 && !l->set_failed) wait_in_set(l, timeout);
    else poll_and_handle(l, timeout);
}

void cn_loop_note_close(cn_loop *l) { atomic_fetch_add_explicit(&l->closes, 1, memory_order_release); }

void cn_loop_epoll_release(cn_loop *l, int fd) {
    if (l->set_fd < 0) return;
    for (size_t i = 0; i < l->nfds; i++)
        if (l->registered[i] == fd) {
            epoll_ctl(l->set_fd, EPOLL_CTL_DEL, fd, NULL);
            l->registered[i] = -1; /* not armed again; an event of it this round is not given */
            l->armed[i] = 0;
        }
}

void cn_loop_epoll_forget(cn_loop *l, const void *record) {
    for (int k = 0; k < l->nset_events; k++)
        if (l->set_events[k].data.ptr == record) l->set_events[k].data.u64 = 0;
}

int cn_loop_epoll_events(cn_loop *l, int set_fd, struct epoll_event *out, int cap) {
    if (l->nset_events >= 0 && set_fd == l->set_fd) {
        int n = l->nset_events < cap ? l->nset_events : cap;
        memcpy(out, l->set_events, (size_t)n * sizeof *out);
        l->nset_events = -1;
        return n;
    }
    int r = epoll_wait(set_fd, out, cap, 0), n = 0;
    for (int k = 0; k < r; k++) /* a tagged one is a stale entry of the loop's */
        if (!(out[k].data.u64 & CN_LOOP_MIRROR_TAG)) out[n++] = out[k];
    return r < 0 ? r : n;
}

/* A lean round, when the last one settled: 0 when it must be a prepared one (a deadline came). */
CN_HOT static int lean_round(cn_loop *l) {
    int timeout = -1;
    if (l->deadline_ms != UINT64_MAX) {
        uint64_t now = cn_now_ms();
        if (now >= l->deadline_ms) return 0;
        timeout = l->deadline_ms - now > INT32_MAX ? INT32_MAX : (int)(l->deadline_ms - now);
    }
    l->rewake = l->unsettled = 0;
    for (size_t i = 0; i < l->nfds; i++) l->fds[i].revents = 0;
    if (l->set_fd >= 0 && !l->set_failed && !rearm(l)) {
        drop_entries(l, l->set_fd);
        l->set_failed = 1;
    }
    wait_and_handle(l, timeout);
    return 1;
}

/* One round: prepare every source, poll, hand each its descriptors back. */
CN_HOT static void run_round(cn_loop *l) {
    if (l->settled && lean_round(l)) return;
    cn_mutex_lock(&l->lock);
    l->npolled = l->nsources;
    memcpy(l->polled, l->sources, l->npolled * sizeof *l->polled);
    cn_mutex_unlock(&l->lock);
    size_t n = 1, old_n = l->nfds;
    int timeout = -1, old_set = l->set_fd;
    l->rewake = l->unsettled = 0;
    l->fds[0] = (struct pollfd){ .fd = l->wake_fd, .events = POLLIN };
    l->set_fd = -1;
    for (size_t i = 0; i < l->npolled; i++) {
        l->first[i] = n;
        size_t got = l->polled[i].prepare(l->polled[i].ctx, l->fds + n, CN_LOOP_FDS_PER_SOURCE, &timeout);
        int set = l->set_fd < 0 && l->polled[i].wait_set ? l->polled[i].wait_set(l->polled[i].ctx) : -1;
        for (size_t k = n; set >= 0 && k < n + got; k++)
            if (l->fds[k].fd == set) { /* the set to wait in, when its source named it */
                l->set_fd = set;
                l->set_at = k;
                break;
            }
        n += got;
    }
    l->first[l->npolled] = n;
    l->nfds = n;
    if (old_set >= 0 && old_set != l->set_fd) drop_entries(l, old_set);
    l->set_failed = l->set_fd >= 0 && !sync_entries(l, old_set == l->set_fd ? old_n : 0);
    if (l->set_failed) drop_entries(l, l->set_fd); /* this prepare's rounds poll */
    if (l->rewake) timeout = 0; /* woken by its own thread while preparing: look again at once */
    l->deadline_ms = timeout < 0 ? UINT64_MAX : cn_now_ms() + (uint64_t)timeout;
    if (atomic_load_explicit(&l->stopping, memory_order_acquire)) return;
    wait_and_handle(l, timeout);
}

CN_HOT static void *loop_main(void *arg) {
    cn_loop *l = arg;
    tl_loop = l;
    while (!atomic_load_explicit(&l->stopping, memory_order_acquire)) run_round(l);
    cn_mutex_lock(&l->lock);
    size_t nsources = l->nsources;
    cn_mutex_unlock(&l->lock);
    for (size_t i = 0; i < nsources; i++) l->sources[i].stop(l->sources[i].ctx);
    l->owner.ended(l->owner.ctx); /* may free l */
    return NULL;
}

int cn_loop_start(cn_loop *l) {
    if (cn_loop_started(l)) return 0;
    cn_mutex_lock(&l->lock);
    int rc = 0;
    if (!l->started) {
        if (pthread_create(&l->thread, NULL, loop_main, l) != 0) {
            cn_set_error("cannot start the notification I/O thread");
            rc = -1;
        } else {
            cn_test_start_delay();
            atomic_store_explicit(&l->started, 1, memory_order_release);
        }
    }
    cn_mutex_unlock(&l->lock);
    return rc;
}

int cn_loop_stop(cn_loop *l) {
    atomic_store_explicit(&l->stopping, 1, memory_order_release);
    if (cn_loop_on_thread(l)) {
        pthread_detach(pthread_self());
        return 0;
    }
    cn_mutex_lock(&l->lock); /* a start in progress holds it until the thread exists */
    int started = l->started;
    cn_mutex_unlock(&l->lock);
    if (!started) return 1;
    cn_loop_wake(l);
    pthread_join(l->thread, NULL);
    return 1;
}
