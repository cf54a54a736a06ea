/*
 * transport/bus/bus.h: the bus transport's own parts, one section per file. Only files of this
 * folder, the fast path (fast/) and the entry point (transports.c) include it: libdbus's types stop there. Each sub-struct of cn_bus belongs to the file
 * named in its heading; another file touches it only through that file's functions.
 *
 * Order of the files (each calls only those listed before it): bus_resolve, embedded_dir, embedded_bus, bus_places,
 * bus_wire, bus_distributed, bus_gate, bus_watches, bus_link, bus_calls, bus_rules, bus_fastpath, bus_receive, bus_send,
 * bus_transport. The fast path (fast.h) sits beside them and calls them; they reach it only
 * through the cn_bus_fast_hooks it hands bus_fastpath.c.
 */
#ifndef CNOTIFY_BUS_H
#define CNOTIFY_BUS_H

#include <dbus/dbus.h>
#include "../transport.h"

/* ---- the bus transport's entry points, called by transports.c (and the fast path) ---- */
typedef enum { CN_BUS_ADDRESS, CN_BUS_EMBEDDED } cn_bus_kind;
/* Resolves "session"/"system"/"embedded"/address/NULL (the default) into a kind and an address. */
uint32_t cn_resolve_bus(const char *spec, cn_bus_kind *kind, char **out_address);
/* A transport over the bus `spec`: `resolved` with its kind and address (taken) when the caller
 * resolved it already (so a bad address fails at creation), else resolved at its start. NULL when
 * out of memory. It adds itself to `loop` at its start. */
cn_transport *cn_bus_transport_new(const char *spec, int resolved, cn_bus_kind kind, char *address, cn_loop *loop,
                                   cn_transport_events events);
/* Where the state of bus `spec` lives (docs/PROTOCOL.md "State files"), and who may have made it. */
uint32_t cn_bus_state_dir(const char *spec, char *out, size_t len, cn_state_place *place);
/* bus_launch.c: a job's check-in with darwin-notifyd's launcher (cn_transport_launch_check_in). */
uint32_t cn_launch_check_in(const char *job, const char *bus, CNotify_launch_handler handler, void *context);

/* ---- bus_resolve.c: which bus ---- */
const char *cn_system_state_dir(void);
const char *cn_system_bus_address(void);
/* `address` without its guid= keys (a restarted daemon has a new guid): malloc'd, NULL if OOM. */
char *cn_address_without_guid(const char *address);

/* ---- embedded_dir.c, embedded_bus.c: the per-user dbus-daemon and its directory ---- */
/* Makes sure the embedded dbus-daemon runs (starting it under a lock) and returns its address. */
uint32_t cn_embedded_ensure(char **out_address);
/* `create` 0: a query, which makes nothing (a missing directory is returned as it would be). */
uint32_t cn_embedded_runtime_dir(char *out, size_t len, int create);
/* The runtime directory and the socket path in it. */
uint32_t cn_embedded_paths(char *dir, size_t dlen, char *sock, size_t slen, int create);

/* ---- bus_wire.c: the Post message (PROTOCOL.md "The signal") ---- */
typedef struct cn_wire_post {
    const char *name;           /* point into the message */
    uint64_t origin;            /* 0 when absent */
    uint64_t seq;
    int has_seq;
    int credential_fd;          /* -1 unless a unix fd followed the sequence (a duplicate the caller closes) */
    uint32_t count;             /* the posts it stands for (`u` after the origin): 1 when absent */
} cn_wire_post;
/* The Post of `name` numbered `seq` from `origin` (0: none), with `credential_fd` appended when
 * >= 0 (libdbus keeps a duplicate), and `count` (the posts it stands for) when over 1 and there is
 * an origin. NULL when out of memory, with the error set. */
