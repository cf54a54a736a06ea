/*
 * launch_observe.c: the declared names, observed through the daemon's center. A handler runs on
 * the center's delivery thread, in the order the center delivers (each poster's order); it only
 * appends (label, name) to an inbox under `inbox_lock` (a leaf: nothing is called while it is
 * held) and writes the eventfd; the loop thread takes the inbox in that order and hands each post
 * to the jobs (`arrived`). The inbox holds at most ND_INBOX_MAX posts; past that a post is counted
 * as lost to the inbox and said (the loop thread takes them in microseconds; it never blocks on
 * a peer).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "launch.h"

#define ND_INBOX_MAX 65536

typedef struct {
    char *label, *name;
} post;

static CNotify_center *center;
static nd_arrived_fn arrived;
static nd_file wake_file;
static pthread_mutex_t inbox_lock = PTHREAD_MUTEX_INITIALIZER;
static post *inbox;
static size_t inbox_n, inbox_cap;
static uint64_t inbox_lost;

typedef struct watched {
    char *label;
    size_t n;
    uint64_t ids[ND_DECL_NAMES];
    struct watched *next;
} watched;
static watched *all;

static void release_label(void *ctx) { free(ctx); }

static void on_post(void *ctx, const char *name) {
    const char *label = ctx;
    char *l = strdup(label), *n = strdup(name);
    pthread_mutex_lock(&inbox_lock);
    int kept = 0;
    if (l && n && inbox_n < ND_INBOX_MAX) {
        if (inbox_n == inbox_cap) {
            size_t cap = inbox_cap ? inbox_cap * 2 : 64;
            post *p = realloc(inbox, cap * sizeof *p);
            if (p) { inbox = p; inbox_cap = cap; }
        }
        if (inbox_n < inbox_cap) {
            inbox[inbox_n++] = (post){ l, n };
            kept = 1;
        }
    }
    if (!kept) inbox_lost++;
    pthread_mutex_unlock(&inbox_lock);
    if (!kept) { free(l); free(n); }
    uint64_t one = 1;
    (void)!write(wake_file.fd, &one, sizeof one);
}

static void wake_ready(nd_file *f, uint32_t events) {
    (void)events;
    uint64_t v;
    (void)!read(f->fd, &v, sizeof v);
    for (;;) {
        pthread_mutex_lock(&inbox_lock);
        post *taken = inbox;
        size_t n = inbox_n;
        uint64_t lost = inbox_lost;
        inbox = NULL;
        inbox_n = inbox_cap = 0;
        inbox_lost = 0;
        pthread_mutex_unlock(&inbox_lock);
        if (lost) nd_say("launcher: %llu posts of declared names came faster than they could be queued and were lost",
                         (unsigned long long)lost);
        for (size_t i = 0; i < n; i++) {
            arrived(taken[i].label, taken[i].name);
            free(taken[i].label);
            free(taken[i].name);
        }
        free(taken);
        if (!n) break;
    }
}

int nd_observe_init(CNotify_center *c, nd_arrived_fn fn) {
    center = c;
    arrived = fn;
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return -1;
    wake_file = (nd_file){ fd, wake_ready };
    return nd_watch(&wake_file, 0);
}

int nd_observe_set(const char *label, size_t n, char *const *names, const int *is_namespace) {
    watched **link = &all;
    while (*link && strcmp((*link)->label, label) != 0) link = &(*link)->next;
    watched *w = *link;
    if (w) {
        for (size_t i = 0; i < w->n; i++) CNotify_center_remove_handler(center, w->ids[i]);
        *link = w->next;
        free(w->label);
        free(w);
    }
    if (!n) return 0;
    if (!(w = calloc(1, sizeof *w)) || !(w->label = strdup(label))) { free(w); return -1; }
    int failed = 0;
    for (size_t i = 0; i < n && i < ND_DECL_NAMES; i++) {
        char *ctx = strdup(label);
        uint32_t st = !ctx ? NOTIFY_STATUS_FAILED
                      : is_namespace[i] ? CNotify_center_add_namespace_handler(center, names[i], on_post, ctx, release_label, &w->ids[w->n])
                                        : CNotify_center_add_handler(center, names[i], on_post, ctx, release_label, &w->ids[w->n]);
        if (st == NOTIFY_STATUS_OK) {
            w->n++;
        } else {
            free(ctx);
            failed = 1;
            nd_say("launcher: %s: cannot observe %s: %s: %s", label, names[i], CNotify_status_string(st), CNotify_last_error());
        }
    }
    w->next = all;
    all = w;
    return failed ? -1 : 0;
}
