/*
 * internal.h: the CNotify core's private structures, its lock order and the functions one file
 * of the core offers another. Not installed; include/ holds the public API.
 *
 * Each section below is owned by one file, named in its heading. A file touches another file's
 * sub-struct of the center only through the functions of that section.
 */
#ifndef CNOTIFY_INTERNAL_H
#define CNOTIFY_INTERNAL_H

#include <assert.h>
#include <dbus/dbus.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include "include/darwin_notify.h"

/*
 * ---- Lock order ----
 * A thread that holds a lock in a row may take only locks of the rows below it. Callbacks run
 * with delivery.lock held and may call any public function, which is why it is the outermost.
 *
 *   lock (owner file)              guards                                         notes
 *   centers_lock (center.c)        the process-wide list of centers               exit-time flush takes the rows below
 *   delivery.lock (delivery.c)     one callback of a center at a time             held around every callback
 *   io.start_lock (io_thread.c)    the first connection and the I/O thread's start
 *   registry.lock (registry.c)     names, namespaces, entries, pins, running,     cond: registry.cond
 *                                  rules.* (rules.c), rule_gen of each slot
 *   link.lock (connection.c)       conn, connected, gen, bus identity, address,   cond: link.cond
 *                                  send.post_counts (send.c), rules.waiters
 *   watches.io_gate (watches.c)    shared: a send into libdbus;                   rwlock, writer-preferring
 *                                  exclusive: the I/O thread handling a watch/timeout
 *   [libdbus's connection lock]    (inside libdbus)                               it calls watches.c with it held
 *   watches.lock (watches.c)       the watch and timeout arrays                   never held across a libdbus call
 *   cn_waiter.lock (rules.c)       one AddMatch reply                             taken under link.lock
 *   leaves: delivery.self_lock (the `self.` queue), state.lock (state.c; never held across the
 *   file system: only the cached paths), the notice lock (notice.c), tok_lock then a token's
 *   mu (notify_api.c), a dispatch target's mu (dispatch_api.c). A leaf is never held while
 *   another lock is taken, except tok_lock -> token mu.
 */

/* A lock the caller must hold (functions named *_locked). Debug builds check it: trylock fails
 * with EBUSY on a mutex someone holds, so this catches a caller that holds nothing. */
static inline int cn_mutex_is_held(pthread_mutex_t *m) {
    int r = pthread_mutex_trylock(m);
    if (r == 0) pthread_mutex_unlock(m);
    return r == EBUSY;
}
#define CN_ASSERT_HELD(m) assert(cn_mutex_is_held(m))

/*
 * ---- How every public entry point begins (errors.c, fork.c) ----
 * cn_clear_error() first (a success never leaves an old sentence), then the NULL checks, each
 * failure with a sentence naming the argument, then the fork check for calls that touch a bus or
 * shared state. Modelled on libdbus's _dbus_return_val_if_fail.
 */
#define CN_RETURN_IF_NULL(arg, what)                                          \
    do {                                                                      \
        if ((arg) == NULL) {                                                  \
            cn_set_error("%s is NULL", what);                                 \
            return NOTIFY_STATUS_NULL_INPUT;                                  \
        }                                                                     \
    } while (0)
#define CN_RETURN_IF_FORKED()                                                 \
    do {                                                                      \
        uint32_t cn_fork_status_ = cn_fork_check();                           \
        if (cn_fork_status_ != NOTIFY_STATUS_OK) return cn_fork_status_;      \
    } while (0)

/* Map values hold uint64_t sequence numbers and uid + 1 (send.c, delivery.c, sender_check.c). */
_Static_assert(sizeof(uintptr_t) >= sizeof(uint64_t), "map values store 64-bit sequence numbers");
_Static_assert(sizeof(uid_t) <= sizeof(uint32_t), "a uid fits the 32-bit values of the wire and the API");

/* ---- errors.c: thread-local error sentences ---- */
void cn_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Says on stderr, once per process, that a call succeeded in an unexpected way (notice.c). */
void cn_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cn_clear_error(void);

