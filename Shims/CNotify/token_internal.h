/* Between the token API (notify_api.c) and dispatch registrations (dispatch_api.c), which exist
 * only when the compiler has blocks. */
#ifndef CNOTIFY_TOKEN_INTERNAL_H
#define CNOTIFY_TOKEN_INTERNAL_H

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
