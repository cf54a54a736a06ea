/*
 * loop.c: the loop thread. Each round: every source prepares (does its own work, names its
 * descriptors and deadline), one poll over the wake fd and all of them, then every source handles
 * what became ready. A round after one in which every source only moved data, nobody woke or
 * unsettled the loop and no deadline came, is lean: the same descriptors are polled again until
 * the same deadline, and handled, with no prepare (a post's delivery is one poll and its reading).
 * Started by the first call that needs it; stopped by the center's destroy.
 */
#include <stdlib.h>
#include <string.h>
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

/* The poll and the handles, of a prepared round or a lean one. */
CN_HOT static void poll_and_handle(cn_loop *l, int timeout) {
    int r = poll(l->fds, (nfds_t)l->nfds, timeout);
    if (r < 0 && errno != EINTR) {
        l->settled = 0;
        return;
    }
    int woken = r > 0 && (l->fds[0].revents & POLLIN);
    if (woken) drain_wake(l);
    int changed = 0;
    for (size_t i = 0; i < l->npolled; i++)
        changed |= l->polled[i].handle(l->polled[i].ctx, l->fds + l->first[i], l->first[i + 1] - l->first[i]);
    /* Nothing timed out, woke the loop or changed what a prepare would say. */
    l->settled = r > 0 && !woken && !changed && !l->rewake && !l->unsettled;
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
    poll_and_handle(l, timeout);
    return 1;
}

/* One round: prepare every source, poll, hand each its descriptors back. */
CN_HOT static void run_round(cn_loop *l) {
    if (l->settled && lean_round(l)) return;
    cn_mutex_lock(&l->lock);
    l->npolled = l->nsources;
    memcpy(l->polled, l->sources, l->npolled * sizeof *l->polled);
    cn_mutex_unlock(&l->lock);
    size_t n = 1;
    int timeout = -1;
    l->rewake = l->unsettled = 0;
    l->fds[0] = (struct pollfd){ .fd = l->wake_fd, .events = POLLIN };
    for (size_t i = 0; i < l->npolled; i++) {
        l->first[i] = n;
        n += l->polled[i].prepare(l->polled[i].ctx, l->fds + n, CN_LOOP_FDS_PER_SOURCE, &timeout);
    }
    l->first[l->npolled] = n;
    l->nfds = n;
    if (l->rewake) timeout = 0; /* woken by its own thread while preparing: look again at once */
    l->deadline_ms = timeout < 0 ? UINT64_MAX : cn_now_ms() + (uint64_t)timeout;
    if (atomic_load_explicit(&l->stopping, memory_order_acquire)) return;
    poll_and_handle(l, timeout);
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
