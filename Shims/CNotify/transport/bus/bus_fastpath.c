/*
 * bus_fastpath.c: what the fast path (fast_*.c) needs of the bus, with libdbus's types kept here:
 * the Endpoint, Query and Sync signals out and in, the departures of connections
 * (NameOwnerChanged), and what the bus says a connection is (GetConnectionCredentials).
 * docs/PROTOCOL.md "Fast path" is the contract. Incoming ones are handed up through the hooks
 * table the fast path installed (cn_bus_fast_set_hooks), from libdbus's dispatch on the loop
 * thread; the hooks only note them, and the fast path acts in its own part of the loop.
 */
#include <stdlib.h>
#include <string.h>
#include "bus.h"

void cn_bus_fast_set_hooks(cn_bus *b, const cn_bus_fast_hooks *hooks) { b->fast = *hooks; }

static int is_own(cn_bus *b, const char *sender) {
    char own[256];
    return cn_bus_fast_unique_name(b, own) && strcmp(own, sender) == 0;
}

/* The Endpoint's optional fourth and fifth arguments, `as namespaces` and `u features`: 1 with
 * none, or with at most CN_FAST_NAMESPACES_MAX valid namespaces and then, if any, the features;
 * 0 for anything else (refused). */
static int read_namespaces(DBusMessage *msg, const char **out, size_t *n, uint32_t *features) {
    DBusMessageIter it, list;
    *n = 0;
    *features = 0;
    if (!dbus_message_iter_init(msg, &it) || !dbus_message_iter_next(&it) || !dbus_message_iter_next(&it)
        || !dbus_message_iter_next(&it))
        return 1; /* token, buckets, version: nothing after them */
    if (dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_ARRAY || dbus_message_iter_get_element_type(&it) != DBUS_TYPE_STRING)
        return 0;
    dbus_message_iter_recurse(&it, &list);
    for (; dbus_message_iter_get_arg_type(&list) == DBUS_TYPE_STRING; dbus_message_iter_next(&list)) {
        const char *ns;
        dbus_message_iter_get_basic(&list, &ns);
        if (*n == CN_FAST_NAMESPACES_MAX || cn_validate_namespace(ns) != NOTIFY_STATUS_OK) return 0;
        out[(*n)++] = ns;
    }
    if (!dbus_message_iter_next(&it)) return 1; /* no features: frames alone */
    if (dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_UINT32) return 0;
    dbus_uint32_t bits;
    dbus_message_iter_get_basic(&it, &bits);
    *features = bits; /* bits we do not know are another version's: ignored */
    return 1;
}

int cn_bus_fast_receive(cn_bus *b, DBusMessage *msg) {
    if (!b->fast.ctx || dbus_message_get_type(msg) != DBUS_MESSAGE_TYPE_SIGNAL) return 0;
    const char *sender = dbus_message_get_sender(msg);
    if (!sender) return 0;
    if (dbus_message_is_signal(msg, DBUS_INTERFACE_DBUS, "NameOwnerChanged")) {
        /* Only the bus itself says who left; anyone may emit a signal of that name. */
        const char *name, *old_owner, *new_owner;
        if (strcmp(sender, DBUS_SERVICE_DBUS) != 0
            || !dbus_message_get_args(msg, NULL, DBUS_TYPE_STRING, &name, DBUS_TYPE_STRING, &old_owner, DBUS_TYPE_STRING,
                                      &new_owner, DBUS_TYPE_INVALID))
            return 0;
        if (name[0] == ':' && new_owner[0] == '\0') b->fast.name_lost(b->fast.ctx, name);
        return 0; /* others may want it too */
    }
    if (!dbus_message_has_interface(msg, CN_FAST_INTERFACE) || !dbus_message_has_path(msg, CN_PATH)) return 0;
    if (is_own(b, sender)) return 1; /* our own announcement or query, back from the bus */
    if (dbus_message_has_member(msg, "Endpoint")) {
        const char *token;
        const unsigned char *bitmap;
        int len = 0;
        dbus_uint32_t version = 0;
        const char *namespaces[CN_FAST_NAMESPACES_MAX];
        size_t n = 0;
        uint32_t features = 0;
        if (!dbus_message_get_args(msg, NULL, DBUS_TYPE_STRING, &token, DBUS_TYPE_ARRAY, DBUS_TYPE_BYTE, &bitmap, &len,
                                   DBUS_TYPE_UINT32, &version, DBUS_TYPE_INVALID)
            || version != CN_FAST_WIRE_VERSION || len != CN_FAST_BITMAP_BYTES)
            return 1; /* not one we can read: that observer has the bus copies */
        if (read_namespaces(msg, namespaces, &n, &features))
            b->fast.endpoint(b->fast.ctx, sender, token, bitmap, namespaces, n, features);
        else b->fast.refused(b->fast.ctx);
    } else if (dbus_message_has_member(msg, "Query")) {
        b->fast.query(b->fast.ctx, sender);
    } else if (dbus_message_has_member(msg, "Sync")) {
        /* Only a Sync sent to us: a broadcast one is anybody's word about nobody. */
        dbus_uint64_t token = 0;
        const char *dest = dbus_message_get_destination(msg);
        if (dest && is_own(b, dest) && dbus_message_get_args(msg, NULL, DBUS_TYPE_UINT64, &token, DBUS_TYPE_INVALID))
            b->fast.sync(b->fast.ctx, sender, token);
    }
    return 1;
}