/* ---- fork.c: a connection never crosses fork() ---- */
/* NOTIFY_STATUS_OK in the process that made the centers; in a forked child (until exec),
 * NOTIFY_STATUS_OPT_DISABLE with an explanation, as on macOS. */
uint32_t cn_fork_check(void);
void cn_fork_guard_install(void);
int cn_is_forked_child(void);

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
void *cn_map_get(cn_map *m, const char *key);
int cn_map_put(cn_map *m, const char *key, void *value); /* 0 ok, -1 out of memory */
void *cn_map_remove(cn_map *m, const char *key);
/* The value slot for `key`, inserted (NULL) if absent: one lookup for read-modify-write.
 * NULL only when out of memory. */
void **cn_map_upsert(cn_map *m, const char *key);
void cn_map_clear(cn_map *m, void (*free_value)(void *));
/* Tables keyed by what others send (senders, names) are emptied past this size. */
#define CN_MAP_BOUND 65536

/* ---- protocol.c: everything docs/PROTOCOL.md describes ---- */
#define CN_PATH "/org/darwinnotify"
#define CN_INTERFACE "org.darwinnotify.Notify"
#define CN_MEMBER "Post"
#define CN_BUCKET_PREFIX CN_INTERFACE ".H"
#define CN_BUCKET_MASK 0xfffu
#define CN_BUCKET_INTERFACE_LEN 32 /* "org.darwinnotify.Notify.Hxxx" and its NUL */
#define CN_COMPAT_RULE "type='signal',path='" CN_PATH "',interface='" CN_INTERFACE "',member='" CN_MEMBER "'"
#define CN_CATCHALL_RULE "type='signal',path='" CN_PATH "',member='" CN_MEMBER "'"
#define CN_RULE_MAX 1024   /* DBUS_MAXIMUM_MATCH_RULE_LENGTH */
#define CN_BUS_ID_LEN 32   /* a bus id (GetId): 32 hex digits */
/* A post may add at most this many to `gaps` (a forged or restarted sequence must not count
 * 2^64 losses); a jump back is a new numbering, not a loss. */
#define CN_GAP_JUMP_MAX (1u << 20)
/* ... and one sender (one connection) at most this many in all, whatever it sends. */
#define CN_GAP_SENDER_MAX (1u << 22)
_Static_assert(sizeof CN_BUCKET_PREFIX - 1 + 3 < CN_BUCKET_INTERFACE_LEN, "a bucket interface fits its buffer");
_Static_assert(CN_BUCKET_MASK == 4095u, "4096 buckets: three hex digits");

/* hash.c: FNV-1a, the one hash of the core: 32-bit for buckets, 64-bit (with the offset basis given)
 * for state file names and the map. */
#define CN_FNV64_OFFSET_BASIS 14695981039346656037ull
uint32_t cn_fnv1a32(const char *s);
uint64_t cn_fnv1a64(const char *s, uint64_t basis);
/* Writes the bucket interface of `name` ("org.darwinnotify.Notify.Hxxx"). */
void cn_bucket_interface(const char *name, char buf[CN_BUCKET_INTERFACE_LEN]);
/* The match rule that selects posts of exactly `name`; when the escaped rule would exceed the
 * bus's limit, the rule of the whole bucket instead (the process filters by name anyway). */
void cn_name_rule(const char *name, char *buf, size_t len);
/* The match rule that selects every post of `ns` and of the names under it (arg0namespace). */
void cn_namespace_rule(const char *ns, char *buf, size_t len);
/* How many bytes of `ns` its arg0namespace rule names (up to an element starting with a digit). */
size_t cn_namespace_rule_prefix(const char *ns);
/* A post as the wire carries it. `credential_fd` is -1 unless a unix fd followed the sequence
 * (parse: a duplicate the caller owns and closes). */
typedef struct cn_post {
    const char *name;     /* points into the message */
    uint64_t seq;
    int has_seq;
    int credential_fd;
} cn_post;
/* The Post signal of `name` numbered `seq`, with `credential_fd` appended when >= 0 (libdbus
 * keeps a duplicate). NULL when out of memory, with the error set. */
