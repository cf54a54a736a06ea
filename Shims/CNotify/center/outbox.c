/*
 * outbox.c: a post on its way out. The center numbers its posts per name, whatever connection
 * carries them (PROTOCOL.md "Origins"), and signs them with its origin; the transport sends them
 * from the caller's thread.
 *
 * Locks: first the transport waits, with no lock held, until it has room (ops->ready). Then the
 * number is taken and the post handed to the transport under outbox.lock, which never waits (a
 * send only queues): posts of one name leave in the order of their numbers, so a receiver never
 * reads two threads' posts as a gap. A restricted post carries a credential bound to its number,
 * which the transport builds outside outbox.lock: such posts are numbered and sent in order under
 * restricted_lock, which only restricted posters take and which is not held while waiting.
 */
#include <stdlib.h>
#include <string.h>
#include "center.h"

void cn_outbox_init(cn_outbox *o) {
    cn_mutex_init(&o->lock, CN_LOCK_OUTBOX);
    cn_mutex_init(&o->restricted_lock, CN_LOCK_RESTRICTED);
}

void cn_outbox_free(cn_outbox *o) {
    cn_map_clear(&o->post_counts, NULL);
    cn_map_clear(&o->distributed_counts, NULL);
    cn_mutex_destroy(&o->lock);
    cn_mutex_destroy(&o->restricted_lock);
}

int cn_outbox_set_origin(cn_outbox *o) { return cn_origin_new(&o->origin); }

/* Past CN_MAP_BOUND names the counts are dropped, and with them the origin: numbers of one origin
 * only ever go up, so a receiver can read a repeated number as a repeated post. */
static void bound_counts_locked(cn_outbox *o) {
    CN_ASSERT_HELD(&o->lock);
    if (o->post_counts.count <= CN_MAP_BOUND && o->distributed_counts.count <= CN_MAP_BOUND) return;
    uint64_t fresh;
    if (cn_origin_new(&fresh) != 0) return; /* no randomness now: keep counting */
    cn_map_clear(&o->post_counts, NULL);
    cn_map_clear(&o->distributed_counts, NULL);
    o->previous_origin = o->origin;
    o->origin = fresh;
}

static uint32_t number_and_send(CNotify_center *c, const char *name, int restricted) {
    cn_outbox *o = &c->outbox;
    cn_mutex_lock(&o->lock);
    bound_counts_locked(o);
    cn_outgoing_post post = { name, cn_post_next_seq(&o->post_counts, name), o->origin, restricted };
    if (!restricted) { /* the send never waits: room was awaited before (cn_outbox_post) */
        uint32_t st = c->transport->ops->send(c->transport, &post);
        cn_mutex_unlock(&o->lock);
        return st;
    }
    cn_mutex_unlock(&o->lock);
    return c->transport->ops->send(c->transport, &post); /* under restricted_lock: in order */
}

uint32_t cn_outbox_post(CNotify_center *c, const char *name, int restricted) {
    uint32_t st = c->transport->ops->ready(c->transport);
    if (st != NOTIFY_STATUS_OK) return st;
    if (!restricted) return number_and_send(c, name, 0);
    cn_mutex_lock(&c->outbox.restricted_lock);
    st = number_and_send(c, name, 1);
    cn_mutex_unlock(&c->outbox.restricted_lock);
    return st;
}

/* A distributed post: numbered per name apart from posts, sent under outbox.lock like them (so
 * one name's numbers leave in order); `post` comes with name, object and userInfo. */
uint32_t cn_outbox_post_distributed(CNotify_center *c, const cn_outgoing_distributed *post) {
    uint32_t st = c->transport->ops->ready(c->transport);
    if (st != NOTIFY_STATUS_OK) return st;
    cn_outbox *o = &c->outbox;
    cn_mutex_lock(&o->lock);
    bound_counts_locked(o);
    cn_outgoing_distributed numbered = *post;
    numbered.seq = cn_post_next_seq(&o->distributed_counts, post->name);
    numbered.origin = o->origin;
    st = c->transport->ops->send_distributed(c->transport, &numbered);
    cn_mutex_unlock(&o->lock);
    return st;
}

int cn_outbox_is_ours(cn_outbox *o, uint64_t origin) {
    cn_mutex_lock(&o->lock);
    int ours = origin && (origin == o->origin || origin == o->previous_origin);
    cn_mutex_unlock(&o->lock);
    return ours;
}
