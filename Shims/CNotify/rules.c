/*
 * rules.c: match rules. one exact rule per observed name (on the name's bucket interface) plus one rule
 * per connection for the plain interface that foreign posters use. A registration returns only
 * once its rule is in the bus, so posts made by others after it returns are delivered.
 *
 * Each name's slot records the connection generation its rule was added on, under registry.lock, so
 * a rule is added exactly once per connection however registrations and reconnects interleave.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "internal.h"

void cn_rules_init(CNotify_center *c) { c->rules.waiters = NULL; }

/* Internal: AddMatch refused with LimitsExceeded (never returned to callers). */
#define CN_STATUS_RULE_LIMIT 0x7fff0001u

/* A waiter for one AddMatch reply, shared by the registering thread and libdbus (two refs).
 * It is also listed in the center (c->rules.waiters, under link.lock) so that dropping its connection
 * releases it: libdbus does not always complete the pending calls of a connection that broke
 * while they were being sent. */
typedef struct cn_waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done, refs;
    uint64_t gen;
    struct cn_waiter *next;
} cn_waiter;

static void waiter_wake(cn_waiter *w) {
    pthread_mutex_lock(&w->lock);
    w->done = 1;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

void cn_rules_release_waiters_locked(CNotify_center *c, uint64_t gen) {
    CN_ASSERT_HELD(&c->link.lock);
    for (cn_waiter *w = c->rules.waiters; w; w = w->next)
        if (w->gen == gen) waiter_wake(w);
}

static void list_waiter(CNotify_center *c, cn_waiter *w, uint64_t gen) {
    pthread_mutex_lock(&c->link.lock);
    w->gen = gen;
    w->next = c->rules.waiters;
    c->rules.waiters = w;
    int dropped = c->link.gen != gen || !c->link.connected; /* dropped before we were listed */
    pthread_mutex_unlock(&c->link.lock);
    if (dropped) waiter_wake(w);
}

static void unlist_waiter(CNotify_center *c, cn_waiter *w) {
    pthread_mutex_lock(&c->link.lock);
    for (cn_waiter **p = &c->rules.waiters; *p; p = &(*p)->next)
        if (*p == w) { *p = w->next; break; }
    pthread_mutex_unlock(&c->link.lock);
}

static void waiter_notify(DBusPendingCall *pc, void *data) {
    (void)pc;
    waiter_wake(data);
}

static void waiter_unref(void *data) {
    cn_waiter *w = data;
    pthread_mutex_lock(&w->lock);
    int last = --w->refs == 0;
    pthread_mutex_unlock(&w->lock);
    if (last) {
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->cond);
        free(w);
    }
}

typedef struct cn_request {
    DBusPendingCall *call;
    cn_waiter *waiter;
} cn_request;

/* Sends AddMatch from the calling thread; the I/O thread reads the reply and wakes the waiter.
 * A request with no call means nothing was sent (disconnected): the reconnect adds the rule. */
static cn_request send_add_match(DBusConnection *conn, const char *rule) {
    cn_request r = { NULL, NULL };
    DBusMessage *m = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS, DBUS_INTERFACE_DBUS, "AddMatch");
    cn_waiter *w = calloc(1, sizeof *w);
    if (m && w && dbus_message_append_args(m, DBUS_TYPE_STRING, &rule, DBUS_TYPE_INVALID) &&
        dbus_connection_send_with_reply(conn, m, &r.call, 30000) && r.call) {
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->cond, NULL);
        w->refs = 2;
        if (dbus_pending_call_set_notify(r.call, waiter_notify, w, waiter_unref)) {
            r.waiter = w;
            w = NULL;
        } else {
            w->refs = 1; /* libdbus did not take it */
        }
    }
    if (w) {
        if (w->refs) { w->refs = 1; waiter_unref(w); } /* initialised but not handed to libdbus */
        else free(w);
    }
    if (m) dbus_message_unref(m);
    return r;
}