DBusMessage *cn_post_build(const char *name, uint64_t seq, int credential_fd);
/* What cn_post_parse found: not a Post at all (someone else's message), a Post of the wrong
 * shape (ignored, as the contract says), or a Post with *out filled (a name argument of
 * 1..CNOTIFY_NAME_MAX bytes, on the plain or a bucket interface). */
typedef enum { CN_POST_NOT_OURS, CN_POST_MALFORMED, CN_POST_OK } cn_post_parse_result;
cn_post_parse_result cn_post_parse(DBusMessage *msg, cn_post *out);
/* The next sequence number of `name` in `counts` (name -> last number): 1, 2, ...; 0 when out of
 * memory (sent unnumbered). The table is bounded: a receiver reads a restart at 1 as a reset. */
uint64_t cn_post_next_seq(cn_map *counts, const char *name);

/* ---- names.c: the names policy (`self.`, `user.uid.N`, validation) ---- */
/* `self.` names (Apple's word) never leave the process and need no bus. */
int cn_is_self_name(const char *name);
/* `self` or a namespace under it: its posts never travel, so it needs no rule. */
int cn_is_self_namespace(const char *ns);
/* The key of a registration is a `self.` name or namespace. */
int cn_is_self_key(const char *key, int is_namespace);
/* Whether `name` is user.uid.N[...]: 0 not restricted; 1 restricted, with *uid = N (as notifyd:
 * no digits means 0); -1 restricted to a number that is not a uid: nobody may post or set it. */
int cn_restricted_uid(const char *name, uid_t *uid);
/* NOTIFY_STATUS_NOT_AUTHORIZED (with the reason) unless this process may post or set `name`;
 * *restricted (if not NULL) tells whether `name` is a valid user.uid.N name. */
uint32_t cn_may_write(const char *name, int *restricted);
/* NOTIFY_STATUS_OK if `ns` can be a D-Bus arg0namespace, else INVALID_NAME or NULL_INPUT with
 * the error set. */
uint32_t cn_validate_namespace(const char *ns);

/* ---- bus_address.c: which bus, and the embedded one ---- */
typedef enum { CN_BUS_ADDRESS, CN_BUS_EMBEDDED } cn_bus_kind;
/* Resolves "session"/"system"/"embedded"/address/NULL(default) into a kind and an address. */
uint32_t cn_resolve_bus(const char *spec, cn_bus_kind *kind, char **out_address);
/* Makes sure the embedded dbus-daemon runs (starting it under a lock) and returns its address. */
uint32_t cn_embedded_ensure(char **out_address);
/* `create` 0: a query, which makes nothing (a missing directory is returned as it would be). */
uint32_t cn_embedded_runtime_dir(char *out, size_t len, int create);
/* The system-wide state directory and the system bus's address. */
const char *cn_system_state_dir(void);
const char *cn_system_bus_address(void);
/* `address` without its guid= keys (a restarted daemon has a new guid): malloc'd, NULL if OOM. */
char *cn_address_without_guid(const char *address);

/* ---- the center's parts: each sub-struct is owned by the file named ---- */

/* center.c: where a center is in its life. Destroy reads it in one place (center.c). */
typedef enum cn_lifecycle {
    CN_LIFE_LIVE = 0,          /* in use; its I/O thread runs once the bus was first needed */
    CN_LIFE_DESTROY_DEFERRED,  /* destroyed inside a `self.` delivery on a thread other than its I/O
                                * thread: the delivering thread finishes the destroy */
    CN_LIFE_STOPPING,          /* destroyed: the I/O thread leaves its loop; the destroyer joins it
                                * and frees the center */
    CN_LIFE_STOPPING_ON_IO,    /* destroyed from its own I/O thread: that thread frees the center
                                * once it has left its loop */
} cn_lifecycle;

/* center.c: counters for CNotify_center_get_stats; atomics, updated without a lock. */
typedef struct cn_counters {
    _Atomic uint64_t received, delivered, gaps, reconnects, rejected;
    _Atomic uint64_t unmatched;     /* received, wanted by no observer (a wider rule's cost) */
} cn_counters;