DBusMessage *cn_wire_build(const char *name, uint64_t seq, int credential_fd, uint64_t origin, uint32_t count);
typedef enum { CN_WIRE_NOT_OURS, CN_WIRE_MALFORMED, CN_WIRE_POST } cn_wire_result;
cn_wire_result cn_wire_parse(DBusMessage *msg, cn_wire_post *out);
/* `m` (taken; NULL: building it failed, the error set) marshalled as D-Bus sends it, serial 1. */
uint32_t cn_wire_marshal(DBusMessage *m, const char *name, char **out_bytes, int *out_len);

/* ---- bus_distributed.c: the Distributed Post message (PROTOCOL.md "Distributed notifications") ---- */
typedef struct cn_wire_distributed {
    const char *name, *object;  /* point into the message; object NULL: none */
    CNotify_plist *user_info;   /* the caller frees it; NULL: none */
    uint64_t seq, origin;
    int has_seq;
    uint32_t options;
} cn_wire_distributed;
DBusMessage *cn_distributed_build(const cn_outgoing_distributed *post);
/* CN_WIRE_MALFORMED with *why for a distributed post that is dropped (bad shape or payload). */
cn_wire_result cn_distributed_parse(DBusMessage *msg, cn_wire_distributed *out, const char **why);

typedef struct cn_bus cn_bus;

/* ---- bus_gate.c: senders and the loop thread around libdbus; the deferred wake; room ---- */
typedef struct cn_bus_gate {
    cn_rwlock rw;
    _Atomic int backlog;        /* a poster left messages queued: the loop writes them after a grace */
    cn_mutex room_lock;  /* posters waiting for the bus to take what is queued */
    pthread_cond_t room;
    _Atomic int room_waiters;
} cn_bus_gate;
enum { CN_DEFERRED_WRITE = 1, CN_DEFERRED_OTHER = 2 };
#define CN_BACKLOG_GRACE_MS 1
void cn_gate_init(cn_bus *b);
void cn_gate_free(cn_bus *b);
void cn_gate_enter(cn_bus *b);                    /* shared: around a libdbus call from any thread */
void cn_gate_leave(cn_bus *b);
void cn_gate_enter_exclusive(cn_bus *b);          /* the loop thread, around handlers and close */
void cn_gate_leave_exclusive(cn_bus *b);
/* Around a send: the gate, and the loop woken once at the end only if it has work. */
void cn_gate_send_enter(cn_bus *b);
void cn_gate_send_leave(cn_bus *b, DBusConnection *conn);
/* A watch changed (from libdbus's callbacks): wake the loop now, or at cn_gate_send_leave. */
void cn_gate_wake(cn_bus *b, int what);
/* The poster left a backlog: true until the loop takes it. */
int cn_gate_backlog_pending(cn_bus *b);
void cn_gate_take_backlog(cn_bus *b);
/* Asks the loop to write what is queued, and waits (no lock held) at most `ms` for it to have
 * written some; cn_gate_room_made is the loop's word that it did. */
void cn_gate_await_room(cn_bus *b, long ms);
void cn_gate_room_made(cn_bus *b);

/* ---- bus_watches.c: libdbus's watches and timeouts as the loop's descriptors ---- */
typedef struct cn_bus_watches {
    cn_mutex lock;
    DBusWatch **watches; size_t nwatches, capwatches;
    DBusTimeout **timeouts; uint64_t *deadlines; size_t ntimeouts, captimeouts;
    DBusWatch *polled[CN_LOOP_FDS_PER_SOURCE];       /* the loop thread's last prepare */
    int next_timeout;                                /* -1: no timeout enabled at the last prepare */
    int grace;                                       /* the last prepare left the write watch to a poster */
} cn_bus_watches;
void cn_watches_init(cn_bus *b);
void cn_watches_free(cn_bus *b);
int cn_watches_install(cn_bus *b, DBusConnection *conn);
size_t cn_watches_prepare(cn_bus *b, struct pollfd *fds, size_t cap, int *timeout_ms);
/* 0 when nothing happened that the next prepare must see: no descriptor ready, no timeout
 * handled, no backlog left to a poster. */
