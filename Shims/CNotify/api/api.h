/*
 * api/api.h: the top layer: the public entry points of include/ (notify.h, darwin_notify.h,
 * darwin_notify_distributed.h). Each begins the same way (base/base.h: error cleared, NULL checks,
 * fork check) and then asks the center layer. Order of the files: tokens, notify_api, dispatch_api, center_api, distributed_api, launch_api.
 */
#ifndef CNOTIFY_API_H
#define CNOTIFY_API_H

#include "../center/center.h"

/* What a token does on each post besides counting, when it is more than a pipe, a signal or a
 * handler: a table the registering file hands in (dispatch_api.c: a block on a queue), so the
 * token file names none of its functions. */
typedef struct cn_token_target_ops {
    /* Queues one run for `token`; `done(ctx)` runs after it, or instead once cancelled. */
    void (*fire)(void *target, int token, void (*done)(void *), void *ctx);
    /* No run starts after this returns; one on another thread is waited for, not one on this. */
    void (*cancel)(void *target);
    void (*free)(void *target);
} cn_token_target_ops;

/* ---- tokens.c ---- */
/* A pipe of file-descriptor registrations: written on each post, shared by NOTIFY_REUSE. */
typedef struct cn_pipe {
    int rfd, wfd;
    int refs;                 /* tokens writing to this pipe (under tokens.c's lock) */
} cn_pipe;
typedef struct {
    cn_pipe *pipe;
    int sig;
    const cn_token_target_ops *target_ops;
    void *target;
    CNotify_token_handler handler;
    void *context;
    CNotify_release release;
} cn_token_kind;

/* Registers a token on `c` (NULL: the default center). On failure the caller keeps what the
 * kind holds (pipe, target, handler context). */
uint32_t cn_token_add(CNotify_center *c, const char *name, cn_token_kind kind, int *out_token);
cn_pipe *cn_tokens_pipe_of(int fd);
void cn_pipe_release(cn_pipe *pipe);
/* The name and center of a live token, copied (it may be cancelled on another thread meanwhile;
 * centers outlive their tokens). */
uint32_t cn_token_name(int token, char *out, size_t len, CNotify_center **center);

/* Registers a token on the default center whose posts fire `target`; on failure the caller frees it. */
uint32_t cn_register_target(const char *name, const cn_token_target_ops *ops, void *target, int *out_token);
/* Cancels every token registered on `c` (its destroy): they answer NOTIFY_STATUS_INVALID_TOKEN
 * afterwards, instead of pointing at a freed center. */
void cn_tokens_cancel_for_center(CNotify_center *c);

#endif