int cn_bus_fast_unique_name(cn_bus *b, char out[256]) {
    cn_link_view view;
    if (!cn_link_view_get(b, &view, 1)) return 0;
    dbus_connection_unref(view.conn);
    memcpy(out, view.unique_name, 256);
    return out[0] != '\0';
}

/* Sends a signal of the fast path's interface, never waiting (loop thread: not from the filter). */
static uint32_t send_signal(cn_bus *b, DBusMessage *m, const char *destination) {
    if (!m) return NOTIFY_STATUS_FAILED;
    cn_link_view view;
    if (!cn_link_view_get(b, &view, 0)) {
        dbus_message_unref(m);
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    int sent = (!destination || dbus_message_set_destination(m, destination));
    if (sent) {
        cn_gate_send_enter(b);
        sent = dbus_connection_send(view.conn, m, NULL);
        cn_gate_send_leave(b, view.conn);
    }
    dbus_message_unref(m);
    dbus_connection_unref(view.conn);
    return sent ? NOTIFY_STATUS_OK : NOTIFY_STATUS_FAILED;
}

uint32_t cn_bus_fast_announce(cn_bus *b, const char *token, const unsigned char *bitmap, const char *const *namespaces,
                              size_t n, uint32_t features, const char *destination) {
    DBusMessage *m = dbus_message_new_signal(CN_PATH, CN_FAST_INTERFACE, "Endpoint");
    dbus_uint32_t version = CN_FAST_WIRE_VERSION;
    int ok = m && dbus_message_append_args(m, DBUS_TYPE_STRING, &token, DBUS_TYPE_ARRAY, DBUS_TYPE_BYTE, &bitmap,
                                           CN_FAST_BITMAP_BYTES, DBUS_TYPE_UINT32, &version, DBUS_TYPE_INVALID);
    if (ok && (n || features)) /* none, and no features: the argument is left out, as a 0.5.0 observer sends it */
        ok = dbus_message_append_args(m, DBUS_TYPE_ARRAY, DBUS_TYPE_STRING, &namespaces, (int)n, DBUS_TYPE_INVALID);
    dbus_uint32_t bits = features;
    if (ok && features) ok = dbus_message_append_args(m, DBUS_TYPE_UINT32, &bits, DBUS_TYPE_INVALID);
    if (m && !ok) {
        dbus_message_unref(m);
        m = NULL;
    }
    return send_signal(b, m, destination);
}

/* A signal of the fast path's interface whose body is one basic value; NULL when out of memory. */
static DBusMessage *one_value_signal(const char *member, int type, const void *value) {
    DBusMessage *m = dbus_message_new_signal(CN_PATH, CN_FAST_INTERFACE, member);
    if (m && !dbus_message_append_args(m, type, value, DBUS_TYPE_INVALID)) {
        dbus_message_unref(m);
        m = NULL;
    }
    return m;
}

#define ENDPOINT_RULE "type='signal',path='" CN_PATH "',interface='" CN_FAST_INTERFACE "',member='Endpoint'"

uint32_t cn_bus_fast_query(cn_bus *b) {
    /* Only a center that posts hears announcements: with every process hearing every other's,
     * n observers starting would cost the bus n^2 messages. Added before the Query on the same
     * connection, the rule is in place before any answer. */
    cn_link_view view;
    if (cn_link_view_get(b, &view, 0)) {
        if (b->fast_endpoint_rule_gen != view.gen) {
            cn_gate_enter(b);
            dbus_bus_add_match(view.conn, ENDPOINT_RULE, NULL);
            cn_gate_leave(b);
            b->fast_endpoint_rule_gen = view.gen;
        }
        dbus_connection_unref(view.conn);
    }
    dbus_uint32_t version = CN_FAST_WIRE_VERSION;
    return send_signal(b, one_value_signal("Query", DBUS_TYPE_UINT32, &version), NULL);
}

uint32_t cn_bus_fast_sync(cn_bus *b, const char *destination, uint64_t token) {
    dbus_uint64_t t = token;
    return send_signal(b, one_value_signal("Sync", DBUS_TYPE_UINT64, &t), destination);
}

void cn_bus_fast_rules(cn_bus *b, uint64_t gen) {
    static const char *const rules[] = {
        "type='signal',path='" CN_PATH "',interface='" CN_FAST_INTERFACE "',member='Query'",
        /* Connections that left (arg2, the new owner, empty): a peer's endpoint goes with it. */
        "type='signal',sender='" DBUS_SERVICE_DBUS "',interface='" DBUS_INTERFACE_DBUS "',member='NameOwnerChanged',arg2=''",
    };
    cn_link_view view;
    if (!cn_link_view_get(b, &view, 0)) return;
    if (view.gen == gen) {
        cn_gate_enter(b);
        for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) dbus_bus_add_match(view.conn, rules[i], NULL);
        cn_gate_leave(b);
    }
    dbus_connection_unref(view.conn);
}

