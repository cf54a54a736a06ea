/*
 * tokens.c: the tokens of Apple's notify(3) API. Each token is a center handler whose context is a
 * cn_token. Tokens are never reused (as on macOS), so a cancelled token stays invalid; they live
 * in the core's map (base/map.c), keyed by the token number, under tok_lock. notify_api.c holds
 * the public functions that make them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "api.h"

typedef struct cn_token {
    int token;
    uint64_t handler_id;
    _Atomic uint64_t posts;   /* bumped by the I/O thread */
    uint64_t seen;            /* value of posts at the last notify_check */
    int checked;              /* notify_check has run once */
    cn_token_kind kind;       /* what a post does besides counting (api.h) */
    CNotify_center *center;   /* whose bus the name is on: the default one for notify_* calls */
    char *name;
    _Atomic int refs;         /* the center's handler, plus each queued dispatch block */
    cn_mutex mu;       /* suspend state */
    int suspended;            /* notify_suspend count not yet resumed (a flag for code-running tokens) */
    int held;                 /* a post arrived while suspended */
} cn_token;

static cn_mutex tok_lock = CN_MUTEX_INITIALIZER(CN_LOCK_TOKENS);
static cn_map tokens;          /* token number -> live cn_token, under tok_lock */
static int next_token;

static cn_token *lookup_locked(int token) {
    CN_ASSERT_HELD(&tok_lock);
    char key[CN_ID_KEY_LEN];
    return cn_map_get(&tokens, cn_id_key((uint64_t)(uint32_t)token, key));
}

static int insert_locked(cn_token *t) {
    CN_ASSERT_HELD(&tok_lock);
    char key[CN_ID_KEY_LEN];
    return cn_map_put(&tokens, cn_id_key((uint64_t)(uint32_t)t->token, key), t);
}

static void erase_locked(int token) {
    CN_ASSERT_HELD(&tok_lock);
    char key[CN_ID_KEY_LEN];
    cn_map_remove(&tokens, cn_id_key((uint64_t)(uint32_t)token, key));
}

/* The live token numbered `token` (tok_lock held), or NULL with the error set. */
static cn_token *find_locked(int token) {
    cn_token *t = lookup_locked(token);
    if (!t) cn_set_error("token %d is not registered (never, or cancelled)", token);
    return t;
}

/* The kind's parts the token owns, freed with it (a pipe is released at cancel, shared by
 * NOTIFY_REUSE). */
static void free_kind(cn_token_kind *k) {
    switch (k->type) {
    case CN_TOKEN_TARGET: k->u.target.ops->free(k->u.target.target); break;
    case CN_TOKEN_HANDLER: if (k->u.handler.release) k->u.handler.release(k->u.handler.context); break;
    case CN_TOKEN_CHECK: case CN_TOKEN_FD: case CN_TOKEN_SIGNAL: break;
    }
}

static void unref_token(cn_token *t) {
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
    free_kind(&t->kind);
    cn_mutex_destroy(&t->mu);
    free(t->name);
    free(t);
}

static void release_token(void *context) { unref_token(context); }

/* Writes a descriptor token's pipe without raising SIGPIPE: a program that closed the descriptor
 * (instead of notify_cancel) would otherwise be killed by the library's write, on whatever thread
 * delivers. SIGPIPE is blocked on this thread for the write, and the one it raised (EPIPE) taken
 * back; on a thread that blocks SIGPIPE already, the write is left as it is (EPIPE). */
static void write_token_pipe(int fd, const void *buf, size_t len) {
    sigset_t pipe_only, old;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    ssize_t r = write(fd, buf, len); /* non-blocking: a full pipe drops, as Apple's */
    if (r < 0 && errno == EPIPE && !sigismember(&old, SIGPIPE)) {
        static const struct timespec now = { 0, 0 };
        while (sigtimedwait(&pipe_only, NULL, &now) < 0 && errno == EINTR) {}
    }
    if (!sigismember(&old, SIGPIPE)) pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* What a post does to a token: count it, then write the fd, raise the signal or queue the block. */
static void deliver(cn_token *t) {
    atomic_fetch_add_explicit(&t->posts, 1, memory_order_release);
    switch (t->kind.type) {
    case CN_TOKEN_CHECK: break;
    case CN_TOKEN_FD: {
        uint32_t be = htonl((uint32_t)t->token);
        write_token_pipe(t->kind.u.pipe->wfd, &be, sizeof be);
        break;
    }
    case CN_TOKEN_SIGNAL: kill(getpid(), t->kind.u.sig); break;
    case CN_TOKEN_HANDLER: t->kind.u.handler.fn(t->kind.u.handler.context, t->token); break;
    case CN_TOKEN_TARGET:
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed); /* the queued run's */
        t->kind.u.target.ops->fire(t->kind.u.target.target, t->token, release_token, t);
        break;
    }
}