int cn_watches_handle(cn_bus *b, const struct pollfd *fds, size_t n);

/* ---- bus_link.c: the connection and its identity; under link.lock ---- */
typedef struct cn_bus_link {
    cn_mutex lock;
    DBusConnection *conn;           /* NULL while disconnected; set by the loop thread (and the first start) */
    uint64_t gen;                   /* bumped on every (re)connection; 0 = never connected */
    char bus_id[CN_BUS_ID_LEN + 1]; /* org.freedesktop.DBus.GetId: one per daemon instance */
    char unique_name[256];          /* our unique name on it */
    int can_pass_fds;
    _Atomic(char *) address;        /* the address reached; set once, read with no lock */
    struct cn_link_waiter *waiters; /* replies awaited on the current connection */
} cn_bus_link;
/* What a sender copies out under link.lock: the connection (a reference) and who we are on it. */
typedef struct cn_link_view {
    DBusConnection *conn;           /* NULL while disconnected */
    uint64_t gen;
    char bus_id[CN_BUS_ID_LEN + 1];
    char unique_name[256];
    int can_pass_fds;
} cn_link_view;
void cn_link_init(cn_bus *b, char *address);
void cn_link_free(cn_bus *b);
DBusConnection *cn_link_open(cn_bus *b);            /* open + register + identity; NULL with the error set */
void cn_link_publish(cn_bus *b, DBusConnection *conn); /* makes it current: gen + 1 */
/* Takes the connection away (loop thread), signals every waiter of it, and closes it; returns it
 * for a last dispatch and unref, or NULL. */
DBusConnection *cn_link_drop(cn_bus *b);
/* 1 while connected (unref view.conn), else 0; the identity is copied only `with_identity`. */
int cn_link_view_get(cn_bus *b, cn_link_view *out, int with_identity);
uint64_t cn_link_gen(cn_bus *b);                    /* 0 while disconnected */
int cn_link_bus_id(cn_bus *b, char out[CN_BUS_ID_LEN + 1]);
const char *cn_link_address(cn_bus *b);
/* Keeps `address` (malloc'd; taken) as the one reached, unless one is kept already. */
void cn_link_keep_address(cn_bus *b, char *address);
/* Lists `w` as awaited on connection `gen`, so dropping that connection signals it; 0 when that
 * connection is already gone (then it is signalled at once). */
void cn_link_track(cn_bus *b, cn_completion *w, uint64_t gen);
void cn_link_untrack(cn_bus *b, cn_completion *w);

/* ---- bus_calls.c: calls to the bus and their replies, with no libdbus pending call shared ---- */
/* A call's answer, on the loop thread with no lock held: `reply` the bus's (borrowed: ref it to
 * keep it), NULL when none came (the connection dropped, the deadline passed). */
typedef void (*cn_call_done)(cn_bus *b, void *ctx, DBusMessage *reply);
typedef struct cn_call {
    dbus_uint32_t serial;
    uint64_t deadline_ms;
    cn_call_done done;
    void *ctx;
} cn_call;
/* The bus's GetConnectionCredentials of `unique`, built (NULL: out of memory); sent with cn_calls_send. */
DBusMessage *cn_calls_credentials(const char *unique);
#define CN_CALLS_MAX 4096           /* calls awaiting their reply at once; past that a call fails */
typedef struct cn_bus_calls {
    cn_mutex lock;
    cn_call *v; size_t n, cap;
    _Atomic size_t listed;          /* n, read by the loop's prepare with no lock */
} cn_bus_calls;
void cn_calls_init(cn_bus *b);
void cn_calls_free(cn_bus *b);
/* Sends `call` on `conn` (any thread) and lists it: `done` gets its reply. 0 when it was not sent
 * (out of memory, CN_CALLS_MAX listed): then `done` is never called. */
