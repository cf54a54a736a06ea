/*
 * notify_api.c: Apple's notify(3) token API over the process-wide center. Each token is a center handler
 * whose context is a cn_token. Tokens are never reused (as on macOS), so a cancelled token
 * stays invalid; they live in an open-addressing table keyed by the token number.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"
#include "dispatch_target.h"

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
    int sig;                  /* signal registrations: the signal to raise, else 0 */
    cn_dispatch_target *dispatch; /* dispatch registrations (dispatch_api.c), else NULL */
    CNotify_token_handler handler; /* handler registrations (bindings): called on delivery */
    void *handler_context;
    CNotify_release handler_release;
    CNotify_center *center;   /* whose bus the name is on: the default one for notify_* calls */
    char *name;
    _Atomic int refs;         /* the center's handler, plus each queued dispatch block */
    pthread_mutex_t mu;       /* suspend state */
    int suspended;            /* notify_suspend count not yet resumed */
    int held;                 /* a post arrived while suspended */
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

/* The live token numbered `token` (tok_lock held), or NULL with the error set. */
static cn_token *find_locked(int token) {
    cn_token *t = lookup(token);
    if (!t) cn_set_error("token %d is not registered (never, or cancelled)", token);
    return t;
}

static void unref_token(cn_token *t) {
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
    if (t->dispatch) cn_dispatch_target_free(t->dispatch);
    if (t->handler_release) t->handler_release(t->handler_context);
    pthread_mutex_destroy(&t->mu);
    free(t->name);
    free(t);
}

static void release_token(void *context) { unref_token(context); }

/* What a post does to a token: count it, then write the fd, raise the signal or queue the block. */
static void deliver(cn_token *t) {
    atomic_fetch_add_explicit(&t->posts, 1, memory_order_release);
    if (t->pipe) {
        uint32_t be = htonl((uint32_t)t->token);
        ssize_t r = write(t->pipe->wfd, &be, sizeof be); /* non-blocking: a full pipe drops, as Apple's */
        (void)r;
    }
    if (t->sig) kill(getpid(), t->sig);
    if (t->handler) t->handler(t->handler_context, t->token);
    if (t->dispatch) {
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed); /* the queued block's */
        cn_dispatch_target_fire(t->dispatch, t->token, release_token, t);
    }
}

/* Runs (on the I/O thread, or on the poster's thread for `self.` names) for each post. While
 * the token is suspended the post is only remembered: resume delivers it once. */
static void on_post(void *context, const char *name) {
    (void)name;
    cn_token *t = context;
    pthread_mutex_lock(&t->mu);
    int hold = t->suspended > 0;
    if (hold) t->held = 1;
    pthread_mutex_unlock(&t->mu);
    if (!hold) deliver(t);
}

/* What a token does on delivery, besides counting for notify_check. */
typedef struct {
    cn_pipe *pipe;
    int sig;
    cn_dispatch_target *dispatch;
    CNotify_token_handler handler;
    void *context;
    CNotify_release release;
} cn_token_kind;

/* Registers a token on `c` (NULL: the default center). On failure the caller keeps what the
 * kind holds (pipe, dispatch target, handler context). */
static uint32_t add_token(CNotify_center *c, const char *name, cn_token_kind kind, int *out_token) {
    if (!c) c = CNotify_center_get_darwin_notify_center();
    CN_RETURN_IF_NULL(out_token, "out_token");
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    CN_RETURN_IF_FORKED();
    cn_token *t = calloc(1, sizeof *t);
    if (!t || !(t->name = strdup(name))) { free(t); cn_set_error("out of memory"); return NOTIFY_STATUS_FAILED; }
    t->pipe = kind.pipe;
    t->sig = kind.sig;
    t->center = c;
    t->refs = 1;
    pthread_mutex_init(&t->mu, NULL);
    pthread_mutex_lock(&tok_lock);
    if (next_token == INT32_MAX) {
        pthread_mutex_unlock(&tok_lock);
        pthread_mutex_destroy(&t->mu);
        free(t->name);
        free(t);
        cn_set_error("this process has used every token number");
        return NOTIFY_STATUS_FAILED;
    }
    t->token = next_token++;
    pthread_mutex_unlock(&tok_lock);
    uint64_t id = 0;
    /* Visible to on_post before the handler can run; freed with t, whose release it is. */
    t->dispatch = kind.dispatch;
    t->handler = kind.handler;
    t->handler_context = kind.context;
    t->handler_release = kind.release;
    st = CNotify_center_add_handler(c, name, on_post, t, release_token, &id);
    if (st != NOTIFY_STATUS_OK) { /* add_handler freed nothing of ours on failure */
        pthread_mutex_destroy(&t->mu);
        free(t->name);
        free(t);
        return st;
    }
    pthread_mutex_lock(&tok_lock);
    t->handler_id = id;
    int ok = insert(t) == 0;
    pthread_mutex_unlock(&tok_lock);
    if (!ok) {
        t->handler_release = NULL; /* the caller keeps the context on failure */
        CNotify_center_remove_handler(c, id);
        cn_set_error("out of memory");
        return NOTIFY_STATUS_FAILED;
    }
    *out_token = t->token;
    return NOTIFY_STATUS_OK;
}

