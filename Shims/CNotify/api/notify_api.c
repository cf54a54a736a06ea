/*
 * notify_api.c: Apple's notify(3) registrations and posts, over the process-wide center (or, for
 * the CNotify_center_register_* forms, a center of the caller's). The tokens they make are
 * tokens.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "api.h"

uint32_t notify_post(const char *name) {
    cn_clear_error();
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    CN_RETURN_IF_FORKED();
    CNotify_center *c = cn_center_default();
    return c ? cn_center_post(c, name) : NOTIFY_STATUS_FAILED;
}

uint32_t CNotify_center_register_check(CNotify_center *c, const char *name, int *out_token) {
    cn_clear_error();
    return cn_token_add(c, name, (cn_token_kind){ .type = CN_TOKEN_CHECK }, out_token);
}

uint32_t notify_register_check(const char *name, int *out_token) {
    return CNotify_center_register_check(NULL, name, out_token);
}

uint32_t notify_register_plain(const char *name, int *out_token) {
    return CNotify_center_register_check(NULL, name, out_token);
}

/* Apple's delivery by Mach message: there are no Mach ports on Linux (notify.h). The name is
 * checked as for every registration; then a clean failure, so that code with a port path takes its
 * other one. */
uint32_t notify_register_mach_port(const char *name, mach_port_t *notify_port, int flags, int *out_token) {
    (void)flags;
    cn_clear_error();
    /* Libnotify's order and answers: the name, then a NULL port (INVALID_PORT). */
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    if (!notify_port) { cn_set_error("notify_port is NULL"); return NOTIFY_STATUS_INVALID_PORT; }
    CN_RETURN_IF_NULL(out_token, "out_token");
    *out_token = NOTIFY_TOKEN_INVALID;
    cn_set_error("there are no Mach ports on Linux: notify_register_dispatch or notify_register_file_descriptor "
                 "deliver '%s' instead", name);
    return NOTIFY_STATUS_INVALID_PORT;
}

uint32_t CNotify_center_register_signal(CNotify_center *c, const char *name, int sig, int *out_token) {
    cn_clear_error();
    uint32_t st = CNotify_validate_name(name); /* the name first, as Libnotify */
    if (st != NOTIFY_STATUS_OK) return st;
    /* Libnotify-327 registers any number and never raises a bad one; the status Apple's notify(3)
     * documents for it is returned instead. */
    if (sig <= 0 || sig > SIGRTMAX) {
        cn_set_error("%d is not a signal number (1 to %d)", sig, SIGRTMAX);
        return NOTIFY_STATUS_INVALID_SIGNAL;
    }
    return cn_token_add(c, name, (cn_token_kind){ .type = CN_TOKEN_SIGNAL, .u.sig = sig }, out_token);
}

uint32_t notify_register_signal(const char *name, int sig, int *out_token) {
    return CNotify_center_register_signal(NULL, name, sig, out_token);
}

uint32_t CNotify_center_register_handler(CNotify_center *c, const char *name, CNotify_token_handler handler,
                                         void *context, CNotify_release release, int *out_token) {
    cn_clear_error();
    CN_RETURN_IF_NULL(handler, "handler");
    return cn_token_add(c, name, (cn_token_kind){ .type = CN_TOKEN_HANDLER, .u.handler = { handler, context, release } }, out_token);
}

uint32_t cn_register_target(const char *name, const cn_token_target_ops *ops, void *target, int *out_token) {
    return cn_token_add(NULL, name, (cn_token_kind){ .type = CN_TOKEN_TARGET, .u.target = { ops, target } }, out_token);
}

uint32_t notify_register_file_descriptor(const char *name, int *notify_fd, int flags, int *out_token) {
    return CNotify_center_register_file_descriptor(NULL, name, notify_fd, flags, out_token);
}

uint32_t CNotify_center_register_file_descriptor(CNotify_center *c, const char *name, int *notify_fd, int flags,
                                                 int *out_token) {
    cn_clear_error();
    /* Libnotify's order and answers: the name, then a NULL notify_fd (INVALID_FILE). */
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    if (!notify_fd) { cn_set_error("notify_fd is NULL"); return NOTIFY_STATUS_INVALID_FILE; }
    CN_RETURN_IF_NULL(out_token, "out_token");
    CN_RETURN_IF_FORKED();
    cn_pipe *pipe = NULL;
    if (flags & NOTIFY_REUSE) {
        /* Only a descriptor notify gave out, and that is still open, may be reused. */
        if (!(pipe = cn_tokens_pipe_of(*notify_fd))) {
            cn_set_error("descriptor %d was not returned by notify_register_file_descriptor", *notify_fd);
            return NOTIFY_STATUS_INVALID_FILE;
        }
    }
    if (!pipe) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) {
            cn_set_error("pipe: %s", strerror(errno));
            return NOTIFY_STATUS_FAILED;
        }
        fcntl(fds[1], F_SETFL, O_NONBLOCK);
        pipe = calloc(1, sizeof *pipe);
        if (!pipe) { close(fds[0]); close(fds[1]); cn_set_error("out of memory"); return NOTIFY_STATUS_FAILED; }
        pipe->rfd = fds[0]; pipe->wfd = fds[1]; pipe->refs = 1;
    }
    st = cn_token_add(c, name, (cn_token_kind){ .type = CN_TOKEN_FD, .u.pipe = pipe }, out_token);
    if (st != NOTIFY_STATUS_OK) {
        cn_pipe_release(pipe);
        return st;
    }
    *notify_fd = pipe->rfd;
    return NOTIFY_STATUS_OK;
}

/* The state of a token's name, on the token's center: set when `set`, else read into *value. */
static uint32_t token_state(int token, uint64_t *value, int set) {
    CN_RETURN_IF_FORKED();
    char name[CNOTIFY_NAME_MAX + 1];
    CNotify_center *c = NULL;
    uint32_t st = cn_token_name(token, name, sizeof name, &c);
    if (st != NOTIFY_STATUS_OK) return st;
    return set ? cn_state_set(c, name, *value) : cn_state_get(c, name, value);
}

uint32_t notify_set_state(int token, uint64_t state) {
    cn_clear_error();
    return token_state(token, &state, 1);
}

uint32_t notify_get_state(int token, uint64_t *state) {
    cn_clear_error();
    CN_RETURN_IF_NULL(state, "state");
    return token_state(token, state, 0);
}