/* io_thread.c: the I/O thread and how other threads wake it. */
typedef struct cn_io {
    pthread_mutex_t start_lock;
    _Atomic int started;            /* the thread exists (set once, under start_lock) */
    pthread_t thread;
    int wake_fd;                    /* eventfd: other threads wake the I/O thread */
    _Atomic int wake_pending;       /* a wake is written and not yet drained: skip the syscall */
} cn_io;

/* connection.c: the current connection and its identity; under link.lock. Only the I/O thread
 * (and the first start, before that thread exists) sets conn. */
typedef struct cn_link {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    DBusConnection *conn;           /* NULL while disconnected */
    int connected;
    uint64_t gen;                   /* bumped on every (re)connection; 0 = never connected */
    char bus_id[CN_BUS_ID_LEN + 1]; /* org.freedesktop.DBus.GetId: one per daemon instance */
    char unique_name[256];          /* our unique name on it */
    int can_pass_fds;               /* the connection negotiated unix fd passing */
} cn_link;

/* send.c: posting. post_counts is under link.lock; backlog is atomic. */
typedef struct cn_send_state {
    cn_map post_counts;             /* name -> posts so far on this connection (the sequence) */
    _Atomic int backlog;            /* a poster left messages queued: the I/O thread writes them after a grace */
} cn_send_state;

/* watches.c: libdbus's watches and timeouts, and the gate between senders and the I/O thread. */
typedef struct cn_watches {
    pthread_rwlock_t io_gate;
    pthread_mutex_t lock;
    DBusWatch **watches; size_t nwatches, capwatches;
    DBusTimeout **timeouts; uint64_t *deadlines; size_t ntimeouts, captimeouts;
} cn_watches;

/* registry.c: one observer registration. */
typedef struct cn_entry {
    uint64_t id;
    char *name;
    const void *observer;      /* CF-style observers: identity for remove */
    CNotify_callback cf_callback;
    CNotify_handler handler;   /* handler-style registrations */
    void *context;
    CNotify_release release;
    int removed;
    int pins;                  /* delivery snapshots holding this entry; never negative */
    int is_namespace;          /* observes `name` and every name under it (name.*) */
} cn_entry;

/* registry.c: the registrations of one name or namespace. */
typedef struct cn_name_slot {
    cn_entry **entries;
    size_t count, cap;
    uint64_t rule_gen;          /* connection generation that holds this key's match rule (rules.c) */
    int rule_in_flight;         /* its AddMatch is sent and not yet answered: others wait */
} cn_name_slot;

/* registry.c: every registration of a center; under registry.lock. */
typedef struct cn_registry {
    pthread_mutex_t lock;
    pthread_cond_t cond;            /* a rule settled, an invocation ended */
    cn_map names;                   /* name -> cn_name_slot */
    cn_map namespaces;              /* namespace -> cn_name_slot */
    uint64_t next_id;
    cn_entry *running;              /* the entry whose callback runs now (delivery.c sets it) */
} cn_registry;

/* rules.c: the rules one connection holds besides the per-name ones; under registry.lock,
 * except `waiters` (under link.lock). */
typedef struct cn_rules {
    uint64_t compat_gen;            /* generation holding the plain-interface rule */
    /* Once the bus refuses more rules (LimitsExceeded: the system bus allows 512 per connection),
     * one rule for every post stands in for the exact ones; the process filters by name. */
    int catchall_wanted;
    uint64_t catchall_gen;
    struct cn_waiter *waiters;      /* threads awaiting an AddMatch reply */
} cn_rules;

/* delivery.c: handing posts to observers. */
typedef struct cn_delivery {
    /* Callbacks of a center run one at a time: the I/O thread (bus posts) and a thread delivering
     * `self.` posts both hold it around them. */
    pthread_mutex_t lock;
    cn_map last_seq;                /* "sender\nname" -> last sequence seen (I/O thread; cleared per connection) */
    pthread_mutex_t self_lock;      /* the queue of `self.` posts not yet delivered */
    struct cn_queued_post *self_head, *self_tail;
    _Atomic int self_queued;        /* posts in that queue: read without a lock after each delivery */
} cn_delivery;