uint32_t notify_post(const char *name) {
    cn_clear_error();
    return CNotify_center_post(CNotify_center_get_darwin_notify_center(), name);
}

uint32_t CNotify_center_register_check(CNotify_center *c, const char *name, int *out_token) {
    cn_clear_error();
    return add_token(c, name, (cn_token_kind){0}, out_token);
}

uint32_t notify_register_check(const char *name, int *out_token) {
    return CNotify_center_register_check(NULL, name, out_token);
}

uint32_t notify_register_plain(const char *name, int *out_token) {
    return CNotify_center_register_check(NULL, name, out_token);
}

uint32_t CNotify_center_register_signal(CNotify_center *c, const char *name, int sig, int *out_token) {
    cn_clear_error();
    if (sig <= 0 || sig > SIGRTMAX) {
        cn_set_error("%d is not a signal number (1 to %d)", sig, SIGRTMAX);
        return NOTIFY_STATUS_INVALID_SIGNAL;
    }
    return add_token(c, name, (cn_token_kind){ .sig = sig }, out_token);
}

uint32_t notify_register_signal(const char *name, int sig, int *out_token) {
    return CNotify_center_register_signal(NULL, name, sig, out_token);
}

uint32_t CNotify_center_register_handler(CNotify_center *c, const char *name, CNotify_token_handler handler,
                                         void *context, CNotify_release release, int *out_token) {
    cn_clear_error();
    CN_RETURN_IF_NULL(handler, "handler");
    return add_token(c, name, (cn_token_kind){ .handler = handler, .context = context, .release = release }, out_token);
}

uint32_t cn_register_dispatch_target(const char *name, cn_dispatch_target *target, int *out_token) {
    return add_token(NULL, name, (cn_token_kind){ .dispatch = target }, out_token);
}

uint32_t notify_register_file_descriptor(const char *name, int *notify_fd, int flags, int *out_token) {
    return CNotify_center_register_file_descriptor(NULL, name, notify_fd, flags, out_token);
}

uint32_t CNotify_center_register_file_descriptor(CNotify_center *c, const char *name, int *notify_fd, int flags,
                                                 int *out_token) {
    cn_clear_error();
    CN_RETURN_IF_NULL(notify_fd, "notify_fd");
    CN_RETURN_IF_NULL(out_token, "out_token");
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    CN_RETURN_IF_FORKED();
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
        if (!pipe) { close(fds[0]); close(fds[1]); cn_set_error("out of memory"); return NOTIFY_STATUS_FAILED; }
        pipe->rfd = fds[0]; pipe->wfd = fds[1]; pipe->refs = 1;
    }
    st = add_token(c, name, (cn_token_kind){ .pipe = pipe }, out_token);
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
    cn_clear_error();
    CN_RETURN_IF_NULL(check, "check");
    CN_RETURN_IF_FORKED();
    pthread_mutex_lock(&tok_lock);
    cn_token *t = find_locked(token);
    if (!t) {
        pthread_mutex_unlock(&tok_lock);
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
    CN_RETURN_IF_FORKED();
    pthread_mutex_lock(&tok_lock);
    cn_token *t = find_locked(token);
    if (t) erase(token);
    pthread_mutex_unlock(&tok_lock);
    if (!t) return NOTIFY_STATUS_INVALID_TOKEN;
    cn_pipe *pipe = t->pipe;
    /* Held until we are done with t: the center's release may drop its last reference below. */
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    /* After this returns no on_post runs for t, so the pipe can go. */
    CNotify_center_remove_handler(t->center, t->handler_id);
    /* No block starts after this, and one running elsewhere is waited for (not one running here:
     * a handler may cancel its own token). */
    if (t->dispatch) cn_dispatch_target_cancel(t->dispatch);
    unref_token(t);
    if (pipe) {
        pthread_mutex_lock(&tok_lock);
        int last = --pipe->refs == 0;
        pthread_mutex_unlock(&tok_lock);
        if (last) { close(pipe->rfd); close(pipe->wfd); free(pipe); }
    }
    return NOTIFY_STATUS_OK;
}

