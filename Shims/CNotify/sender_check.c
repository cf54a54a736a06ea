/*
 * sender_check.c: the receiving half of the user.uid.N rule. The poster's library refuses to post a name it may
 * not (cn_may_write), but anyone on a bus can emit any signal with dbus-send, so receivers check
 * the sender's uid as the bus daemon reports it, and drop forged posts.
 *
 * Posts from our library carry a credential instead (credentials.c), which outlives the poster;
 * this lookup serves foreign posters (dbus-send as root), and only while they are connected. Its
 * cache is keyed by unique name and so belongs to one connection: cn_sender_cache_reset.
 */
#include <stdint.h>
#include <string.h>
#include "internal.h"

static int ask_uid(DBusConnection *conn, const char *sender, uid_t *uid) {
    DBusMessage *call = dbus_message_new_method_call("org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                     "org.freedesktop.DBus", "GetConnectionUnixUser");
    if (!call) return 0;
    int ok = 0;
    if (dbus_message_append_args(call, DBUS_TYPE_STRING, &sender, DBUS_TYPE_INVALID)) {
        DBusError err;
        dbus_error_init(&err);
        /* Blocking on the I/O thread: libdbus reads the socket itself meanwhile and queues what
         * else arrives. Once per sender: the answer is cached. */
        DBusMessage *reply = dbus_connection_send_with_reply_and_block(conn, call, 5000, &err);
        dbus_uint32_t value = 0;
        if (reply && dbus_message_get_args(reply, &err, DBUS_TYPE_UINT32, &value, DBUS_TYPE_INVALID)) {
            *uid = (uid_t)value;
            ok = 1;
        }
        if (reply) dbus_message_unref(reply);
        dbus_error_free(&err);
    }
    dbus_message_unref(call);
    return ok;
}

void cn_sender_cache_reset(CNotify_center *c) { cn_map_clear(&c->senders.uids, NULL); }

int cn_sender_may_post(CNotify_center *c, DBusConnection *conn, const char *sender, const char *name) {
    uid_t owner;
    int restricted = cn_restricted_uid(name, &owner);
    if (restricted == 0) return 1;
    if (restricted < 0 || !sender) return 0; /* no uid may post it */
    if (c->senders.uids.count > CN_MAP_BOUND) cn_map_clear(&c->senders.uids, NULL); /* bounded */
    void **slot = cn_map_upsert(&c->senders.uids, sender);
    if (!slot) return 0;
    uid_t uid;
    if (*slot) {
        uid = (uid_t)((uintptr_t)*slot - 1);
    } else {
        if (!ask_uid(conn, sender, &uid)) {
            cn_map_remove(&c->senders.uids, sender);
            return 0; /* unknown sender (gone already): not trusted */
        }
        *slot = (void *)((uintptr_t)uid + 1);
    }
    return uid == owner || uid == 0;
}
