/*
 * dispatch_api.c: notify_register_dispatch, a block run on a dispatch queue for each post. Built
 * by every compiler: the block is called through the Blocks ABI (clang's and Apple's published
 * layout: an object whose fourth field is the function to call, with the block itself as the
 * first argument), so gcc, which has no blocks, builds the same library with the same exports
 * as clang. Only a caller needs blocks (clang -fblocks) to make one.
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

/* What the library sees of a queue and of a block, whoever compiled it: opaque objects. With
 * blocks, notify.h declares the handler as a block type, which converts to this pointer. */
typedef struct dispatch_queue_s *cn_queue_ref;
typedef const struct cn_block_layout *cn_block_ref;

/* The Blocks ABI's block object (https://clang.llvm.org/docs/Block-ABI-Apple.html): `invoke` takes
 * the block and then the block's own arguments. notify_handler_t is void (^)(int). */
struct cn_block_layout {
    void *isa;
    int flags;
    int reserved;
    void (*invoke)(const struct cn_block_layout *block, int token);
    const void *descriptor;
};

/* The few functions used, with the ABI of libdispatch's and the blocks runtime's declarations. */
static struct {
    void (*async_f)(cn_queue_ref queue, void *context, void (*work)(void *));
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
    cn_queue_ref queue;        /* retained */
    cn_block_ref handler;      /* copied (_Block_copy) */
    cn_mutex mu;
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
    cn_mutex_lock(&d->mu);
    int run = !d->cancelled;
    if (run) d->running++;
    cn_mutex_unlock(&d->mu);
    if (run) {
        cn_dispatch_target *outer = tl_running;
        tl_running = d;
        d->handler->invoke(d->handler, job->token);
        tl_running = outer;
        cn_mutex_lock(&d->mu);
        d->running--;
        pthread_cond_broadcast(&d->idle);
        cn_mutex_unlock(&d->mu);
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
    cn_mutex_lock(&d->mu);
    d->cancelled = 1;
    while (d->running > (tl_running == d ? 1 : 0)) cn_cond_wait(&d->idle, &d->mu);
    cn_mutex_unlock(&d->mu);
}

static void target_free(void *target) {
    cn_dispatch_target *d = target;
    dispatch_fns.release(d->queue);
    dispatch_fns.block_release(d->handler);
    cn_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->idle);
    free(d);
}

static uint32_t register_dispatch(const char *name, int *out_token, cn_queue_ref queue, cn_block_ref handler) {
    cn_clear_error();
    /* Libnotify's order: the queue and the handler, then the name, then out_token. */
    if (!queue || !handler) {
        cn_set_error("the queue or the handler is NULL");
        return NOTIFY_STATUS_NULL_INPUT;
    }
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    CN_RETURN_IF_NULL(out_token, "out_token");
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
    if (!d->handler) {
        dispatch_fns.release(queue);
        free(d);
        cn_set_error("the blocks runtime could not copy the handler");
        return NOTIFY_STATUS_FAILED;
    }
    cn_mutex_init(&d->mu, CN_LOCK_DISPATCH);
    pthread_cond_init(&d->idle, NULL);
    static const cn_token_target_ops ops = { target_fire, target_cancel, target_free };
    st = cn_register_target(name, &ops, d, out_token);
    if (st != NOTIFY_STATUS_OK) target_free(d);
    return st;
}

/* The exported entry point, one symbol whoever compiles the library: with blocks, notify.h
 * declares it with libdispatch's queue type and a block type; without, only this file does, with
 * the same pointers as opaque types (what the Blocks ABI makes of them). */
#ifdef __BLOCKS__
uint32_t notify_register_dispatch(const char *name, int *out_token, dispatch_queue_t queue, notify_handler_t handler) {
    return register_dispatch(name, out_token, (cn_queue_ref)queue, (cn_block_ref)(const void *)handler);
}
#else
uint32_t notify_register_dispatch(const char *name, int *out_token, cn_queue_ref queue, cn_block_ref handler);
uint32_t notify_register_dispatch(const char *name, int *out_token, cn_queue_ref queue, cn_block_ref handler) {
    return register_dispatch(name, out_token, queue, handler);
}
#endif
