/*
 * Apple's notify(3) token API over the process-wide center. Each token is a center handler
 * whose context is a cn_token. Tokens are never reused (as on macOS), so a cancelled token
 * stays invalid; they live in an open-addressing table keyed by the token number.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"

typedef struct cn_pipe {
    int rfd, wfd;
    int refs;                 /* tokens writing to this pipe (NOTIFY_REUSE shares it) */
} cn_pipe;

typedef struct cn_token {
    int token;
    uint64_t handler_id;
    _Atomic uint64_t posts;   /* bumped by the I/O thread */
    uint64_t seen;            /* value of posts at the last notify_check */
    int checked;              /* notify_check has run once */
    cn_pipe *pipe;            /* file-descriptor registrations */
} cn_token;

static pthread_mutex_t tok_lock = PTHREAD_MUTEX_INITIALIZER;
static cn_token **table;       /* slot: NULL empty, TOMBSTONE removed, else live */
static size_t table_cap, table_used;
static int next_token;
#define TOMBSTONE ((cn_token *)1)

static size_t slot_of(int token, size_t cap) { return ((uint32_t)token * 2654435761u) & (cap - 1); }

static cn_token *lookup(int token) {
    if (!table_cap) return NULL;
    for (size_t i = slot_of(token, table_cap), n = 0; n < table_cap; i = (i + 1) & (table_cap - 1), n++) {
        cn_token *t = table[i];
        if (!t) return NULL;
        if (t != TOMBSTONE && t->token == token) return t;
    }
    return NULL;
}

static int insert(cn_token *t) {
    if ((table_used + 1) * 2 > table_cap) {
        size_t cap = table_cap ? table_cap * 2 : 64;
        cn_token **n = calloc(cap, sizeof *n);
        if (!n) return -1;
        size_t used = 0;
        for (size_t i = 0; i < table_cap; i++)
            if (table[i] && table[i] != TOMBSTONE) {
                size_t j = slot_of(table[i]->token, cap);
                while (n[j]) j = (j + 1) & (cap - 1);
                n[j] = table[i];
                used++;
            }
        free(table);
        table = n; table_cap = cap; table_used = used;
    }
    size_t j = slot_of(t->token, table_cap);
    while (table[j] && table[j] != TOMBSTONE) j = (j + 1) & (table_cap - 1);
    if (!table[j]) table_used++;
    table[j] = t;
    return 0;
}

static void erase(int token) {
    for (size_t i = slot_of(token, table_cap), n = 0; table_cap && n < table_cap; i = (i + 1) & (table_cap - 1), n++) {
        if (!table[i]) return;
        if (table[i] != TOMBSTONE && table[i]->token == token) { table[i] = TOMBSTONE; return; }
    }
}

/* Runs on the I/O thread for each post of the token's name. */
static void on_post(void *context, const char *name) {
    (void)name;
    cn_token *t = context;
    atomic_fetch_add_explicit(&t->posts, 1, memory_order_release);
    if (t->pipe) {
        uint32_t be = htonl((uint32_t)t->token);
        ssize_t r = write(t->pipe->wfd, &be, sizeof be); /* non-blocking: a full pipe drops, as Apple's */
        (void)r;
    }
}

static void release_token(void *context) { free(context); }