/* Waits for the reply. A lost connection is not a failure: the reconnect re-adds every rule. */
static uint32_t await_add_match(CNotify_center *c, cn_request r, const char *name, uint64_t gen) {
    if (!r.call) return NOTIFY_STATUS_OK;
    uint32_t st = NOTIFY_STATUS_OK;
    int timed_out = 0;
    if (r.waiter) {
        list_waiter(c, r.waiter, gen);
        /* libdbus completes the call on the reply or at its 30 s timeout, and dropping the
         * connection releases us; this deadline only guards against a stopped I/O thread. */
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 40;
        pthread_mutex_lock(&r.waiter->lock);
        while (!r.waiter->done && !dbus_pending_call_get_completed(r.call) && !timed_out)
            timed_out = pthread_cond_timedwait(&r.waiter->cond, &r.waiter->lock, &deadline) == ETIMEDOUT;
        pthread_mutex_unlock(&r.waiter->lock);
        unlist_waiter(c, r.waiter);
    }
    DBusMessage *reply = dbus_pending_call_get_completed(r.call) ? dbus_pending_call_steal_reply(r.call) : NULL;
    if (!reply) {
        dbus_pending_call_cancel(r.call);
        if (timed_out) {
            cn_set_error("the bus did not answer AddMatch for '%s' within 40 s", name);
            st = NOTIFY_STATUS_SERVER_NOT_FOUND;
        } /* else released: the connection was dropped, and the reconnect adds the rule */
    } else {
        const char *err = dbus_message_get_type(reply) == DBUS_MESSAGE_TYPE_ERROR ? dbus_message_get_error_name(reply) : NULL;
        if (err && strcmp(err, DBUS_ERROR_DISCONNECTED) != 0 && strcmp(err, DBUS_ERROR_NO_REPLY) != 0) {
            const char *text = NULL;
            dbus_message_get_args(reply, NULL, DBUS_TYPE_STRING, &text, DBUS_TYPE_INVALID);
            cn_set_error("the bus refused the match rule for '%s': %s (%s)", name, text ? text : "", err);
            st = strcmp(err, DBUS_ERROR_LIMITS_EXCEEDED) == 0 ? CN_STATUS_RULE_LIMIT : NOTIFY_STATUS_FAILED;
        }
        dbus_message_unref(reply);
    }
    if (r.waiter) waiter_unref(r.waiter);
    dbus_pending_call_unref(r.call);
    return st;
}

/* On the I/O thread nobody else can read the reply, so block here (libdbus reads for us). */
static uint32_t add_match_blocking(DBusConnection *conn, const char *rule, const char *name) {
    DBusError err;
    dbus_error_init(&err);
    dbus_bus_add_match(conn, rule, &err);
    uint32_t st = NOTIFY_STATUS_OK;
    if (dbus_error_is_set(&err) && strcmp(err.name, DBUS_ERROR_DISCONNECTED) != 0 && strcmp(err.name, DBUS_ERROR_NO_REPLY) != 0) {
        cn_set_error("the bus refused the match rule for '%s': %s (%s)", name, err.message, err.name);
        st = strcmp(err.name, DBUS_ERROR_LIMITS_EXCEEDED) == 0 ? CN_STATUS_RULE_LIMIT : NOTIFY_STATUS_FAILED;
    }
    dbus_error_free(&err);
    return st;
}

/* The AddMatch of `name` on `gen` was answered (or abandoned): let waiting registrants go. */
static void rule_settled(CNotify_center *c, cn_map *registry, const char *name, uint64_t gen) {
    pthread_mutex_lock(&c->registry.lock);
    cn_name_slot *slot = cn_map_get(registry, name);
    if (slot && slot->rule_gen == gen) slot->rule_in_flight = 0;
    pthread_cond_broadcast(&c->registry.cond);
    pthread_mutex_unlock(&c->registry.lock);
}

/* The bus allows no more rules on this connection: add the one rule that selects every post
 * (once per connection; it stays, and is re-added first after a reconnect). */
static uint32_t use_catchall(CNotify_center *c, DBusConnection *conn, uint64_t gen, const char *name) {
    pthread_mutex_lock(&c->registry.lock);
    int need = c->rules.catchall_gen != gen;
    c->rules.catchall_wanted = 1;
    c->rules.catchall_gen = gen;
    pthread_mutex_unlock(&c->registry.lock);
    if (!need) return NOTIFY_STATUS_OK;
    /* Make room: the catch-all also selects the plain interface, so that rule can go. The bus
     * handles our messages in order, so the removal is done before the addition. */
    cn_gate_enter(c);
    dbus_bus_remove_match(conn, CN_COMPAT_RULE, NULL);
    cn_gate_leave(c);
    uint32_t st;
    if (cn_on_io_thread(c)) {
        st = add_match_blocking(conn, CN_CATCHALL_RULE, name);
    } else {
        cn_gate_enter(c);
        cn_request r = send_add_match(conn, CN_CATCHALL_RULE);
        cn_gate_leave(c);
        st = await_add_match(c, r, name, gen);
    }
    if (st != NOTIFY_STATUS_OK) {
        pthread_mutex_lock(&c->registry.lock);
        if (c->rules.catchall_gen == gen) c->rules.catchall_gen = 0;
        pthread_mutex_unlock(&c->registry.lock);
        if (st == CN_STATUS_RULE_LIMIT) st = NOTIFY_STATUS_FAILED; /* not even one more rule */
    }
    return st;
}

