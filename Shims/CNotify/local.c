/*
 * `self.` names (Apple: "self." prefix): posted and observed within one process, never sent to
 * the bus, and usable with no bus at all. A post is queued and delivered by the posting thread,
 * under the center's dispatch lock, so callbacks still run one at a time. When callbacks of the
 * center are already running (on the I/O thread, or on a thread delivering `self.` posts), the
 * post stays queued and that thread delivers it once its current callback returns; a callback
 * that posts its own `self.` name therefore never recurses.
 */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

typedef struct cn_queued_post {
    struct cn_queued_post *next;
    char name[];
} cn_queued_post;

int cn_is_self_name(const char *name) { return name && strncmp(name, "self.", 5) == 0; }

uint32_t cn_local_post(CNotify_center *c, const char *name) {
    size_t len = strlen(name) + 1;
    cn_queued_post *p = malloc(sizeof *p + len);
    if (!p) { cn_set_error("out of memory"); return NOTIFY_STATUS_FAILED; }
    p->next = NULL;
    memcpy(p->name, name, len);
    pthread_mutex_lock(&c->local_lock);
    if (c->local_tail) c->local_tail->next = p; else c->local_head = p;
    c->local_tail = p;
    pthread_mutex_unlock(&c->local_lock);
    cn_local_kick(c);
    return NOTIFY_STATUS_OK;
}

static cn_queued_post *pop(CNotify_center *c) {
    pthread_mutex_lock(&c->local_lock);
    cn_queued_post *p = c->local_head;
    if (p && !(c->local_head = p->next)) c->local_tail = NULL;
    pthread_mutex_unlock(&c->local_lock);
    return p;
}

static int pending(CNotify_center *c) {
    pthread_mutex_lock(&c->local_lock);
    int any = c->local_head != NULL;
    pthread_mutex_unlock(&c->local_lock);
    return any;
}

void cn_local_kick(CNotify_center *c) {
    /* Whoever holds dispatch_lock calls this again after releasing it, so a post queued while
     * the trylock fails is never stranded. */
    while (pending(c)) {
        if (pthread_mutex_trylock(&c->dispatch_lock) != 0) return;
        for (cn_queued_post *p; (p = pop(c));) {
            cn_dispatch_post_locked(c, p->name, NULL, 0, 0);
            free(p);
        }
        pthread_mutex_unlock(&c->dispatch_lock);
    }
}

void cn_local_free(CNotify_center *c) {
    for (cn_queued_post *p; (p = pop(c));) free(p);
}
