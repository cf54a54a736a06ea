/*
 * dispatch_api.c: notify_register_dispatch, a block run on a dispatch queue for each post. Built only when the
 * compiler has blocks (__BLOCKS__: clang -fblocks, as SwiftPM compiles C); with gcc the file
 * compiles to nothing, and notify.h does not declare notify_register_dispatch.
 *
 * libdispatch and the blocks runtime are found at registration time (dlsym), not linked: a caller
 * that hands us a queue and a block has both loaded already, and every other user of the library
 * (notifyutil -p above all) starts without them. They pull in libstdc++ and cost a command-line
 * post about half a millisecond of loading, a third of its whole run (BENCHMARKS.md, cli).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include "api.h"

#ifdef __BLOCKS__

/* The few functions used, with the ABI of libdispatch's and the blocks runtime's declarations. */
static struct {
    void (*async_f)(dispatch_queue_t queue, void *context, void (*work)(void *));
    void (*retain)(void *object);
    void (*release)(void *object);
    void *(*block_copy)(const void *block);
    void (*block_release)(const void *block);
} dispatch_fns;
static pthread_once_t dispatch_fns_once = PTHREAD_ONCE_INIT;
static int dispatch_fns_found;

static void find_dispatch_fns(void) {
    *(void **)&dispatch_fns.async_f = dlsym(RTLD_DEFAULT, "dispatch_async_f");
    *(void **)&dispatch_fns.retain = dlsym(RTLD_DEFAULT, "dispatch_retain");
    *(void **)&dispatch_fns.release = dlsym(RTLD_DEFAULT, "dispatch_release");
    *(void **)&dispatch_fns.block_copy = dlsym(RTLD_DEFAULT, "_Block_copy");
    *(void **)&dispatch_fns.block_release = dlsym(RTLD_DEFAULT, "_Block_release");
    dispatch_fns_found = dispatch_fns.async_f && dispatch_fns.retain && dispatch_fns.release &&
                         dispatch_fns.block_copy && dispatch_fns.block_release;
}

typedef struct cn_dispatch_target {
    dispatch_queue_t queue;    /* retained */
    notify_handler_t handler;  /* copied */
    pthread_mutex_t mu;
    pthread_cond_t idle;
    int cancelled;
    int running;               /* runs in progress, on any thread */
} cn_dispatch_target;

typedef struct {
    cn_dispatch_target *d;
    int token;
    void (*done)(void *);
    void *ctx;
} cn_dispatch_job;

static __thread cn_dispatch_target *tl_running; /* the target whose handler this thread runs */

static void run_job(void *p) {
    cn_dispatch_job *job = p;
    cn_dispatch_target *d = job->d;
    pthread_mutex_lock(&d->mu);
    int run = !d->cancelled;
    if (run) d->running++;
    pthread_mutex_unlock(&d->mu);
    if (run) {
        cn_dispatch_target *outer = tl_running;
        tl_running = d;
        d->handler(job->token);
        tl_running = outer;
        pthread_mutex_lock(&d->mu);
        d->running--;
        pthread_cond_broadcast(&d->idle);
        pthread_mutex_unlock(&d->mu);
    }
    job->done(job->ctx); /* may free d: the token's last reference */
    free(job);
}

static void target_fire(void *target, int token, void (*done)(void *), void *ctx) {
    cn_dispatch_target *d = target;
    cn_dispatch_job *job = malloc(sizeof *job);
    if (!job) { done(ctx); return; }
    *job = (cn_dispatch_job){ d, token, done, ctx };
    dispatch_fns.async_f(d->queue, job, run_job);
}

static void target_cancel(void *target) {
    cn_dispatch_target *d = target;
    pthread_mutex_lock(&d->mu);
    d->cancelled = 1;
    while (d->running > (tl_running == d ? 1 : 0)) pthread_cond_wait(&d->idle, &d->mu);
    pthread_mutex_unlock(&d->mu);
}

static void target_free(void *target) {
    cn_dispatch_target *d = target;
    dispatch_fns.release(d->queue);
    dispatch_fns.block_release(d->handler);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->idle);
    free(d);
}

uint32_t notify_register_dispatch(const char *name, int *out_token, dispatch_queue_t queue, notify_handler_t handler) {
    cn_clear_error();
    if (!out_token || !queue || !handler) {
        cn_set_error("out_token, queue or handler is NULL");
        return NOTIFY_STATUS_NULL_INPUT;
    }
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    pthread_once(&dispatch_fns_once, find_dispatch_fns);
    if (!dispatch_fns_found) {
        cn_set_error("libdispatch or the blocks runtime is not loaded in this process (link -ldispatch -lBlocksRuntime)");
        return NOTIFY_STATUS_FAILED;
    }
    cn_dispatch_target *d = calloc(1, sizeof *d);
    if (!d) { cn_set_error("out of memory"); return NOTIFY_STATUS_FAILED; }
    dispatch_fns.retain(queue);
    d->queue = queue;
    d->handler = dispatch_fns.block_copy(handler);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->idle, NULL);
    static const cn_token_target_ops ops = { target_fire, target_cancel, target_free };
    st = cn_register_target(name, &ops, d, out_token);
    if (st != NOTIFY_STATUS_OK) target_free(d);
    return st;
}

#endif