/* sender_check.c: unique bus name -> uid + 1, for this connection only (I/O thread). */
typedef struct cn_sender_cache {
    cn_map uids;
} cn_sender_cache;

/* state.c: where the state files are, and the `self.` states; under state.lock. */
typedef struct cn_state_store {
    pthread_mutex_t lock;
    char *dir;                      /* D, resolved and checked once */
    char *plain;                    /* D/plain (or the plain.* in use), found once; NULL to find again */
    char uid_dir[PATH_MAX];         /* the last uid.N directory found ... */
    uid_t uid_dir_owner;            /* ... for this uid ... */
    struct timespec uid_dir_stamp;  /* ... while D's mtime is this: D unchanged, the answer holds */
    cn_map self_states;             /* `self.` name -> state */
} cn_state_store;

struct CNotify_center {
    char *bus_spec;                 /* what the user asked for (NULL: default) */
    cn_bus_kind kind;
    char *address;                  /* resolved address; replaced under link.lock (connection.c) */
    _Atomic int lifecycle;          /* cn_lifecycle */
    cn_counters counters;
    cn_io io;
    cn_link link;
    cn_send_state send;
    cn_watches watches;
    cn_registry registry;
    cn_rules rules;
    cn_delivery delivery;
    cn_sender_cache senders;
    cn_state_store state;
};

/* ---- center.c: lifecycle, the process-wide list, stats ---- */
/* Moves the center from `from` to `to`; asserts the transition is one the design allows. */
void cn_lifecycle_advance(CNotify_center *c, cn_lifecycle from, cn_lifecycle to);
static inline cn_lifecycle cn_lifecycle_get(CNotify_center *c) {
    return (cn_lifecycle)atomic_load_explicit(&c->lifecycle, memory_order_acquire);
}
/* Frees everything; the I/O thread has ended or is ending on this thread. */
void cn_center_free(CNotify_center *c);
/* The rest of a destroy deferred by a `self.` delivery (CN_LIFE_DESTROY_DEFERRED). */
void cn_center_finish_destroy(CNotify_center *c);

/* ---- io_thread.c: the I/O thread (loop, wake, start/stop, backoff) ---- */
int cn_io_init(CNotify_center *c);                      /* 0 ok, -1 out of descriptors */
void cn_io_free(CNotify_center *c);
int cn_on_io_thread(CNotify_center *c);
/* Connects in the caller's thread and starts the I/O thread, once. */
uint32_t cn_center_start(CNotify_center *c);
void cn_io_wake(CNotify_center *c);
/* Drains the eventfd; the next wake writes again. */
void cn_io_drain_wake(CNotify_center *c);
/* Stops the I/O thread (the lifecycle says STOPPING or STOPPING_ON_IO). Returns 0 when called on
 * the I/O thread itself: that thread frees the center once it has left its loop. */
int cn_io_stop(CNotify_center *c);

/* ---- watches.c: DBusWatch/DBusTimeout bookkeeping, the poll, the gate ---- */
void cn_watches_init(CNotify_center *c);
void cn_watches_free(CNotify_center *c);
/* Hands libdbus our watch, timeout, wakeup and dispatch-status functions for `conn`. */
int cn_watches_install(CNotify_center *c, DBusConnection *conn);
/* One poll of the wake fd and every enabled watch, then the due watches and timeouts. */
void cn_watches_poll_once(CNotify_center *c);
void cn_gate_enter(CNotify_center *c);                  /* shared: around a send from any thread */
void cn_gate_leave(CNotify_center *c);
void cn_gate_enter_exclusive(CNotify_center *c);        /* the I/O thread, around handlers and close */
void cn_gate_leave_exclusive(CNotify_center *c);

/* ---- send.c: sends from any thread and the backlog they leave ---- */
enum { CN_DEFERRED_WRITE = 1, CN_DEFERRED_OTHER = 2 };
#define CN_BACKLOG_GRACE_MS 1
/* A poster whose unsent posts pass this many bytes waits for the bus to take them, at most
 * CN_POST_STALL_MS; then the post fails (NOTIFY_STATUS_FAILED) instead of growing memory. */
