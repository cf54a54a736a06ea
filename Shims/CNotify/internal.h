/* Internal structures of the CNotify core. Not installed; see include/ for the public API. */
#ifndef CNOTIFY_INTERNAL_H
#define CNOTIFY_INTERNAL_H

#include <dbus/dbus.h>
#include <pthread.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include "include/darwin_notify.h"

/* The wire contract (docs/PROTOCOL.md). Posts go to one of 4096 bucket interfaces chosen by a
 * hash of the name, so dbus-daemon (which keeps match rules per interface) scans only that
 * bucket's few exact rules; the plain interface stays open for foreign posters. */
#define CN_PATH "/org/darwinnotify"
#define CN_INTERFACE "org.darwinnotify.Notify"
#define CN_MEMBER "Post"
#define CN_BUCKET_PREFIX CN_INTERFACE ".H"
#define CN_BUCKET_MASK 0xfffu
#define CN_COMPAT_RULE "type='signal',path='" CN_PATH "',interface='" CN_INTERFACE "',member='" CN_MEMBER "'"
#define CN_CATCHALL_RULE "type='signal',path='" CN_PATH "',member='" CN_MEMBER "'"
#define CN_RULE_MAX 1024 /* DBUS_MAXIMUM_MATCH_RULE_LENGTH */
#define CN_BUS_ID_LEN 32  /* a bus id (GetId): 32 hex digits */
/* A post may add at most this many to `gaps` (a forged or restarted sequence must not count
 * 2^64 losses); a jump back is a new numbering, not a loss. */
#define CN_GAP_JUMP_MAX (1u << 20)
/* A poster whose unsent posts pass this many bytes waits for the bus to take them, at most
 * CN_POST_STALL_MS; then the post fails (NOTIFY_STATUS_FAILED) instead of growing memory. */
#define CN_OUTGOING_MAX (4u << 20)
#define CN_POST_STALL_MS 5000

/* ---- wire.c ---- */
uint32_t cn_fnv1a32(const char *s);
/* Writes the bucket interface of `name` ("org.darwinnotify.Notify.Hxxx") into buf[32]. */
void cn_bucket_interface(const char *name, char buf[32]);
/* Writes the match rule that selects posts of exactly `name`; when the escaped rule would exceed
 * the bus's limit, the rule of the whole bucket instead (the process filters by name anyway). */
void cn_name_rule(const char *name, char *buf, size_t len);
/* The match rule that selects every post of `ns` and of the names under it (arg0namespace: `ns`
 * itself and `ns.*`, never `nsx`), on every bucket interface and the plain one. */
void cn_namespace_rule(const char *ns, char *buf, size_t len);
/* NOTIFY_STATUS_OK if `ns` can be a D-Bus arg0namespace: elements of [A-Za-z0-9_-], the first
 * character of each not a digit, joined by single dots, at most 255 bytes; else INVALID_NAME. */
uint32_t cn_validate_namespace(const char *ns);

/* ---- fork.c: a connection never crosses fork() ---- */
/* NOTIFY_STATUS_OK in the process that made the centers; in a forked child (until exec),
 * NOTIFY_STATUS_OPT_DISABLE with an explanation, as on macOS. */
uint32_t cn_fork_check(void);
void cn_fork_guard_install(void);
int cn_is_forked_child(void);

/* ---- errors.c ---- */
void cn_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cn_clear_error(void);

/* ---- map.c: chained hash map with string keys (names, sender names) ---- */
typedef struct cn_map_node {
    struct cn_map_node *next;
    uint64_t hash;
    char *key;
    void *value;
} cn_map_node;
typedef struct cn_map {
    cn_map_node **buckets;
    size_t nbuckets, count;
} cn_map;
uint64_t cn_hash(const char *s);
void *cn_map_get(cn_map *m, const char *key);
int cn_map_put(cn_map *m, const char *key, void *value); /* 0 ok, -1 out of memory */
void *cn_map_remove(cn_map *m, const char *key);
/* The value slot for `key`, inserted (NULL) if absent: one lookup for read-modify-write.
 * NULL only when out of memory. */
