/*
 * bus_receive.c: a message the bus handed us (loop thread, from libdbus's dispatch). Is it a
 * Post (bus_wire.c), and may it be delivered: `self.` names never come from the bus, and a
 * `user.uid.N` name must come from uid N or root. The poster's library refuses to post a name it
 * may not, but anyone on a bus can emit any signal, so the receiver checks.
 *
 * Proof: the credential the post carries (base/credentials.c), which outlives the poster; for a
 * foreign poster with none (dbus-send as root), the sender's uid as the bus reports it, asked while
 * the sender is still connected and cached per unique name for this connection only (a restarted
 * daemon hands the same unique names to others: cn_receive_forget_senders).
 *
 * The bus is asked without waiting (bus_calls.c): the loop never waits on a call any sender can
 * trigger. Meanwhile every signal from that sender is held, in order, and handed through this
 * filter again once the answer came (or none did: then its posts that needed it are refused). At
 * most CN_HELD_MAX signals of one sender are held; past that one is dropped, counted as refused.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bus.h"

/* What the bus says of a sender: its uid and every group it gives (GetConnectionCredentials),
 * cached per unique name for this connection only. */
typedef struct {
    uid_t uid;
    size_t ngids;
    gid_t gids[];
} cn_sender_identity;

#define CN_HELD_MAX 1024

/* A sender asked about: while `asking`, its signals wait in `held`; then `id` is the answer
 * (NULL: the bus did not say, and its posts that need it are refused). */
typedef struct {
    int asking;
    cn_sender_identity *id;
    DBusMessage **held;
    size_t nheld, cap;
} cn_sender;

static void sender_free(void *value) {
    cn_sender *s = value;
    for (size_t i = 0; i < s->nheld; i++) dbus_message_unref(s->held[i]);
    free(s->held);
    free(s->id);
    free(s);
}

/* The identity in a GetConnectionCredentials reply (NULL: none, or not all of it). */
static cn_sender_identity *read_identity(DBusMessage *reply) {
    cn_sender_identity *id = NULL;
    DBusMessageIter it, dict;
    int have_uid = 0, short_of_memory = 0;
    uid_t uid = 0;
    gid_t *gids = NULL;
    size_t ngids = 0, cap = 0;
    if (reply && dbus_message_get_type(reply) == DBUS_MESSAGE_TYPE_METHOD_RETURN && dbus_message_iter_init(reply, &it) &&
        dbus_message_iter_get_arg_type(&it) == DBUS_TYPE_ARRAY) {
        dbus_message_iter_recurse(&it, &dict);
        for (; dbus_message_iter_get_arg_type(&dict) == DBUS_TYPE_DICT_ENTRY; dbus_message_iter_next(&dict)) {
            DBusMessageIter entry, variant;
            const char *key = NULL;
            dbus_message_iter_recurse(&dict, &entry);
            if (dbus_message_iter_get_arg_type(&entry) != DBUS_TYPE_STRING) continue;
            dbus_message_iter_get_basic(&entry, &key);
            if (!dbus_message_iter_next(&entry) || dbus_message_iter_get_arg_type(&entry) != DBUS_TYPE_VARIANT) continue;
            dbus_message_iter_recurse(&entry, &variant);
            int type = dbus_message_iter_get_arg_type(&variant);
            if (strcmp(key, "UnixUserID") == 0 && type == DBUS_TYPE_UINT32) {
                dbus_uint32_t v;
                dbus_message_iter_get_basic(&variant, &v);
                uid = (uid_t)v;
                have_uid = 1;
            } else if (strcmp(key, "UnixGroupIDs") == 0 && type == DBUS_TYPE_ARRAY &&
                       dbus_message_iter_get_element_type(&variant) == DBUS_TYPE_UINT32) {
                DBusMessageIter each; /* as many as the bus gives: the kernel caps them (NGROUPS_MAX) */
                dbus_message_iter_recurse(&variant, &each);
                for (; dbus_message_iter_get_arg_type(&each) == DBUS_TYPE_UINT32 && ngids < 65536; dbus_message_iter_next(&each)) {
                    if (ngids == cap) {
                        gid_t *more = realloc(gids, (cap ? 2 * cap : 32) * sizeof *gids);
                        if (!more) { short_of_memory = 1; break; }
                        gids = more;
                        cap = cap ? 2 * cap : 32;
                    }
                    dbus_uint32_t g;
                    dbus_message_iter_get_basic(&each, &g);
                    gids[ngids++] = (gid_t)g;
                }
            }
        }
    }
    /* Out of memory: not trusted (the groups not kept might be the one that allows it). */
    if (have_uid && !short_of_memory && (id = malloc(sizeof *id + ngids * sizeof *gids))) {
        id->uid = uid;
        id->ngids = ngids;
        if (ngids) memcpy(id->gids, gids, ngids * sizeof *gids);
    }
    free(gids);
    return id;
}

