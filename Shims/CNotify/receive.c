/*
 * receive.c: a message the bus handed us. Is it a Post (protocol.c parses it), and may it be
 * delivered: `self.` names never come from the bus, and a `user.uid.N` name must come from uid N
 * or root. Runs on the I/O thread, from libdbus's dispatch.
 */
#include <unistd.h>
#include "internal.h"

/* Whether a received post may be delivered: proven by the credential the post carries
 * (credentials.c), or, for a foreign poster with none, by asking the bus while the sender is
 * still connected (sender_check.c). A credential that does not prove it is a forgery: no second
 * chance. Closes the post's credential. */
static int post_is_authentic(CNotify_center *c, DBusConnection *conn, DBusMessage *msg, const cn_post *post) {
    int fd = post->credential_fd;
    int authentic;
    uid_t owner;
    int restricted = cn_is_self_name(post->name) ? -1 : cn_restricted_uid(post->name, &owner);
    const char *sender = dbus_message_get_sender(msg);
    if (restricted == 0) authentic = 1;
    else if (restricted < 0 || !sender) authentic = 0;
    else if (fd >= 0) authentic = c->link.bus_id[0] && cn_credential_verify(fd, c->link.bus_id, sender, post->name, post->seq, owner);
    else authentic = cn_sender_may_post(c, conn, sender, post->name);
    if (fd >= 0) close(fd);
    return authentic;
}

DBusHandlerResult cn_receive_filter(DBusConnection *conn, DBusMessage *msg, void *center) {
    CNotify_center *c = center;
    cn_post post;
    switch (cn_post_parse(msg, &post)) {
    case CN_POST_NOT_OURS: return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    case CN_POST_MALFORMED: return DBUS_HANDLER_RESULT_HANDLED; /* ignored, as the contract says */
    case CN_POST_OK: break;
    }
    if (!post_is_authentic(c, conn, msg, &post)) {
        atomic_fetch_add_explicit(&c->counters.rejected, 1, memory_order_relaxed);
        return DBUS_HANDLER_RESULT_HANDLED;
    }
    cn_deliver_post(c, post.name, dbus_message_get_sender(msg), post.has_seq, post.seq);
    return DBUS_HANDLER_RESULT_HANDLED;
}