bool notify_is_valid_token(int val) {
    cn_clear_error();
    pthread_mutex_lock(&tok_lock);
    int valid = lookup(val) != NULL;
    pthread_mutex_unlock(&tok_lock);
    return valid;
}


uint32_t notify_suspend(int token) {
    cn_clear_error();
    CN_RETURN_IF_FORKED();
    pthread_mutex_lock(&tok_lock);
    cn_token *t = find_locked(token);
    if (t) {
        pthread_mutex_lock(&t->mu);
        t->suspended++;
        pthread_mutex_unlock(&t->mu);
    }
    pthread_mutex_unlock(&tok_lock);
    return t ? NOTIFY_STATUS_OK : NOTIFY_STATUS_INVALID_TOKEN;
}

uint32_t notify_resume(int token) {
    cn_clear_error();
    CN_RETURN_IF_FORKED();
    pthread_mutex_lock(&tok_lock);
    cn_token *t = find_locked(token);
    if (!t) { pthread_mutex_unlock(&tok_lock); return NOTIFY_STATUS_INVALID_TOKEN; }
    pthread_mutex_lock(&t->mu);
    if (t->suspended == 0) {
        pthread_mutex_unlock(&t->mu);
        pthread_mutex_unlock(&tok_lock);
        cn_set_error("token %d is not suspended (notify_resume without notify_suspend)", token);
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    int fire = --t->suspended == 0 && t->held;
    if (fire) t->held = 0;
    pthread_mutex_unlock(&t->mu);
    /* Held posts coalesce into one delivery, made here; the token stays alive meanwhile. */
    if (fire) atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&tok_lock);
    if (fire) { deliver(t); unref_token(t); }
    return NOTIFY_STATUS_OK;
}

/* The name and center of a live token, copied (it may be cancelled on another thread meanwhile;
 * centers outlive their tokens). */
static uint32_t token_name(int token, char *out, size_t len, CNotify_center **center) {
    pthread_mutex_lock(&tok_lock);
    cn_token *t = find_locked(token);
    if (t) { snprintf(out, len, "%s", t->name); *center = t->center; }
    pthread_mutex_unlock(&tok_lock);
    return t ? NOTIFY_STATUS_OK : NOTIFY_STATUS_INVALID_TOKEN;
}

uint32_t notify_set_state(int token, uint64_t state) {
    cn_clear_error();
    CN_RETURN_IF_FORKED();
    char name[CNOTIFY_NAME_MAX + 1];
    CNotify_center *c = NULL;
    uint32_t st = token_name(token, name, sizeof name, &c);
    if (st != NOTIFY_STATUS_OK) return st;
    return CNotify_center_set_state(c, name, state);
}

uint32_t notify_get_state(int token, uint64_t *state) {
    cn_clear_error();
    CN_RETURN_IF_NULL(state, "state");
    CN_RETURN_IF_FORKED();
    char name[CNOTIFY_NAME_MAX + 1];
    CNotify_center *c = NULL;
    uint32_t st = token_name(token, name, sizeof name, &c);
    if (st != NOTIFY_STATUS_OK) return st;
    return CNotify_center_get_state(c, name, state);
}

void cn_tokens_cancel_for_center(CNotify_center *c) {
    /* Collected first: notify_cancel takes tok_lock itself. */
    int *doomed = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&tok_lock);
    for (size_t i = 0; i < table_cap; i++) {
        cn_token *t = table[i];
        if (!t || t == TOMBSTONE || t->center != c) continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            int *grown = realloc(doomed, ncap * sizeof *grown);
            if (!grown) break; /* out of memory: the rest stay, as before this rule */
            doomed = grown;
            cap = ncap;
        }
        doomed[n++] = t->token;
    }
    pthread_mutex_unlock(&tok_lock);
    for (size_t i = 0; i < n; i++) notify_cancel(doomed[i]);
    free(doomed);
}