/* The connection dropped or the transport ends: what is still held is never judged (a drop
 * answered every question first, so nothing is held then). A question still out finds no sender. */
void cn_receive_forget_senders(cn_bus *b) {
    cn_map_clear(&b->sender_uids, sender_free);
    b->asking = 0;
}

static void count_held(const char *key, void *value, void *arg) {
    (void)key;
    cn_bus *b = arg;
    cn_sender *s = value;
    for (size_t i = 0; i < s->nheld; i++) b->events.post_rejected(b->events.ctx);
}

/* The bus's answer about sender `ctx` (its name, malloc'd): the signals it held go through the
 * filter again, in order; a sender the bus did not describe is forgotten after them (asked again
 * next time, as it may have been a bus that was busy). */
static void identity_done(cn_bus *b, void *ctx, DBusMessage *reply) {
    char *name = ctx;
    cn_sender *s = cn_map_get(&b->sender_uids, name);
    if (s && s->asking) {
        s->asking = 0;
        b->asking--;
        s->id = read_identity(reply);
        while (s->nheld) { /* one at a time: a replayed signal may not be held again (answered) */
            DBusMessage *m = s->held[0];
            memmove(s->held, s->held + 1, --s->nheld * sizeof *s->held);
            cn_receive_filter(b->loop_conn, m, b);
            dbus_message_unref(m);
        }
        if (!s->id) sender_free(cn_map_remove(&b->sender_uids, name));
    }
    free(name);
}

/* Whether `sender` (no credential) may post a name `g` guards: 1 or 0, or -1 when the bus is
 * being asked (the message is then held). */
static int sender_allowed(cn_bus *b, DBusConnection *conn, const char *sender, const cn_guard *g) {
    cn_sender *s = cn_map_get(&b->sender_uids, sender);
    if (!s) {
        if (b->sender_uids.count >= CN_MAP_BOUND) { /* bounded: what was held is refused */
            cn_map_each(&b->sender_uids, count_held, b);
            cn_receive_forget_senders(b);
        }
        DBusMessage *call = cn_calls_credentials(sender);
        char *name = strdup(sender);
        s = calloc(1, sizeof *s);
        int asked = conn && call && name && s && cn_map_put(&b->sender_uids, sender, s) == 0;
        if (asked && !cn_calls_send(b, conn, call, 5000, identity_done, name)) {
            cn_map_remove(&b->sender_uids, sender);
            asked = 0;
        }
        if (call) dbus_message_unref(call);
        if (!asked) { /* not asked (out of memory, disconnected): not trusted */
            free(name);
            free(s);
            return 0;
        }
        s->asking = 1;
        b->asking++;
        return -1;
    }
    if (s->asking) return -1;
    return s->id && cn_guard_allows(g, s->id->uid, s->id->gids, s->id->ngids);
}

/* Holds `msg` behind its sender's question to the bus; 0 when it could not (then dropped). */
static int hold(cn_bus *b, cn_sender *s, DBusMessage *msg) {
    if (s->nheld == CN_HELD_MAX) return 0;
    if (s->nheld == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        DBusMessage **more = realloc(s->held, cap * sizeof *more);
        if (!more) return 0;
        s->held = more;
        s->cap = cap;
    }
    s->held[s->nheld++] = dbus_message_ref(msg);
    return 1;
}

