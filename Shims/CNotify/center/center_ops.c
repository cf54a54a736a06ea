/*
 * center_ops.c: what the public API asks of a center, its arguments already checked (api/):
 * post, register, remove, and what the post being delivered is.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "center.h"

uint32_t cn_center_post(CNotify_center *c, const char *name) {
    uint32_t st;
    if (cn_is_self_name(name)) return cn_deliver_self(c, name); /* never leaves the process */
    int restricted;
    if ((st = cn_may_write(name, &restricted)) != NOTIFY_STATUS_OK) return st; /* user.uid.N: N or root */
    if ((st = cn_center_start(c)) != NOTIFY_STATUS_OK) return st;
    return cn_outbox_post(c, name, restricted);
}

uint32_t cn_center_add(CNotify_center *c, cn_entry *e, uint64_t *out_id) {
    int is_namespace = e->is_namespace;
    char key[CNOTIFY_NAME_MAX + 1];
    snprintf(key, sizeof key, "%s", e->name); /* e is the registry's once added */
    int self_only = cn_is_self_key(key, is_namespace); /* delivered in the process: no transport */
    uint32_t st = cn_fork_check();
    /* notifyd's READ check of a registration (a namespace is not checked: its names are many). */
    if (st == NOTIFY_STATUS_OK && !self_only && !is_namespace) st = cn_may_read(key);
    if (st == NOTIFY_STATUS_OK && !self_only) st = cn_center_start(c);
    if (st != NOTIFY_STATUS_OK) {
        free(e->name);
        free(e);
        return st;
    }
    uint64_t id = 0;
    if ((st = cn_registry_add(&c->registry, e, &id)) != NOTIFY_STATUS_OK) return st;
    if (out_id) *out_id = id;
    if (self_only) return NOTIFY_STATUS_OK;
    st = cn_subs_retain(&c->subs, c->transport, key, is_namespace ? CN_KEY_NAMESPACE : CN_KEY_NAME, !cn_loop_on_thread(&c->loop));
    if (st != NOTIFY_STATUS_OK) {
        /* A registration whose subscription failed leaves its context with the caller. */
        char saved[CN_RULE_MAX];
        snprintf(saved, sizeof saved, "%s", CNotify_last_error());
        cn_registry_disown(&c->registry, id);
        cn_center_remove(c, NULL, 0, id, NULL, NULL, 0);
        cn_set_error("%s", saved);
    }
    return st;
}

static int match_id(const cn_entry *e, const void *unused, uint64_t id) {
    (void)unused;
    return e->id == id;
}

size_t cn_center_remove(CNotify_center *c, const char *name, int is_namespace, uint64_t id, cn_entry_pred pred,
                        const void *a, uint64_t b) {
    cn_removal rm;
    cn_registry_remove(&c->registry, name, is_namespace, id, id ? match_id : pred, a, id ? id : b, cn_in_delivery(c), &rm);
    for (size_t i = 0; i < rm.nkeys; i++)
        if (!cn_is_self_key(rm.keys[i].key, rm.keys[i].is_namespace))
            cn_subs_release(&c->subs, c->transport, rm.keys[i].key, rm.keys[i].is_namespace ? CN_KEY_NAMESPACE : CN_KEY_NAME, rm.keys[i].n);
    cn_removal_free(&rm);
    return rm.removed;
}

uint32_t cn_center_current_post(CNotify_center *c, CNotify_post_info *out) {
    const cn_received_post *post = cn_delivering_post(c);
    if (!post) {
        cn_set_error("no post of this center is being delivered on this thread");
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    out->sender = post->sender;
    out->sequence = post->seq;
    out->has_sequence = post->has_seq;
    /* Ours whatever connection carried it: by origin, which survives reconnections. */
    out->from_this_center = !post->sender || cn_outbox_is_ours(&c->outbox, post->origin);
    return NOTIFY_STATUS_OK;
}

/* ---- distributed notifications ---- */

uint32_t cn_center_post_distributed(CNotify_center *c, const char *name, const char *object, const CNotify_plist *user_info,
                                    uint32_t options) {
    uint32_t st = cn_center_start(c);
    if (st != NOTIFY_STATUS_OK) return st;
    cn_outgoing_distributed post = { name, object, user_info, 0, 0, options };
    return cn_outbox_post_distributed(c, &post);
}

uint32_t cn_center_add_distributed(CNotify_center *c, cn_entry *e, uint64_t *out_id) {
    char key[CNOTIFY_NAME_MAX + 1];
    snprintf(key, sizeof key, "%s", e->name); /* e is the registry's once added */
    uint32_t st = cn_fork_check();
    if (st == NOTIFY_STATUS_OK) st = cn_center_start(c);
    if (st != NOTIFY_STATUS_OK) {
        free(e->name);
        free(e->object);
        free(e);
        return st;
    }
    uint64_t id = 0;
    if ((st = cn_registry_add(&c->distributed, e, &id)) != NOTIFY_STATUS_OK) return st;
    st = cn_subs_retain(&c->subs, c->transport, key, CN_KEY_DISTRIBUTED, !cn_loop_on_thread(&c->loop));
    if (st != NOTIFY_STATUS_OK) {
        char saved[CN_RULE_MAX];
        snprintf(saved, sizeof saved, "%s", CNotify_last_error());
        cn_registry_disown(&c->distributed, id); /* its context stays with the caller */
        cn_center_remove_distributed(c, id);
        cn_set_error("%s", saved);
        return st;
    }
    *out_id = id;
    return NOTIFY_STATUS_OK;
}

uint32_t cn_center_remove_distributed(CNotify_center *c, uint64_t id) {
    cn_removal rm;
    cn_registry_remove(&c->distributed, NULL, 0, id, match_id, NULL, id, cn_in_delivery(c), &rm);
    for (size_t i = 0; i < rm.nkeys; i++)
        cn_subs_release(&c->subs, c->transport, rm.keys[i].key, CN_KEY_DISTRIBUTED, rm.keys[i].n);
    cn_removal_free(&rm);
    if (rm.removed) return NOTIFY_STATUS_OK;
    cn_set_error("no distributed handler with id %llu on this center", (unsigned long long)id);
    return NOTIFY_STATUS_INVALID_REQUEST;
}
