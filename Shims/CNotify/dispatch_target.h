/* dispatch_target.h: the cn_dispatch_target_* functions, between the token API (notify_api.c) and
 * dispatch registrations (dispatch_api.c), which exist only when the compiler has blocks. Its own
 * header, not internal.h: it names libdispatch's types' owner only, and only those two files use it. */
#ifndef CNOTIFY_DISPATCH_TARGET_H
#define CNOTIFY_DISPATCH_TARGET_H

#include <stdint.h>

typedef struct cn_dispatch_target cn_dispatch_target;

/* Queues one run of the handler with `token` on the target's queue; `done(ctx)` runs after it
 * (or instead of it, once the target is cancelled). */
void cn_dispatch_target_fire(cn_dispatch_target *d, int token, void (*done)(void *), void *ctx);
/* No run starts after this returns; a run on another thread is waited for, one on this thread
 * (the handler cancelling its own token) is not. */
void cn_dispatch_target_cancel(cn_dispatch_target *d);
void cn_dispatch_target_free(cn_dispatch_target *d);
/* Registers a token whose posts fire `target` (notify_api.c). On failure the caller frees it. */
uint32_t cn_register_dispatch_target(const char *name, cn_dispatch_target *target, int *out_token);

#endif