void **cn_map_upsert(cn_map *m, const char *key);
void cn_map_clear(cn_map *m, void (*free_value)(void *));

/* ---- bus_address.c ---- */
typedef enum { CN_BUS_ADDRESS, CN_BUS_EMBEDDED } cn_bus_kind;
/* Resolves "session"/"system"/"embedded"/address/NULL(default) into a kind and an address. */
uint32_t cn_resolve_bus(const char *spec, cn_bus_kind *kind, char **out_address);
/* Makes sure the embedded dbus-daemon runs (starting it under a lock) and returns its address. */
uint32_t cn_embedded_ensure(char **out_address);
uint32_t cn_embedded_runtime_dir(char *out, size_t len);
/* The system-wide state directory (DARWIN_NOTIFY_SYSTEM_STATE_DIR, else /run/darwin-notify/state:
 * made by the installed tmpfiles.d entry) and the system bus's address. */
const char *cn_system_state_dir(void);
const char *cn_system_bus_address(void);
/* `address` without its guid= keys (a restarted daemon has a new guid): malloc'd, NULL if OOM. */
char *cn_address_without_guid(const char *address);

/* ---- center.c / io_loop.c ---- */
typedef struct cn_entry {
    uint64_t id;
    char *name;
    const void *observer;      /* CF-style observers: identity for remove */
    CNotify_callback cf_callback;
    CNotify_handler handler;   /* handler-style registrations */
    void *context;
    CNotify_release release;
    int removed;
    int pins;                  /* dispatch snapshots holding this entry */
    int is_namespace;          /* observes `name` and every name under it (name.*) */
} cn_entry;

typedef struct cn_name_slot {
    cn_entry **entries;
    size_t count, cap;
    uint64_t rule_gen;          /* connection generation that holds this name's match rule */
    int rule_in_flight;         /* its AddMatch is sent and not yet answered: others wait */
} cn_name_slot;

struct CNotify_center {
    char *bus_spec;                 /* what the user asked for (NULL: default) */
    cn_bus_kind kind;
    char *address;                  /* resolved address */

    /* Start-up: the first call that needs the bus connects in the caller's thread. */
    pthread_mutex_t start_lock;
    _Atomic int started;
    pthread_t io_thread;
    int wake_fd;                    /* eventfd: other threads wake the I/O thread */
    _Atomic int wake_pending;       /* a wake is written and not yet drained: skip the syscall */
    _Atomic int backlog;            /* a poster left messages queued: the I/O thread writes them after a grace (io_loop.c) */

    /* State shared with the I/O thread. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    DBusConnection *conn;           /* opened and closed by the I/O thread; NULL while disconnected */
    int connected;
    _Atomic int stopping;           /* read by the I/O thread every iteration, without a lock */
    int free_on_exit;               /* destroyed from its own I/O thread: that thread frees it */
    uint64_t conn_gen;              /* bumped on every (re)connection; 0 = never connected */
    /* The connection's identity, for credentials of restricted posts (credentials.c): set with
     * conn (publish_connection), read by posters under lock and by the I/O thread. */
    char bus_id[CN_BUS_ID_LEN + 1];   /* org.freedesktop.DBus.GetId: one per daemon instance */
    char unique_name[256];            /* our unique name on it */
    int can_pass_fds;                 /* the connection negotiated unix fd passing */
    uint64_t compat_gen;            /* generation holding the plain-interface rule */
    /* Once the bus refuses more rules (LimitsExceeded: the system bus allows 512 per connection),
     * one rule for every post stands in for the exact ones; the process filters by name. */
    int catchall_wanted;
    uint64_t catchall_gen;
    cn_map post_counts;             /* name -> posts so far (the per-name sequence number) */
    struct cn_waiter *waiters;      /* threads awaiting an AddMatch reply (rules.c), under lock */