int cn_calls_send(cn_bus *b, DBusConnection *conn, DBusMessage *call, int timeout_ms, cn_call_done done, void *ctx);
/* From the receive filter: 1 when `msg` was the reply to a listed call (handed to its `done`). */
int cn_calls_receive(cn_bus *b, DBusMessage *msg);
/* The loop's prepare: answers the calls past their deadline, lowers *timeout_ms to the next one. */
void cn_calls_expire(cn_bus *b, int *timeout_ms);
/* The connection dropped (loop thread): every call listed is answered with NULL. */
void cn_calls_drop_all(cn_bus *b);
/* Another thread than the loop: a call sent now, its reply awaited at cn_calls_finish (which
 * frees it). NULL when it was not sent. */
typedef struct cn_awaited cn_awaited;
cn_awaited *cn_calls_begin(cn_bus *b, DBusConnection *conn, DBusMessage *call, int timeout_ms);
/* Waits at most `wait_ms` for the reply, or for connection `gen` to drop. Returns the reply (the
 * caller unrefs it) or NULL; *over is 0 only when the wait ran out with the call unanswered. */
DBusMessage *cn_calls_finish(cn_bus *b, cn_awaited *a, uint64_t gen, long wait_ms, int *over);
/* Loop thread only: a call whose reply is awaited here, the gate held exclusively meanwhile. */
DBusMessage *cn_calls_block(cn_bus *b, DBusConnection *conn, DBusMessage *call, int timeout_ms, DBusError *err);

/* ---- bus_rules.c: match rules (AddMatch/RemoveMatch, the plain interface, the catch-all) ---- */
typedef struct cn_bus_rules {
    cn_mutex lock;
    uint64_t compat_gen;            /* generation holding the plain-interface rule */
    /* Once the bus refuses more rules (LimitsExceeded: the system bus allows 512 per connection),
     * one rule for every post stands in for the exact ones; the process filters by name. */
    int catchall_wanted;
    uint64_t catchall_gen;
} cn_bus_rules;
void cn_rules_init(cn_bus *b);
void cn_rules_free(cn_bus *b);
cn_rule_request *cn_rules_add_begin(cn_bus *b, const char *key, cn_key_kind kind, uint64_t gen);
uint32_t cn_rules_add_finish(cn_bus *b, cn_rule_request *r, const char *key);
void cn_rules_add_now(cn_bus *b, const char *key, cn_key_kind kind, uint64_t gen);
void cn_rules_remove(cn_bus *b, const char *key, cn_key_kind kind, uint64_t gen);

/* ---- bus_fastpath.c: the bus as the fast path's control plane (PROTOCOL.md "Fast path") ---- */
#define CN_FAST_INTERFACE "org.darwinnotify.FastPath"
#define CN_FAST_WIRE_VERSION 1
#define CN_FAST_BITMAP_BYTES 512        /* one bit per bucket */
#define CN_FAST_NAMESPACES_MAX 32       /* namespaces an Endpoint names; past that, every bucket */
/* What the bus hands the fast path, on the loop thread from libdbus's dispatch: each only notes. */
typedef struct cn_bus_fast_hooks {
    void *ctx;                          /* NULL: no fast path */
    /* `namespaces`: the observed namespaces it announced (n of them, valid, at most
     * CN_FAST_NAMESPACES_MAX), pointing into the message: copied if kept. `features`: what else
     * the endpoint reads (CN_FAST_FEATURE_*; 0 when it did not say). */
    void (*endpoint)(void *ctx, const char *sender, const char *token, const unsigned char *bitmap,
                     const char *const *namespaces, size_t n, uint32_t features);
    void (*refused)(void *ctx);         /* an Endpoint that breaks the contract */
    void (*query)(void *ctx, const char *sender);
    void (*sync)(void *ctx, const char *sender, uint64_t token);
    void (*name_lost)(void *ctx, const char *unique);
    /* The answer to cn_bus_fast_ask_credentials `request`: ok 0 when the bus did not say. */
    void (*credentials)(void *ctx, uint64_t request, int ok, pid_t pid, uid_t uid);
} cn_bus_fast_hooks;
void cn_bus_fast_set_hooks(cn_bus *b, const cn_bus_fast_hooks *hooks);
/* From the receive filter: 1 when `msg` was the fast path's (handled). */
int cn_bus_fast_receive(cn_bus *b, DBusMessage *msg);
/* The rules every center of the fast path has on connection `gen`: Query and departures (no
 * reply awaited). A poster's Endpoint rule comes with its first Query (cn_bus_fast_query). */