/* Whether the token runs code on delivery: its suspension is a flag, as Libnotify's coalesced
 * dispatch registrations; the others count, as notifyd does (_notify_lib_suspend). */
static int runs_code(const cn_token *t) { return t->kind.type == CN_TOKEN_HANDLER || t->kind.type == CN_TOKEN_TARGET; }

/* Runs (on the I/O thread, or on the poster's thread for `self.` names) for each post. While
 * the token is suspended the post is only remembered: resume delivers it once. */
static void on_post(void *context, const char *name) {
    (void)name;
    cn_token *t = context;
    cn_mutex_lock(&t->mu);
    int hold = t->suspended > 0;
    if (hold) t->held = 1;
    cn_mutex_unlock(&t->mu);
    if (!hold) deliver(t);
}

/* What a token does on delivery, besides counting for notify_check. */
/* Registers a token on `c` (NULL: the default center). On failure the caller keeps what the
 * kind holds (pipe, dispatch target, handler context). */
uint32_t cn_token_add(CNotify_center *c, const char *name, cn_token_kind kind, int *out_token) {
    if (!c && !(c = cn_center_default())) return NOTIFY_STATUS_FAILED;
    uint32_t st = CNotify_validate_name(name); /* before out_token, as Libnotify checks them */
    if (st != NOTIFY_STATUS_OK) return st;
    CN_RETURN_IF_NULL(out_token, "out_token");
    CN_RETURN_IF_FORKED();
    cn_token *t = calloc(1, sizeof *t);
    if (!t || !(t->name = strdup(name))) { free(t); cn_set_error("out of memory"); return NOTIFY_STATUS_FAILED; }
    t->center = c;
    t->refs = 1;
    cn_mutex_init(&t->mu, CN_LOCK_TOKEN);
    cn_mutex_lock(&tok_lock);
    if (next_token == INT32_MAX) {
        cn_mutex_unlock(&tok_lock);
        cn_mutex_destroy(&t->mu);
        free(t->name);
        free(t);
        cn_set_error("this process has used every token number");
        return NOTIFY_STATUS_FAILED;
    }
    t->token = next_token++;
    cn_mutex_unlock(&tok_lock);
    uint64_t id = 0;
    /* Visible to on_post before the handler can run; freed with t, whose release it is. */
    t->kind = kind;
    cn_entry *e = calloc(1, sizeof *e);
    if (e && !(e->name = strdup(name))) { free(e); e = NULL; }
    if (e) *e = (cn_entry){ .name = e->name, .handler = on_post, .context = t, .release = release_token };
    st = e ? cn_center_add(c, e, &id) : NOTIFY_STATUS_FAILED;
    if (!e) cn_set_error("out of memory");
    if (st != NOTIFY_STATUS_OK) { /* cn_center_add freed nothing of ours on failure */
        cn_mutex_destroy(&t->mu);
        free(t->name);
        free(t);
        return st;
    }
    cn_mutex_lock(&tok_lock);
    t->handler_id = id;
    int ok = insert_locked(t) == 0;
    cn_mutex_unlock(&tok_lock);
    if (!ok) {
        /* The caller keeps what the kind holds on failure. */
        if (t->kind.type == CN_TOKEN_HANDLER) t->kind.u.handler.release = NULL;
        if (t->kind.type == CN_TOKEN_TARGET) t->kind.type = CN_TOKEN_CHECK;
        cn_center_remove(c, NULL, 0, id, NULL, NULL, 0);
        cn_set_error("out of memory");
        return NOTIFY_STATUS_FAILED;
    }
    *out_token = t->token;
    return NOTIFY_STATUS_OK;
}


/* A descriptor notify gave out, still open, for NOTIFY_REUSE: its pipe with one more reference. */
cn_pipe *cn_tokens_pipe_of(int fd) {
    cn_pipe *pipe = NULL;
    cn_mutex_lock(&tok_lock);
    for (size_t i = 0; i < tokens.nbuckets && !pipe; i++)
        for (cn_map_node *node = tokens.buckets[i]; node && !pipe; node = node->next) {
            cn_token *t = node->value;
            if (t->kind.type == CN_TOKEN_FD && t->kind.u.pipe->rfd == fd) pipe = t->kind.u.pipe;
        }
    if (pipe) pipe->refs++;
    cn_mutex_unlock(&tok_lock);
    return pipe;
}

void cn_pipe_release(cn_pipe *pipe) {
    cn_mutex_lock(&tok_lock);
    int last = --pipe->refs == 0;
    cn_mutex_unlock(&tok_lock);
    if (last) { close(pipe->rfd); close(pipe->wfd); free(pipe); }
}