    /* Watches and timeouts. Only the I/O thread polls and handles them, but a thread that sends
     * (a post, an AddMatch) may write on the socket, and on a broken socket libdbus removes and
     * frees the watches on that thread. io_gate keeps the two apart: senders hold it shared
     * around each libdbus send, the I/O thread holds it exclusively around each watch/timeout
     * handler. Both take it before any libdbus lock, so the order never inverts (libdbus calls
     * our watch functions with its connection lock held). watch_lock guards only the arrays and
     * is never held across a libdbus call. */
    pthread_rwlock_t io_gate;
    pthread_mutex_t watch_lock;
    DBusWatch **watches; size_t nwatches, capwatches;
    DBusTimeout **timeouts; uint64_t *timeout_deadline; size_t ntimeouts, captimeouts;

    /* Observer registry. */
    pthread_mutex_t reg_lock;
    pthread_cond_t reg_cond;
    cn_map names;                   /* name -> cn_name_slot */
    cn_map namespaces;              /* namespace -> cn_name_slot (namespace observers), under reg_lock */
    cn_map last_seq;                /* "sender\nname" -> last sequence number seen (I/O thread;
                                     * cleared with each connection: names are reused) */
    uint64_t next_id;
    cn_entry *running;              /* the entry whose callback runs now, if any */

    _Atomic uint64_t received, delivered, gaps, reconnects, rejected;
    cn_map sender_uids;             /* unique bus name -> uid + 1 (I/O thread only; sender_check.c) */

    /* Callbacks of a center run one at a time: the I/O thread (bus posts) and a thread delivering
     * `self.` posts (local.c) both hold dispatch_lock around them. */
    pthread_mutex_t dispatch_lock;
    pthread_mutex_t local_lock;     /* guards the queue of `self.` posts not yet delivered */
    struct cn_queued_post *local_head, *local_tail;
    cn_map self_states;             /* `self.` name -> state, under local_lock (state.c) */
    char *state_dir;                /* resolved and checked once, under local_lock (state.c) */
    _Atomic int local_queued;       /* `self.` posts in the queue: read without a lock per receipt */
    int destroy_pending;            /* destroyed from a `self.` callback: finished after it */
};

int cn_on_io_thread(CNotify_center *c);
uint32_t cn_center_start(CNotify_center *c);            /* connect + spawn I/O thread */
void cn_io_wake(CNotify_center *c);
/* The registry of exact names or of namespaces. */
static inline cn_map *cn_registry(CNotify_center *c, int is_namespace) { return is_namespace ? &c->namespaces : &c->names; }
uint32_t cn_rules_for_new_name(CNotify_center *c, const char *name, int is_namespace); /* add + await rules */
void cn_rules_for_gone_name(CNotify_center *c, cn_name_slot *slot, const char *name, int is_namespace); /* reg_lock held */
void cn_rules_after_connect(CNotify_center *c, DBusConnection *conn); /* I/O thread */
/* Releases every thread awaiting an AddMatch on connection generation `gen` (it was dropped:
 * the reconnect adds the rules). Called with c->lock held. */
void cn_rules_release_waiters(CNotify_center *c, uint64_t gen);
/* Stops the I/O thread. Returns 0 when called on the I/O thread itself: the thread then frees the
 * center (cn_center_free) once it has left its loop. */