void cn_bus_fast_rules(cn_bus *b, uint64_t gen);
uint32_t cn_bus_fast_announce(cn_bus *b, const char *token, const unsigned char *bitmap, const char *const *namespaces,
                              size_t n, uint32_t features, const char *destination);
/* The Endpoint's `features` (PROTOCOL.md "Signals"): bit 0, the endpoint reads rings ("The ring"). */
#define CN_FAST_FEATURE_RING 1u
/* Loop thread: the Endpoint rule (once per connection), then a Query: every endpoint answers. */
uint32_t cn_bus_fast_query(cn_bus *b);
uint32_t cn_bus_fast_sync(cn_bus *b, const char *destination, uint64_t token);
/* Asks what the bus says connection `unique` is, not waiting: the answer comes through the
 * credentials hook, on the loop thread (bus_calls.c). */
uint32_t cn_bus_fast_ask_credentials(cn_bus *b, const char *unique, uint64_t request);
int cn_bus_fast_unique_name(cn_bus *b, char out[256]);

/* ---- bus_receive.c: is a message a post, is it authentic (loop thread) ---- */
DBusHandlerResult cn_receive_filter(DBusConnection *conn, DBusMessage *msg, void *bus);
void cn_receive_forget_senders(cn_bus *b);

/* ---- bus_send.c: posting and flushing from any thread ---- */
/* A poster whose unsent posts pass this many bytes waits for the bus to take them, at most
 * CN_POST_STALL_MS; then the post fails (NOTIFY_STATUS_FAILED) instead of growing memory. */
#define CN_OUTGOING_MAX (4u << 20)
#define CN_POST_STALL_MS 5000
uint32_t cn_bus_ready(cn_bus *b);
uint32_t cn_bus_send(cn_bus *b, const cn_outgoing_post *post);
uint32_t cn_bus_send_distributed(cn_bus *b, const cn_outgoing_distributed *post);
uint32_t cn_bus_flush(cn_bus *b, int timeout_ms);

/* ---- bus_transport.c: the transport itself ---- */
struct cn_bus {
    cn_transport base;              /* first: a cn_bus is a cn_transport */
    cn_transport_events events;
    cn_loop *loop;
    char *spec;                     /* what the user asked for (NULL: the default) */
    int resolved;                   /* kind and address are known (under start_lock until started) */
    cn_bus_kind kind;
    cn_mutex start_lock;
    _Atomic int started;
    cn_bus_link link;
    cn_bus_gate gate;
    cn_bus_watches watches;
    cn_bus_rules rules;
    cn_bus_calls calls;
    cn_map sender_uids;             /* bus_receive.c: unique name -> its uid and groups (loop thread; per connection) */
    int asking;                     /* bus_receive.c: senders the bus is being asked about (their signals held) */
    cn_bus_fast_hooks fast;         /* bus_fastpath.c: set before the start, then only read */
    uint64_t fast_endpoint_rule_gen;/* bus_fastpath.c, loop thread: the connection the Endpoint rule is on */
    _Atomic int behind;             /* bus_send.c: the last send left more than CN_OUTGOING_MAX queued */
    /* bus_transport.c, loop thread only: */
    DBusConnection *loop_conn;
    int backoff_ms;
    uint64_t retry_at_ms;
};

#endif