uint32_t cn_rules_for_new_name(CNotify_center *c, const char *name, int is_namespace) {
    char rule[CN_RULE_MAX + 64];
    int need_compat = 0, need_name = 0;
    uint64_t gen;
    pthread_mutex_lock(&c->registry.lock);
    cn_map *registry = cn_registry_map(c, is_namespace);
    cn_name_slot *slot = cn_map_get(registry, name);
    DBusConnection *conn = cn_connection_current(c, &gen);
    if (slot && conn) {
        need_compat = c->rules.compat_gen != gen && !c->rules.catchall_wanted; /* the catch-all covers it */
        need_name = slot->rule_gen != gen;
        if (need_compat) c->rules.compat_gen = gen;
        if (need_name) { slot->rule_gen = gen; slot->rule_in_flight = 1; }
    }
    if (!need_name && slot && conn && slot->rule_in_flight && !cn_on_io_thread(c)) {
        /* Another thread is adding this name's rule: return only once the bus has it, or the
         * connection changed (the reconnect adds it), or the name lost its last observer. */
        while ((slot = cn_map_get(registry, name)) && slot->rule_in_flight && slot->rule_gen == gen &&
               cn_connection_gen(c) == gen)
            pthread_cond_wait(&c->registry.cond, &c->registry.lock);
    }
    if (need_name) (is_namespace ? cn_namespace_rule : cn_name_rule)(name, rule, sizeof rule);
    uint32_t st = NOTIFY_STATUS_OK;
    if (cn_on_io_thread(c)) {
        pthread_mutex_unlock(&c->registry.lock);
        if (need_compat) st = add_match_blocking(conn, CN_COMPAT_RULE, name);
        if (need_name && st == NOTIFY_STATUS_OK) st = add_match_blocking(conn, rule, name);
    } else {
        /* Sent under registry.lock, so a reconnect cannot slip between deciding and sending. */
        cn_request compat = { NULL, NULL }, exact = { NULL, NULL };
        cn_gate_enter(c);
        if (need_compat) compat = send_add_match(conn, CN_COMPAT_RULE);
        if (need_name) exact = send_add_match(conn, rule);
        cn_gate_leave(c);
        pthread_mutex_unlock(&c->registry.lock);
        uint32_t st1 = await_add_match(c, compat, name, gen);
        uint32_t st2 = await_add_match(c, exact, name, gen);
        st = st1 != NOTIFY_STATUS_OK ? st1 : st2;
    }
    if (st == CN_STATUS_RULE_LIMIT) st = use_catchall(c, conn, gen, name);
    if (need_name) rule_settled(c, registry, name, gen);
    if (conn) dbus_connection_unref(conn);
    return st;
}

void cn_rules_for_gone_name_locked(CNotify_center *c, cn_name_slot *slot, const char *name, int is_namespace) {
    CN_ASSERT_HELD(&c->registry.lock);
    uint64_t gen;
    DBusConnection *conn = cn_connection_current(c, &gen);
    if (conn && slot->rule_gen == gen) {
        char rule[CN_RULE_MAX + 64];
        (is_namespace ? cn_namespace_rule : cn_name_rule)(name, rule, sizeof rule);
        cn_gate_enter(c);
        dbus_bus_remove_match(conn, rule, NULL); /* NULL error: sent without waiting for a reply */
        cn_gate_leave(c);
    }
    if (conn) dbus_connection_unref(conn);
}

void cn_rules_after_connect_locked(CNotify_center *c, DBusConnection *conn) {
    CN_ASSERT_HELD(&c->registry.lock);
    uint64_t gen = cn_connection_gen(c);
    if (c->registry.names.count == 0 && c->registry.namespaces.count == 0) return;
    char rule[CN_RULE_MAX + 64];
    if (c->rules.catchall_wanted) { /* first, so the names past the bus's rule limit are covered */
        dbus_bus_add_match(conn, CN_CATCHALL_RULE, NULL);
        c->rules.catchall_gen = gen;
    } else {
        dbus_bus_add_match(conn, CN_COMPAT_RULE, NULL); /* no reply awaited: thousands may follow */
        c->rules.compat_gen = gen;
    }
    for (size_t i = 0; i < c->registry.names.nbuckets; i++)
        for (cn_map_node *node = c->registry.names.buckets[i]; node; node = node->next) {
            cn_name_slot *slot = node->value;
            if (cn_is_self_name(node->key)) continue; /* `self.`: no rule */
            cn_name_rule(node->key, rule, sizeof rule);
            dbus_bus_add_match(conn, rule, NULL);
            slot->rule_gen = gen;
            slot->rule_in_flight = 0;
        }
    for (size_t i = 0; i < c->registry.namespaces.nbuckets; i++)
        for (cn_map_node *node = c->registry.namespaces.buckets[i]; node; node = node->next) {
            cn_name_slot *slot = node->value;
            if (cn_is_self_namespace(node->key)) continue;
            cn_namespace_rule(node->key, rule, sizeof rule);
            dbus_bus_add_match(conn, rule, NULL);
            slot->rule_gen = gen;
            slot->rule_in_flight = 0;
        }
}
