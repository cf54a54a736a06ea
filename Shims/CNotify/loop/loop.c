/*
 * loop.c: the loop thread. Each round: every source prepares (does its own work, names its
 * descriptors and deadline), one poll over the wake fd and all of them, then every source handles
 * what became ready. Started by the first call that needs it; stopped by the center's destroy.
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
    /* One write per sleep of the loop: a flood of posts into a full socket would otherwise pay a
     * system call each (measured: 5x the floor's kernel time). */
    if (atomic_exchange_explicit(&l->wake_pending, 1, memory_order_acq_rel)) return;
    uint64_t one = 1;
    ssize_t r = write(l->wake_fd, &one, sizeof one);
    (void)r; /* EAGAIN means the counter is already non-zero: the thread will wake anyway */
}

static void drain_wake(cn_loop *l) {
    /* Cleared before the sources look at their work, so a wake racing with it is never lost. */
    uint64_t v;
    ssize_t r = read(l->wake_fd, &v, sizeof v);
    (void)r;
    atomic_store_explicit(&l->wake_pending, 0, memory_order_release);
}

/* One round: prepare every source, poll, hand each its descriptors back. */
static void run_round(cn_loop *l) {
    cn_loop_source sources[CN_LOOP_SOURCES_MAX];
    cn_mutex_lock(&l->lock);
    size_t nsources = l->nsources;
    memcpy(sources, l->sources, nsources * sizeof *sources);
    cn_mutex_unlock(&l->lock);
    struct pollfd fds[1 + CN_LOOP_SOURCES_MAX * CN_LOOP_FDS_PER_SOURCE];
    size_t first[CN_LOOP_SOURCES_MAX + 1];
    size_t n = 1;
    int timeout = -1;
    fds[0] = (struct pollfd){ .fd = l->wake_fd, .events = POLLIN };
    for (size_t i = 0; i < nsources; i++) {
        first[i] = n;
        n += sources[i].prepare(sources[i].ctx, fds + n, CN_LOOP_FDS_PER_SOURCE, &timeout);
    }
    first[nsources] = n;
    if (atomic_load_explicit(&l->stopping, memory_order_acquire)) return;
    int r = poll(fds, (nfds_t)n, timeout);
    if (r < 0 && errno != EINTR) return;
    if (fds[0].revents & POLLIN) drain_wake(l);
    for (size_t i = 0; i < nsources; i++) sources[i].handle(sources[i].ctx, fds + first[i], first[i + 1] - first[i]);
}

static void *loop_main(void *arg) {
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