#define CN_OUTGOING_MAX (4u << 20)
#define CN_POST_STALL_MS 5000
/* Around a send: the gate, and the I/O thread woken once at the end only if it has work. */
void cn_send_enter(CNotify_center *c);
void cn_send_leave(CNotify_center *c, DBusConnection *conn);
/* True if this thread is inside a send of `c`: the wake `what` is noted and made (or not) at
 * cn_send_leave. */
int cn_send_defer_wake(CNotify_center *c, int what);
/* The poster left a backlog: true once, until the I/O thread takes it (cn_send_take_backlog). */
int cn_send_backlog_pending(CNotify_center *c);
void cn_send_take_backlog(CNotify_center *c);
void cn_send_free(CNotify_center *c);

/* ---- connection.c: connection setup and teardown ---- */
void cn_link_init(CNotify_center *c);
void cn_link_free(CNotify_center *c);
DBusConnection *cn_connect(CNotify_center *c);          /* open + register + identity */
/* Makes `conn` the center's connection and adds every rule the registry needs, atomically with
 * respect to registrations. */
void cn_connection_publish(CNotify_center *c, DBusConnection *conn);
/* Closes the connection (I/O thread), releases rule waiters, forgets per-connection caches. */
void cn_connection_drop(CNotify_center *c);
/* A reference to the current connection and its generation (NULL while disconnected). */
DBusConnection *cn_connection_current(CNotify_center *c, uint64_t *gen);
uint64_t cn_connection_gen(CNotify_center *c);

/* ---- receive.c: a message the bus delivered: is it a post, is it authentic ---- */
DBusHandlerResult cn_receive_filter(DBusConnection *conn, DBusMessage *msg, void *center);

/* ---- registry.c: observer registry (entries, pins, removal) ---- */
void cn_registry_init(CNotify_center *c);
void cn_registry_free(CNotify_center *c);
static inline cn_map *cn_registry_map(CNotify_center *c, int is_namespace) {
    return is_namespace ? &c->registry.namespaces : &c->registry.names;
}
/* The entries observing `name` (exactly or through a namespace), pinned: *out is `stack` or a
 * malloc'd array; returns how many (0 when out of memory). */
size_t cn_registry_snapshot(CNotify_center *c, const char *name, cn_entry **stack, size_t stack_len, cn_entry ***out);
/* Around one invocation of a snapshot entry: begin says whether to call it (not removed). */
int cn_registry_begin_run(CNotify_center *c, cn_entry *e);
/* Ends the invocation (if `ran`) and unpins; frees the entry if this was its last pin. */
void cn_registry_end_run(CNotify_center *c, cn_entry *e, int ran);

/* ---- rules.c: match rules per name, namespace and connection ---- */
void cn_rules_init(CNotify_center *c);
uint32_t cn_rules_for_new_name(CNotify_center *c, const char *name, int is_namespace); /* add + await */
void cn_rules_for_gone_name_locked(CNotify_center *c, cn_name_slot *slot, const char *name, int is_namespace);
void cn_rules_after_connect_locked(CNotify_center *c, DBusConnection *conn);
/* Releases every thread awaiting an AddMatch on connection generation `gen`. link.lock held. */
void cn_rules_release_waiters_locked(CNotify_center *c, uint64_t gen);

/* ---- delivery.c: a post to its observers; sequence gaps; the `self.` queue ---- */
void cn_delivery_init(CNotify_center *c);
void cn_delivery_free(CNotify_center *c);
/* Delivers a received post (I/O thread), then any `self.` posts its callbacks made. */
void cn_deliver_post(CNotify_center *c, const char *name, const char *sender, int has_seq, uint64_t seq);
/* Whether this thread is running callbacks of `c` now (a remove from there must not wait). */
int cn_in_delivery(CNotify_center *c);
/* Queues a post of a `self.` name and delivers the queue unless another thread of this center
 * is running callbacks: that thread delivers it when its callback returns. */
uint32_t cn_self_post(CNotify_center *c, const char *name);
/* Forgets per-connection sequence numbers (a restarted bus reuses unique names). */
void cn_delivery_reset_sequences(CNotify_center *c);