uint32_t notify_check(int token, int *check) {
    cn_clear_error();
    CN_RETURN_IF_NULL(check, "check");
    CN_RETURN_IF_FORKED();
    cn_mutex_lock(&tok_lock);
    cn_token *t = find_locked(token);
    if (!t) {
        cn_mutex_unlock(&tok_lock);
        return NOTIFY_STATUS_INVALID_TOKEN;
    }
    uint64_t now = atomic_load_explicit(&t->posts, memory_order_acquire);
    *check = !t->checked || now != t->seen;
    t->checked = 1;
    t->seen = now;
    cn_mutex_unlock(&tok_lock);
    return NOTIFY_STATUS_OK;
}

uint32_t notify_cancel(int token) {
    cn_clear_error();
    CN_RETURN_IF_FORKED();
    cn_mutex_lock(&tok_lock);
    cn_token *t = find_locked(token);
    if (t) erase_locked(token);
    cn_mutex_unlock(&tok_lock);
    if (!t) return NOTIFY_STATUS_INVALID_TOKEN;
    cn_pipe *pipe = t->kind.type == CN_TOKEN_FD ? t->kind.u.pipe : NULL;
    /* Held until we are done with t: the center's release may drop its last reference below. */
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    /* After this returns no on_post runs for t, so the pipe can go. */
    cn_center_remove(t->center, NULL, 0, t->handler_id, NULL, NULL, 0);
    /* No block starts after this, and one running elsewhere is waited for (not one running here:
     * a handler may cancel its own token). */
    if (t->kind.type == CN_TOKEN_TARGET) t->kind.u.target.ops->cancel(t->kind.u.target.target);
    unref_token(t);
    if (pipe) cn_pipe_release(pipe);
    return NOTIFY_STATUS_OK;
}

bool notify_is_valid_token(int val) {
    cn_clear_error();
    cn_mutex_lock(&tok_lock);
    int valid = lookup_locked(val) != NULL;
    cn_mutex_unlock(&tok_lock);
    return valid;
}


uint32_t notify_suspend(int token) {
    cn_clear_error();
    CN_RETURN_IF_FORKED();
    cn_mutex_lock(&tok_lock);
    cn_token *t = find_locked(token);
    if (t) {
        cn_mutex_lock(&t->mu);
        if (runs_code(t)) t->suspended = 1;
        else t->suspended++;
        cn_mutex_unlock(&t->mu);
    }
    cn_mutex_unlock(&tok_lock);
    return t ? NOTIFY_STATUS_OK : NOTIFY_STATUS_INVALID_TOKEN;
}

uint32_t notify_resume(int token) {
    cn_clear_error();
    CN_RETURN_IF_FORKED();
    cn_mutex_lock(&tok_lock);
    cn_token *t = find_locked(token);
    if (!t) { cn_mutex_unlock(&tok_lock); return NOTIFY_STATUS_INVALID_TOKEN; }
    cn_mutex_lock(&t->mu);
    /* Not suspended: OK and nothing changes, as Libnotify's _internal_resume (a count at 0 stays 0). */
    if (t->suspended > 0) t->suspended--;
    int fire = t->suspended == 0 && t->held;
    if (fire) t->held = 0;
    cn_mutex_unlock(&t->mu);
    /* Held posts coalesce into one delivery, made here; the token stays alive meanwhile. */
    if (fire) atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    cn_mutex_unlock(&tok_lock);
    if (fire) { deliver(t); unref_token(t); }
    return NOTIFY_STATUS_OK;
}

/* The name and center of a live token, copied (it may be cancelled on another thread meanwhile;
 * centers outlive their tokens). */
void cn_tokens_cancel_for_center(CNotify_center *c) {
    /* Collected first: notify_cancel takes tok_lock itself. */
    int *doomed = NULL;
    size_t n = 0, cap = 0;
    cn_mutex_lock(&tok_lock);
    for (size_t i = 0; i < tokens.nbuckets; i++)
        for (cn_map_node *node = tokens.buckets[i]; node; node = node->next) {
        cn_token *t = node->value;
        if (t->center != c) continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            int *grown = realloc(doomed, ncap * sizeof *grown);
            if (!grown) break; /* out of memory: the rest stay, as before this rule */
            doomed = grown;
            cap = ncap;
        }
        doomed[n++] = t->token;
        }
    cn_mutex_unlock(&tok_lock);
    for (size_t i = 0; i < n; i++) notify_cancel(doomed[i]);
    free(doomed);
}


uint32_t cn_token_name(int token, char *out, size_t len, CNotify_center **center) {
    cn_mutex_lock(&tok_lock);
    cn_token *t = find_locked(token);
    if (t) { snprintf(out, len, "%s", t->name); *center = t->center; }
    cn_mutex_unlock(&tok_lock);
    return t ? NOTIFY_STATUS_OK : NOTIFY_STATUS_INVALID_TOKEN;
}