int cn_io_stop(CNotify_center *c);
void cn_center_free(CNotify_center *c);
/* The rest of a destroy deferred from a `self.` callback (destroy_pending). */
void cn_center_finish_destroy(CNotify_center *c);
void cn_gate_enter(CNotify_center *c);                  /* shared: around a send from any thread */
void cn_gate_leave(CNotify_center *c);
/* Around a post's send: the gate, and the I/O thread woken once at the end only if it has work. */
void cn_send_enter(CNotify_center *c);
void cn_send_leave(CNotify_center *c, DBusConnection *conn);
DBusConnection *cn_connect(CNotify_center *c);          /* open + register + rule */
void cn_dispatch_post(CNotify_center *c, const char *name, const char *sender, int has_seq, uint64_t seq);
/* The same, with dispatch_lock already held by the caller. */
void cn_dispatch_post_locked(CNotify_center *c, const char *name, const char *sender, int has_seq, uint64_t seq);
/* Whether this thread is running callbacks of `c` now (a remove from there must not wait). */
int cn_in_dispatch(CNotify_center *c);

/* ---- local.c: `self.` names never leave the process and need no bus ---- */
int cn_is_self_name(const char *name);
/* `self` or a namespace under it: its posts never travel, so it needs no rule. */
int cn_is_self_namespace(const char *ns);
/* Queues a post of a `self.` name and delivers the queue unless another thread of this center
 * is running callbacks: that thread delivers it when its callback returns. */
uint32_t cn_local_post(CNotify_center *c, const char *name);
/* Delivers queued `self.` posts if no thread is running callbacks of `c`. */
void cn_local_kick(CNotify_center *c);
void cn_local_free(CNotify_center *c);

/* ---- state.c and the user.uid.N rule ---- */
#include <sys/types.h>
/* Whether `name` is user.uid.N[...]: 0 not restricted; 1 restricted, with *uid = N (as notifyd:
 * no digits means 0); -1 restricted to a number that is not a uid (past uid_t, or (uid_t)-1):
 * nobody may post or set it. */
int cn_restricted_uid(const char *name, uid_t *uid);
/* NOTIFY_STATUS_NOT_AUTHORIZED (with the reason) unless this process may post or set `name`;
 * *restricted (if not NULL) tells whether `name` is a valid user.uid.N name: parsed once. */
uint32_t cn_may_write(const char *name, int *restricted);
/* On the I/O thread: whether a received post of `name` from `sender`, which carries no credential
 * (credentials.c), may be delivered. For user.uid.N names it asks the bus for the sender's uid
 * (GetConnectionUnixUser, cached per unique name for this connection only: a restarted bus reuses
 * the names), which works only while the sender is connected: anyone on a bus can emit any signal. */
int cn_sender_may_post(CNotify_center *c, DBusConnection *conn, const char *sender, const char *name);
/* Forgets every per-sender answer: they belong to one connection (a restarted bus hands out the
 * same unique names again). I/O thread. */
void cn_sender_cache_reset(CNotify_center *c);

/* ---- credentials.c: a poster's uid that outlives the poster ----
 * A restricted post carries a sealed memfd (D-Bus type 'h'): the kernel records who created it
 * (its owner) and the seals make its content, which names the bus, the sender, the name and the
 * sequence, unchangeable. A receiver needs nothing from the poster, which may be gone. */
/* A new credential for one post (an fd to append and close), or -1 with the error set. */
int cn_credential_create(const char *bus_id, const char *sender, const char *name, uint64_t seq);
/* 1 if `fd` is a credential of exactly this post made by uid `owner` or root, else 0. */
int cn_credential_verify(int fd, const char *bus_id, const char *sender, const char *name, uint64_t seq, uid_t owner);

/* ---- notify_api.c ---- */
/* Cancels every token registered on `c` (its destroy): they answer NOTIFY_STATUS_INVALID_TOKEN
 * afterwards, instead of pointing at a freed center. */
void cn_tokens_cancel_for_center(CNotify_center *c);

/* ---- test hooks: inert unless the environment of a test's child names them ---- */
/* DARWIN_NOTIFY_TEST_START_DELAY_MS: widens the moment between the I/O thread's creation and
 * the return of cn_center_start, so a test can show the thread knows itself from its first
 * instruction. */
void cn_test_start_delay(void);

#endif
