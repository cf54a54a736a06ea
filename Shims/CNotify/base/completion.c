/*
 * completion.c: a one-shot event shared by two parties, each holding a reference: a thread that
 * awaits a reply, and whoever delivers it (libdbus's pending call) or gives up on it (a dropped
 * connection). Whoever drops the last reference frees it, so neither side outlives the other's use.
 */
#include <stdlib.h>
#include "base.h"

struct cn_completion {
    cn_mutex lock;
    pthread_cond_t cond;
    int done, refs;
};

cn_completion *cn_completion_new(void) {
    cn_completion *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    cn_mutex_init(&w->lock, CN_LOCK_COMPLETION);
    pthread_cond_init(&w->cond, NULL);
    w->refs = 1;
    return w;
}

void cn_completion_ref(cn_completion *w) {
    cn_mutex_lock(&w->lock);
    w->refs++;
    cn_mutex_unlock(&w->lock);
}

void cn_completion_unref(cn_completion *w) {
    cn_mutex_lock(&w->lock);
    int last = --w->refs == 0;
    cn_mutex_unlock(&w->lock);
    if (!last) return;
    cn_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    free(w);
}

void cn_completion_signal(cn_completion *w) {
    cn_mutex_lock(&w->lock);
    w->done = 1;
    pthread_cond_broadcast(&w->cond);
    cn_mutex_unlock(&w->lock);
}

int cn_completion_wait(cn_completion *w, int (*done)(void *), void *arg, long timeout_ms) {
    struct timespec deadline = cn_deadline_in(timeout_ms);
    int timed_out = 0;
    cn_mutex_lock(&w->lock);
    while (!w->done && !(done && done(arg)) && !timed_out)
        timed_out = cn_cond_timedwait(&w->cond, &w->lock, &deadline) == ETIMEDOUT;
    int finished = w->done || (done && done(arg));
    cn_mutex_unlock(&w->lock);
    return finished;
}
