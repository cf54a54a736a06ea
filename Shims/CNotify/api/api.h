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
/* What a token does on each post besides counting (Libnotify's NOTIFY_TYPE_*): one kind, and
 * tokens.c's one switch on it (`deliver`, with what freeing, cancelling and suspending it mean). */
typedef enum cn_token_type {
    CN_TOKEN_CHECK = 0,         /* notify_register_check: counted, read by notify_check */
    CN_TOKEN_FD,                /* notify_register_file_descriptor: the token written to a pipe */
    CN_TOKEN_SIGNAL,            /* notify_register_signal: a signal raised in this process */
    CN_TOKEN_HANDLER,           /* CNotify_register_handler: a function called on delivery */
    CN_TOKEN_TARGET,            /* notify_register_dispatch: a target's table (dispatch_api.c) */
} cn_token_type;
typedef struct cn_token_kind {
    cn_token_type type;
    union {
        cn_pipe *pipe;                                  /* CN_TOKEN_FD */
        int sig;                                        /* CN_TOKEN_SIGNAL */
        struct {
            CNotify_token_handler fn;
            void *context;
            CNotify_release release;
        } handler;                                      /* CN_TOKEN_HANDLER */
        struct {
            const cn_token_target_ops *ops;
            void *target;
        } target;                                       /* CN_TOKEN_TARGET */
    } u;
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