/* ProcessID and UnixUserID of a GetConnectionCredentials reply: 1 if both are there. */
static int read_credentials(DBusMessage *reply, pid_t *pid, uid_t *uid) {
    int have_pid = 0, have_uid = 0;
    DBusMessageIter it, dict;
    if (!reply || dbus_message_get_type(reply) != DBUS_MESSAGE_TYPE_METHOD_RETURN || !dbus_message_iter_init(reply, &it)
        || dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_ARRAY)
        return 0;
    dbus_message_iter_recurse(&it, &dict);
    for (; dbus_message_iter_get_arg_type(&dict) == DBUS_TYPE_DICT_ENTRY; dbus_message_iter_next(&dict)) {
        DBusMessageIter entry, variant;
        const char *key;
        dbus_message_iter_recurse(&dict, &entry);
        if (dbus_message_iter_get_arg_type(&entry) != DBUS_TYPE_STRING) continue;
        dbus_message_iter_get_basic(&entry, &key);
        dbus_message_iter_next(&entry);
        if (dbus_message_iter_get_arg_type(&entry) != DBUS_TYPE_VARIANT) continue;
        dbus_message_iter_recurse(&entry, &variant);
        if (dbus_message_iter_get_arg_type(&variant) != DBUS_TYPE_UINT32) continue;
        dbus_uint32_t v;
        dbus_message_iter_get_basic(&variant, &v);
        if (strcmp(key, "ProcessID") == 0) { *pid = (pid_t)v; have_pid = 1; }
        if (strcmp(key, "UnixUserID") == 0) { *uid = (uid_t)v; have_uid = 1; }
    }
    return have_pid && have_uid;
}

typedef struct credentials_ask {
    uint64_t request;
} credentials_ask;

/* The bus's answer (bus_calls.c), on the loop thread; NULL when none came. */
static void credentials_done(cn_bus *b, void *data, DBusMessage *reply) {
    credentials_ask *ask = data;
    pid_t pid = 0;
    uid_t uid = 0;
    int ok = read_credentials(reply, &pid, &uid);
    if (b->fast.credentials) b->fast.credentials(b->fast.ctx, ask->request, ok, pid, uid);
    free(ask);
}

uint32_t cn_bus_fast_ask_credentials(cn_bus *b, const char *unique, uint64_t request) {
    cn_link_view view;
    if (!cn_link_view_get(b, &view, 0)) return NOTIFY_STATUS_SERVER_NOT_FOUND;
    DBusMessage *call = cn_calls_credentials(unique);
    credentials_ask *ask = malloc(sizeof *ask);
    uint32_t st = NOTIFY_STATUS_FAILED;
    if (call && ask) {
        ask->request = request;
        if (cn_calls_send(b, view.conn, call, 5000, credentials_done, ask)) {
            ask = NULL; /* credentials_done's now */
            st = NOTIFY_STATUS_OK;
        }
    }
    if (call) dbus_message_unref(call);
    free(ask);
    dbus_connection_unref(view.conn);
    return st;
}