static uint32_t add_token(const char *name, cn_pipe *pipe, int *out_token) {
    if (!out_token) { cn_set_error("out_token is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    cn_token *t = calloc(1, sizeof *t);
    if (!t) return NOTIFY_STATUS_FAILED;
    t->pipe = pipe;
    pthread_mutex_lock(&tok_lock);
    if (next_token == INT32_MAX) {
        pthread_mutex_unlock(&tok_lock);
        free(t);
        cn_set_error("this process has used every token number");
        return NOTIFY_STATUS_FAILED;
    }
    t->token = next_token++;
    pthread_mutex_unlock(&tok_lock);
    uint64_t id = 0;
    st = CNotify_center_add_handler(CNotify_center_get_darwin_notify_center(), name, on_post, t, release_token, &id);
    if (st != NOTIFY_STATUS_OK) return st; /* add_handler freed nothing of ours on failure */
    pthread_mutex_lock(&tok_lock);
    t->handler_id = id;
    int ok = insert(t) == 0;
    pthread_mutex_unlock(&tok_lock);
    if (!ok) {
        CNotify_center_remove_handler(CNotify_center_get_darwin_notify_center(), id);
        return NOTIFY_STATUS_FAILED;
    }
    *out_token = t->token;
    return NOTIFY_STATUS_OK;
}

uint32_t notify_post(const char *name) {
    return CNotify_center_post(CNotify_center_get_darwin_notify_center(), name);
}

uint32_t notify_register_check(const char *name, int *out_token) {
    cn_clear_error();
    return add_token(name, NULL, out_token);
}

uint32_t notify_register_file_descriptor(const char *name, int *notify_fd, int flags, int *out_token) {
    cn_clear_error();
    if (!notify_fd || !out_token) { cn_set_error("notify_fd or out_token is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    cn_pipe *pipe = NULL;
    pthread_mutex_lock(&tok_lock);
    if (flags & NOTIFY_REUSE) {
        /* Only a descriptor notify gave out, and that is still open, may be reused. */
        for (size_t i = 0; i < table_cap && !pipe; i++)
            if (table[i] && table[i] != TOMBSTONE && table[i]->pipe && table[i]->pipe->rfd == *notify_fd)
                pipe = table[i]->pipe;
        if (!pipe) {
            pthread_mutex_unlock(&tok_lock);
            cn_set_error("descriptor %d was not returned by notify_register_file_descriptor", *notify_fd);
            return NOTIFY_STATUS_INVALID_FILE;
        }
        pipe->refs++;
    }
    pthread_mutex_unlock(&tok_lock);
    if (!pipe) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) {
            cn_set_error("pipe: %s", strerror(errno));
            return NOTIFY_STATUS_FAILED;
        }
        fcntl(fds[1], F_SETFL, O_NONBLOCK);
        pipe = calloc(1, sizeof *pipe);
        if (!pipe) { close(fds[0]); close(fds[1]); return NOTIFY_STATUS_FAILED; }
        pipe->rfd = fds[0]; pipe->wfd = fds[1]; pipe->refs = 1;
    }
    st = add_token(name, pipe, out_token);
    if (st != NOTIFY_STATUS_OK) {
        pthread_mutex_lock(&tok_lock);
        int last = --pipe->refs == 0;
        pthread_mutex_unlock(&tok_lock);
        if (last) { close(pipe->rfd); close(pipe->wfd); free(pipe); }
        return st;
    }
    *notify_fd = pipe->rfd;
    return NOTIFY_STATUS_OK;
}

uint32_t notify_check(int token, int *check) {
    if (!check) { cn_set_error("check is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    if (cn_fork_check() != NOTIFY_STATUS_OK) return NOTIFY_STATUS_OPT_DISABLE;
    pthread_mutex_lock(&tok_lock);
    cn_token *t = lookup(token);
    if (!t) {
        pthread_mutex_unlock(&tok_lock);
        cn_set_error("token %d is not registered (never, or cancelled)", token);
        return NOTIFY_STATUS_INVALID_TOKEN;
    }
    uint64_t now = atomic_load_explicit(&t->posts, memory_order_acquire);
    *check = !t->checked || now != t->seen;
    t->checked = 1;
    t->seen = now;
    pthread_mutex_unlock(&tok_lock);
    return NOTIFY_STATUS_OK;
}

uint32_t notify_cancel(int token) {
    cn_clear_error();
    if (cn_fork_check() != NOTIFY_STATUS_OK) return NOTIFY_STATUS_OPT_DISABLE;
    pthread_mutex_lock(&tok_lock);
    cn_token *t = lookup(token);
    if (t) erase(token);
    pthread_mutex_unlock(&tok_lock);
    if (!t) {
        cn_set_error("token %d is not registered (never, or cancelled)", token);
        return NOTIFY_STATUS_INVALID_TOKEN;
    }
    cn_pipe *pipe = t->pipe;
    /* After this returns no on_post runs for t, so the pipe can go; t itself is freed by release. */
    CNotify_center_remove_handler(CNotify_center_get_darwin_notify_center(), t->handler_id);
    if (pipe) {
        pthread_mutex_lock(&tok_lock);
        int last = --pipe->refs == 0;
        pthread_mutex_unlock(&tok_lock);
        if (last) { close(pipe->rfd); close(pipe->wfd); free(pipe); }
    }
    return NOTIFY_STATUS_OK;
}

bool notify_is_valid_token(int val) {
    pthread_mutex_lock(&tok_lock);
    int valid = lookup(val) != NULL;
    pthread_mutex_unlock(&tok_lock);
    return valid;
}