/* A signal from a sender the bus is being asked about waits behind its earlier ones. */
static int held_behind_ask(cn_bus *b, DBusMessage *msg) {
    const char *sender = dbus_message_get_sender(msg);
    cn_sender *s = sender && dbus_message_get_type(msg) == DBUS_MESSAGE_TYPE_SIGNAL ? cn_map_get(&b->sender_uids, sender) : NULL;
    if (!s || !s->asking) return 0;
    if (!hold(b, s, msg)) b->events.post_rejected(b->events.ctx);
    return 1;
}

/* A credential that does not prove it is a forgery: no second chance. Closes the credential.
 * 1 authentic, 0 not, -1 not known yet (the bus is being asked: the message is held). */
static int post_is_authentic(cn_bus *b, DBusConnection *conn, const char *sender, const cn_wire_post *post) {
    int fd = post->credential_fd;
    int authentic;
    cn_guard g;
    int guarded = cn_is_self_name(post->name) ? -1 : cn_name_guard(post->name, &g);
    char bus_id[CN_BUS_ID_LEN + 1];
    uid_t uid;
    gid_t gid;
    if (guarded == 0) authentic = 1;
    else if (guarded < 0 || !sender) authentic = 0;
    else if (fd >= 0) {
        /* The credential proves its creator's uid and gid, and no more: a poster allowed the name
         * only through a supplementary group is judged by the groups the bus gives, while it is
         * connected (as a post with no credential). */
        authentic = cn_link_bus_id(b, bus_id) && cn_credential_identity(fd, bus_id, sender, post->name, post->seq, &uid, &gid);
        if (authentic && !cn_guard_allows(&g, uid, &gid, 1)) authentic = sender_allowed(b, conn, sender, &g);
    } else authentic = sender_allowed(b, conn, sender, &g);
    if (fd >= 0) close(fd);
    return authentic;
}

/* A distributed post: anyone on the bus may send one (they carry no restricted names), so only its
 * shape and payload are checked (bus_distributed.c). */
static DBusHandlerResult receive_distributed(cn_bus *b, DBusMessage *msg) {
    cn_wire_distributed post;
    const char *why;
    switch (cn_distributed_parse(msg, &post, &why)) {
    case CN_WIRE_NOT_OURS: return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    case CN_WIRE_MALFORMED:
        b->events.distributed_dropped(b->events.ctx);
        return DBUS_HANDLER_RESULT_HANDLED;
    case CN_WIRE_POST: break;
    }
    cn_received_distributed up = { post.name, post.object, post.user_info, dbus_message_get_sender(msg),
                                   post.origin, post.seq, post.has_seq, post.options };
    b->events.distributed_arrived(b->events.ctx, &up);
    CNotify_plist_free(post.user_info);
    return DBUS_HANDLER_RESULT_HANDLED;
}

DBusHandlerResult cn_receive_filter(DBusConnection *conn, DBusMessage *msg, void *bus) {
    cn_bus *b = bus;
    if (cn_calls_receive(b, msg)) return DBUS_HANDLER_RESULT_HANDLED;
    if (b->asking && held_behind_ask(b, msg)) return DBUS_HANDLER_RESULT_HANDLED;
    if (cn_bus_fast_receive(b, msg)) return DBUS_HANDLER_RESULT_HANDLED;
    cn_wire_post post;
    switch (cn_wire_parse(msg, &post)) {
    case CN_WIRE_NOT_OURS: return receive_distributed(b, msg);
    case CN_WIRE_MALFORMED: return DBUS_HANDLER_RESULT_HANDLED; /* ignored, as the contract says */
    case CN_WIRE_POST: break;
    }
    const char *sender = dbus_message_get_sender(msg);
    int authentic = post_is_authentic(b, conn, sender, &post);
    if (authentic < 0) {
        cn_sender *s = cn_map_get(&b->sender_uids, sender);
        if (!s || !hold(b, s, msg)) b->events.post_rejected(b->events.ctx);
        return DBUS_HANDLER_RESULT_HANDLED;
    }
    if (!authentic) {
        b->events.post_rejected(b->events.ctx);
        return DBUS_HANDLER_RESULT_HANDLED;
    }
    cn_received_post up = { post.name, sender, post.origin, post.seq, post.has_seq, 0, post.count - 1 };
    b->events.post_arrived(b->events.ctx, &up);
    return DBUS_HANDLER_RESULT_HANDLED;
}