/* ---- sender_check.c: the receiving half of the user.uid.N rule, for foreign posters ---- */
int cn_sender_may_post(CNotify_center *c, DBusConnection *conn, const char *sender, const char *name);
void cn_sender_cache_reset(CNotify_center *c);

/* ---- credentials.c: a poster's uid that outlives the poster ---- */
/* A new credential for one post (an fd to append and close), or -1 with the error set. */
int cn_credential_create(const char *bus_id, const char *sender, const char *name, uint64_t seq);
/* 1 if `fd` is a credential of exactly this post made by uid `owner` or root, else 0. */
int cn_credential_verify(int fd, const char *bus_id, const char *sender, const char *name, uint64_t seq, uid_t owner);

/* ---- usable_dirs.c: a directory under a name anyone could have taken first ---- */
/* Why `st` cannot serve (NULL if it can); `arg` is the caller's (the uid of a uid.N directory). */
typedef const char *(*cn_dir_problem_fn)(const struct stat *st, const void *arg);
/* The first usable of `parent`/`base`, then `parent`/`base`.* in byte order, into out: 1, or 0. */
int cn_first_usable_dir(const char *parent, const char *base, cn_dir_problem_fn problem, const void *arg,
                        char *out, size_t len);
/* Makes `parent`/`base`.XXXXXX in `mode`, then returns the first usable one (ours or another
 * process's made at the same moment): 0, or -1 with errno. */
int cn_make_usable_dir_beside(const char *parent, const char *base, mode_t mode, cn_dir_problem_fn problem,
                              const void *arg, char *out, size_t len);

/* ---- state_dirs.c: which directories hold state, and which may be believed ---- */
typedef enum cn_state_place {
    CN_STATE_PRIVATE,       /* made 0700 if missing: $DARWIN_NOTIFY_STATE_DIR, the embedded bus */
    CN_STATE_INSTALLED,     /* only checked: /run/darwin-notify/state */
    CN_STATE_PREDICTABLE,   /* /tmp/darwin-notify-state-…: anyone may have made it first */
} cn_state_place;
/* The state directory D for `path` (which, when predictable, may be replaced by `path`.XXXXXX),
 * into out; *shared is 1 when everyone may write in it. */
uint32_t cn_state_root(const char *path, cn_state_place place, char *out, size_t len, int *shared);
/* The D in use for `path` without making anything: a predictable one's first usable `path`.*
 * when `path` is squatted; `path` itself when nothing exists yet. */
uint32_t cn_state_root_in_use(const char *path, cn_state_place place, char *out, size_t len);
/* D/plain, or the first usable D/plain.* when plain/ is someone else's in the wrong mode. */
uint32_t cn_state_plain_dir(const char *root, int shared, char *out, size_t len);
/* The first usable directory of uid N in D (uid.N, then uid.N.* in byte order): 1, or 0 if none. */
int cn_state_find_uid_dir(const char *root, uid_t n, char *out, size_t len);
/* Makes one (we are N or root) if there is none, and returns the one everybody finds. */
uint32_t cn_state_make_uid_dir(const char *root, uid_t n, char *out, size_t len);
/* Renames `path` to `dir`/.stale.<random> (never over an existing name); 0 or -1 with errno. */
int cn_state_move_aside(const char *dir, const char *path);
/* Creates `dir`/.tmp.<random> (O_EXCL, 0600) and returns its fd, its name in `path`; -1 with errno. */
int cn_state_temp_file(const char *dir, char *path, size_t len);

/* ---- state.c: state storage ---- */
void cn_state_init(CNotify_center *c);
void cn_state_free(CNotify_center *c);

/* ---- notify_api.c ---- */
/* Cancels every token registered on `c` (its destroy): they answer NOTIFY_STATUS_INVALID_TOKEN
 * afterwards, instead of pointing at a freed center. */
void cn_tokens_cancel_for_center(CNotify_center *c);

/* ---- test hooks: inert unless the environment of a test's child names them ---- */
/* DARWIN_NOTIFY_TEST_START_DELAY_MS: widens the moment between the I/O thread's creation and
 * the return of cn_center_start. */
void cn_test_start_delay(void);

#endif
