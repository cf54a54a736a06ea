/*
 * bus_rules.c: match rules, the bus's form of a subscription. One exact rule per observed name
 * (on the name's bucket interface), one per namespace (arg0namespace), one per observed
 * distributed name (or one for every distributed name), and once per connection
 * the plain-interface rule that foreign posters use. When the bus refuses more rules
 * (LimitsExceeded), one catch-all rule for every post stands in, for the rest of the center's life.
 *
 * Which keys need a rule, and on which connection each was added, is the center's subscription
 * set (center/subscriptions.c); this file only speaks AddMatch and RemoveMatch, and keeps which
 * connection holds the plain-interface or catch-all rule (rules.lock, a leaf).
 */
#include <stdlib.h>
#include <string.h>
#include "bus.h"

/* AddMatch refused with LimitsExceeded (internal; never returned to callers). */
#define CN_STATUS_RULE_LIMIT 0x7fff0001u

struct cn_rule_request {
    DBusConnection *conn;       /* a reference */
    cn_awaited *call;           /* NULL on the loop thread (added there, blocking) or when not sent */
    uint64_t gen;
    cn_key_kind kind;
    char rule[];
};

void cn_rules_init(cn_bus *b) { cn_mutex_init(&b->rules.lock, CN_LOCK_RULES); }

void cn_rules_free(cn_bus *b) { cn_mutex_destroy(&b->rules.lock); }

static void rule_of(const char *key, cn_key_kind kind, char *rule, size_t len) {
    switch (kind) {
    case CN_KEY_NAME: cn_name_rule(key, rule, len); break;
    case CN_KEY_NAMESPACE: cn_namespace_rule(key, rule, len); break;
    case CN_KEY_DISTRIBUTED: cn_distributed_rule(key, rule, len); break;
    }
}

/* The plain-interface rule (or the catch-all standing in for everything) for connection `gen`,
 * sent with no reply awaited, before the first key's rule of that connection. */
static void ensure_base_rule(cn_bus *b, DBusConnection *conn, uint64_t gen) {
    cn_mutex_lock(&b->rules.lock);
    const char *rule = NULL;
    if (b->rules.catchall_wanted && b->rules.catchall_gen != gen) {
        rule = CN_CATCHALL_RULE; /* first, so the names past the bus's limit are covered */
        b->rules.catchall_gen = gen;
    } else if (!b->rules.catchall_wanted && b->rules.compat_gen != gen) {
        rule = CN_COMPAT_RULE;
        b->rules.compat_gen = gen;
    }
    if (rule) {
        cn_gate_enter(b);
        dbus_bus_add_match(conn, rule, NULL); /* NULL error: sent without waiting for a reply */
        cn_gate_leave(b);
    }
    cn_mutex_unlock(&b->rules.lock);
}

static DBusMessage *add_match_call(const char *rule) {
    DBusMessage *m = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS, DBUS_INTERFACE_DBUS, "AddMatch");
    if (m && !dbus_message_append_args(m, DBUS_TYPE_STRING, &rule, DBUS_TYPE_INVALID)) {
        dbus_message_unref(m);
        m = NULL;
    }
    return m;
}

/* Sends AddMatch from the calling thread; the loop thread reads the reply (bus_calls.c). */
static void send_add_match(cn_bus *b, cn_rule_request *r) {
    DBusMessage *m = add_match_call(r->rule);
    if (!m) return;
    r->call = cn_calls_begin(b, r->conn, m, 30000);
    dbus_message_unref(m);
}

cn_rule_request *cn_rules_add_begin(cn_bus *b, const char *key, cn_key_kind kind, uint64_t gen) {
    cn_link_view view;
    if (!cn_link_view_get(b, &view, 0)) return NULL; /* disconnected: the reconnection adds it */
    if (view.gen != gen) { dbus_connection_unref(view.conn); return NULL; } /* ditto */
    cn_rule_request *r = calloc(1, sizeof *r + CN_RULE_MAX + 64);
    if (!r) { dbus_connection_unref(view.conn); return NULL; }
    r->conn = view.conn;
    r->gen = gen;
    r->kind = kind;
    rule_of(key, kind, r->rule, CN_RULE_MAX + 64);
    ensure_base_rule(b, r->conn, gen);
    /* On the loop thread nobody else would read the reply: added blocking at finish. */
    if (!cn_loop_on_thread(b->loop)) send_add_match(b, r);
    return r;
}

static uint32_t refusal(const char *key, const char *name, const char *text) {
    if (!name || strcmp(name, DBUS_ERROR_DISCONNECTED) == 0 || strcmp(name, DBUS_ERROR_NO_REPLY) == 0)
        return NOTIFY_STATUS_OK; /* the connection went: the reconnection adds every rule */
    cn_set_error("the bus refused the match rule for '%s': %s (%s)", key, text ? text : "", name);
    return strcmp(name, DBUS_ERROR_LIMITS_EXCEEDED) == 0 ? CN_STATUS_RULE_LIMIT : NOTIFY_STATUS_FAILED;
}

/* The refusal in `reply` (unref'd here), or OK: a reply, or none because the connection went. */
static uint32_t answer_of(DBusMessage *reply, const char *key) {
    uint32_t st = NOTIFY_STATUS_OK;
    if (reply && dbus_message_get_type(reply) == DBUS_MESSAGE_TYPE_ERROR) {
        const char *text = NULL;
        dbus_message_get_args(reply, NULL, DBUS_TYPE_STRING, &text, DBUS_TYPE_INVALID);
        st = refusal(key, dbus_message_get_error_name(reply), text);
    }
    if (reply) dbus_message_unref(reply);
    return st;
}

/* On the loop thread, which alone reads: added blocking (bus_calls.c). */
static uint32_t add_blocking(cn_bus *b, cn_rule_request *r, const char *key) {
    DBusMessage *m = add_match_call(r->rule);
    if (!m) return NOTIFY_STATUS_OK; /* out of memory: as disconnected, the reconnection adds it */
    DBusError err;
    dbus_error_init(&err);
    DBusMessage *reply = cn_calls_block(b, r->conn, m, 30000, &err);
    dbus_message_unref(m);
    uint32_t st = reply ? answer_of(reply, key) : dbus_error_is_set(&err) ? refusal(key, err.name, err.message) : NOTIFY_STATUS_OK;
    dbus_error_free(&err);
    return st;
}

/* Waits for the reply with no lock held. The bus answers, or the call's 30 s deadline or its
 * connection's drop ends it; the 40 s only guards against a stopped loop. */
static uint32_t await_reply(cn_bus *b, cn_rule_request *r, const char *key) {
    if (!r->call) return NOTIFY_STATUS_OK; /* nothing was sent (out of memory): as disconnected */
    int over = 0;
    DBusMessage *reply = cn_calls_finish(b, r->call, r->gen, 40000, &over);
    r->call = NULL;
    if (!reply && !over) {
        cn_set_error("the bus did not answer AddMatch for '%s' within 40 s", key);
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    return answer_of(reply, key);
}

/* The bus allows no more rules on this connection: the one rule that selects every post, once
 * per connection; it stays, and is re-added first after a reconnection. */
static uint32_t use_catchall(cn_bus *b, cn_rule_request *r, const char *key) {
    cn_mutex_lock(&b->rules.lock);
    int need = b->rules.catchall_gen != r->gen;
    b->rules.catchall_wanted = 1;
    b->rules.catchall_gen = r->gen;
    cn_mutex_unlock(&b->rules.lock);
    if (!need) return NOTIFY_STATUS_OK;
    /* Make room: the catch-all also selects the plain interface, so that rule can go. The bus
     * handles our messages in order, so the removal is done before the addition. */
    cn_gate_enter(b);
    dbus_bus_remove_match(r->conn, CN_COMPAT_RULE, NULL);
    cn_gate_leave(b);
    cn_rule_request *all = calloc(1, sizeof *all + sizeof CN_CATCHALL_RULE);
    if (!all) { cn_set_error("out of memory"); return NOTIFY_STATUS_FAILED; }
    *all = (cn_rule_request){ .conn = r->conn, .gen = r->gen };
    memcpy(all->rule, CN_CATCHALL_RULE, sizeof CN_CATCHALL_RULE);
    uint32_t st;
    if (cn_loop_on_thread(b->loop)) st = add_blocking(b, all, key);
    else { send_add_match(b, all); st = await_reply(b, all, key); }
    free(all);
    if (st != NOTIFY_STATUS_OK) {
        cn_mutex_lock(&b->rules.lock);
        if (b->rules.catchall_gen == r->gen) b->rules.catchall_gen = 0;
        cn_mutex_unlock(&b->rules.lock);
        if (st == CN_STATUS_RULE_LIMIT) st = NOTIFY_STATUS_FAILED; /* not even one more rule */
    }
    return st;
}

uint32_t cn_rules_add_finish(cn_bus *b, cn_rule_request *r, const char *key) {
    if (!r) return NOTIFY_STATUS_OK;
    uint32_t st = cn_loop_on_thread(b->loop) ? add_blocking(b, r, key) : await_reply(b, r, key);
    if (st == CN_STATUS_RULE_LIMIT) st = use_catchall(b, r, key);
    dbus_connection_unref(r->conn);
    free(r);
    return st;
}

void cn_rules_add_now(cn_bus *b, const char *key, cn_key_kind kind, uint64_t gen) {
    cn_link_view view;
    if (!cn_link_view_get(b, &view, 0)) return;
    if (view.gen == gen) {
        char rule[CN_RULE_MAX + 64];
        rule_of(key, kind, rule, sizeof rule);
        ensure_base_rule(b, view.conn, gen);
        cn_gate_enter(b);
        dbus_bus_add_match(view.conn, rule, NULL); /* no reply awaited: thousands may follow */
        cn_gate_leave(b);
    }
    dbus_connection_unref(view.conn);
}

void cn_rules_remove(cn_bus *b, const char *key, cn_key_kind kind, uint64_t gen) {
    cn_link_view view;
    if (!cn_link_view_get(b, &view, 0)) return;
    if (view.gen == gen) { /* a rule of an older connection died with it */
        char rule[CN_RULE_MAX + 64];
        rule_of(key, kind, rule, sizeof rule);
        cn_gate_enter(b);
        dbus_bus_remove_match(view.conn, rule, NULL); /* NULL error: sent without waiting for a reply */
        cn_gate_leave(b);
    }
    dbus_connection_unref(view.conn);
}
