/*
 * base/base.h: the floor of the CNotify core. Everything here is a leaf: it calls nothing of the
 * layers above (loop/, transport/, center/, api/) and holds no center. Errors, the fork guard,
 * hashing and the map, the names policy, the pure parts of docs/PROTOCOL.md (bucket interfaces,
 * match rule text, sequence numbers, origins, credential bytes), and the state directories.
 *
 * The layers, bottom to top (docs/DESIGN.md draws them; .ci/layers checks the includes):
 *   base/  <  loop/  <  transport/  <  center/  <  api/
 * A file includes only its own layer's header and those below.
 */
#ifndef CNOTIFY_BASE_H
#define CNOTIFY_BASE_H

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include "../include/darwin_notify.h"
#include "../include/darwin_notify_distributed.h"

/* A function on the path of a direct post to its callback: placed beside the others (docs/DESIGN.md
 * "A known poster's lane"), so that an observer woken for one post touches a few pages of code,
 * not one per file. */
#define CN_HOT __attribute__((section(".text.hot.cnotify")))

/*
 * ---- lock_order.c: the lock order, the one table (docs/DESIGN.md points here), and its check ----
 * Every lock of the core is a cn_mutex (or the gate's cn_rwlock) made with its level below. A
 * thread that holds a lock may take only locks of a higher level (further down the list). No lock
 * of this table is held while waiting for room, the bus or a file; a condition wait gives its own
 * lock back and takes it again, and takes nothing else meanwhile.
 *
 * The order is the code's: a run of every test built with -DCN_LOCK_ORDER_RECORD (lock_order.c)
 * listed each pair (held, taken) seen, 45 pairs over 22 locks, no circle; this order is one that
 * puts each pair's first above its second (docs/DESIGN.md, "Locks", lists the pairs).
 *
 * Debug builds (SwiftPM's, -DDEBUG; or -DCN_LOCK_CHECK=1) check it: each thread keeps the locks
 * it holds, and taking one whose level is not above every lock held aborts, naming both
 * (cn_lock_order_take). CN_ASSERT_HELD asks that list too. A trylock never waits, so it is not
 * checked, only noted as held. Release builds keep nothing.
 */
typedef enum cn_lock_level {
    CN_LOCK_DELIVERY = 1,       /* delivery.lock (center/delivery.c): one callback of a center at a time, held around
                                 * every callback, which may call any public function: so it comes first */
    CN_LOCK_CENTERS,            /* centers_lock (center/lifecycle.c): the list of centers (a callback may make or
                                 * destroy one); the exit-time flush takes link, gate and room under it */
    CN_LOCK_TOKENS,             /* tok_lock (api/tokens.c): the token table */
    CN_LOCK_TOKEN,              /* a token's mu (api/tokens.c): its suspension */
    CN_LOCK_REGISTRY,           /* registry.lock (center/registry.c): names, namespaces, entries; cond: registry.cond; one
                                 * per registry (posts, distributed), never two held together */
    CN_LOCK_START,              /* start_lock (transport/bus/bus_transport.c): the first connection; its `connected`
                                 * subscribes every key (subs.lock) and joins the loop (loop.lock) under it */
    CN_LOCK_SUBS,               /* subs.lock (center/subscriptions.c): the subscription set; cond: subs.cond; sends rules */
    CN_LOCK_RULES,              /* rules.lock (transport/bus/bus_rules.c): which connection holds the plain-interface or
                                 * catch-all rule; held across the gate to send AddMatch */
    CN_LOCK_RESTRICTED,         /* outbox.restricted_lock (center/outbox.c): restricted posts leave in their order */
    CN_LOCK_OUTBOX,             /* outbox.lock (center/outbox.c): a name's next number and its send */
    CN_LOCK_PEERS,              /* peers.lock (transport/fast/fast_peers.c): the peers and their connections; held across
                                 * a post's non-blocking direct copies and a connection's Sync, sent by the bus */
    CN_LOCK_CALLS,              /* calls.lock (transport/bus/bus_calls.c): calls awaiting the bus's reply; held across
                                 * the gate to send one, so its serial is listed before its reply can be read */
    CN_LOCK_LINK,               /* link.lock (transport/bus/bus_link.c): the connection, its generation and identity,
                                 * awaited replies; copied out, never waited under */
    CN_LOCK_GATE,               /* the gate's rwlock (transport/bus/bus_gate.c): shared around one non-blocking send into
                                 * libdbus; exclusive while the loop thread handles a watch or timeout */
    CN_LOCK_LIBDBUS,            /* [libdbus's connection lock, not ours: it calls bus_watches.c with it held] */
    CN_LOCK_WATCHES,            /* watches.lock (transport/bus/bus_watches.c): the watch and timeout arrays */
    /* Leaves: nothing is taken under them. */
    CN_LOCK_ROOM,               /* room_lock (transport/bus/bus_gate.c): posters waiting for the bus to take its queue */
    CN_LOCK_ENDPOINT,           /* endpoint.lock (transport/fast/fast_announce.c): the bucket counts */
    CN_LOCK_LOOP,               /* loop.lock (loop/loop.c): the sources */
    CN_LOCK_DISPATCH,           /* a dispatch target's mu (api/dispatch_api.c): its runs */
    CN_LOCK_SELF,               /* delivery.self_lock (center/delivery.c): the queue of `self.` posts */
    CN_LOCK_STATE,              /* state.lock (center/state.c): the resolved directories; never across the file system */
    CN_LOCK_LAUNCH,             /* once_lock (transport/bus/bus_launch.c): whether this process checked in */
    CN_LOCK_POLICY,             /* policy_lock (base/policy.c): the parsed notify.conf files */
    CN_LOCK_COMPLETION,         /* a completion's lock (base/completion.c): a reply awaited */
    CN_LOCK_RINGS,              /* rings_lock (transport/fast/channel_ring.c): the bells and the rings alive; a leaf */
    CN_LOCK_NOTICE,             /* the notice lock (base/notice.c) */
    CN_LOCK_LEVELS
} cn_lock_level;
/* The level's lock, as the table names it. */
const char *cn_lock_level_name(int level);

typedef struct cn_mutex {
    pthread_mutex_t m;
    int level;                  /* cn_lock_level */
} cn_mutex;
#define CN_MUTEX_INITIALIZER(level) { PTHREAD_MUTEX_INITIALIZER, (level) }
typedef struct cn_rwlock {
    pthread_rwlock_t rw;
    int level;
} cn_rwlock;

#if !defined(CN_LOCK_CHECK) && defined(DEBUG)
#define CN_LOCK_CHECK 1
#endif
#if CN_LOCK_CHECK
/* Before taking `lock` of `level`: aborts, naming both, when a lock of this level or a higher one
 * is held by this thread. Then notes it held. */
void cn_lock_order_take(const void *lock, int level);
/* Notes `lock` held with no check (a trylock that succeeded). */
void cn_lock_order_note(const void *lock, int level);
void cn_lock_order_drop(const void *lock);
int cn_lock_order_holds(const void *lock);
#else
#define cn_lock_order_take(lock, level) ((void)0)
#define cn_lock_order_note(lock, level) ((void)0)
#define cn_lock_order_drop(lock) ((void)0)
#endif

static inline void cn_mutex_init(cn_mutex *m, cn_lock_level level) {
    pthread_mutex_init(&m->m, NULL);
    m->level = (int)level;
}
static inline void cn_mutex_destroy(cn_mutex *m) { pthread_mutex_destroy(&m->m); }
static inline void cn_mutex_lock(cn_mutex *m) {
    cn_lock_order_take(m, m->level);
    pthread_mutex_lock(&m->m);
}
static inline int cn_mutex_trylock(cn_mutex *m) {
    int r = pthread_mutex_trylock(&m->m);
    if (r == 0) cn_lock_order_note(m, m->level);
    return r;
}
static inline void cn_mutex_unlock(cn_mutex *m) {
    cn_lock_order_drop(m);
    pthread_mutex_unlock(&m->m);
}
static inline int cn_cond_wait(pthread_cond_t *c, cn_mutex *m) { return pthread_cond_wait(c, &m->m); }
static inline int cn_cond_timedwait(pthread_cond_t *c, cn_mutex *m, const struct timespec *deadline) {
    return pthread_cond_timedwait(c, &m->m, deadline);
}
static inline void cn_rwlock_rdlock(cn_rwlock *l) {
    cn_lock_order_take(l, l->level);
    pthread_rwlock_rdlock(&l->rw);
}
static inline void cn_rwlock_wrlock(cn_rwlock *l) {
    cn_lock_order_take(l, l->level);
    pthread_rwlock_wrlock(&l->rw);
}
static inline void cn_rwlock_unlock(cn_rwlock *l) {
    cn_lock_order_drop(l);
    pthread_rwlock_unlock(&l->rw);
}

/* A lock the caller must hold (functions named *_locked). Checked builds ask the thread's list;
 * otherwise (assert on, no list) trylock fails with EBUSY on a mutex someone holds, which catches
 * a caller that holds nothing. */
static inline int cn_mutex_is_held(cn_mutex *m) {
#if CN_LOCK_CHECK
    return cn_lock_order_holds(m);
#else
    int r = pthread_mutex_trylock(&m->m);
    if (r == 0) pthread_mutex_unlock(&m->m);
    return r == EBUSY;
#endif
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

/* Map values hold uint64_t sequence numbers and uid + 1. */
_Static_assert(sizeof(uintptr_t) >= sizeof(uint64_t), "map values store 64-bit sequence numbers");
_Static_assert(sizeof(uid_t) <= sizeof(uint32_t), "a uid fits the 32-bit values of the wire and the API");

/* ---- errors.c: thread-local error sentences ---- */
void cn_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cn_clear_error(void);
/* notice.c: says on stderr, once per process, that a call succeeded in an unexpected way. */
void cn_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- fork.c: a connection never crosses fork() ---- */
/* NOTIFY_STATUS_OK in the process that made the centers; in a forked child (until exec),
 * NOTIFY_STATUS_OPT_DISABLE with an explanation, as on macOS. */
uint32_t cn_fork_check(void);
void cn_fork_guard_install(void);
int cn_is_forked_child(void);

/* ---- clock.c: monotonic milliseconds ---- */
uint64_t cn_now_ms(void);
long cn_elapsed_ms(const struct timespec *since);
/* CLOCK_REALTIME `ms` from now, for pthread_cond_timedwait. */
struct timespec cn_deadline_in(long ms);

/* ---- hash.c: FNV-1a, the one hash of the core ---- */
#define CN_FNV64_OFFSET_BASIS 14695981039346656037ull
uint32_t cn_fnv1a32(const char *s);
uint64_t cn_fnv1a64(const char *s, uint64_t basis);

/* ---- map.c: chained hash map with string keys (names, senders, ids) ---- */
typedef struct cn_map_node {
    struct cn_map_node *next;
    uint64_t hash;
    void *value;
    char key[];                 /* in the node's own allocation: one malloc a key, not two */
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
/* Calls fn for every entry; fn must not change the map. */
void cn_map_each(cn_map *m, void (*fn)(const char *key, void *value, void *arg), void *arg);
/* The key of a number (token, registration id): tables keyed by numbers use the same map. */
#define CN_ID_KEY_LEN 24
const char *cn_id_key(uint64_t id, char buf[CN_ID_KEY_LEN]);
/* Tables keyed by what others send (senders, names) are emptied past this size. */
#define CN_MAP_BOUND 65536

/* ---- completion.c: a one-shot event two parties share (a reply awaited, a connection dropped) ---- */
typedef struct cn_completion cn_completion;
cn_completion *cn_completion_new(void);                /* one reference; NULL when out of memory */
void cn_completion_ref(cn_completion *w);
void cn_completion_unref(cn_completion *w);
void cn_completion_signal(cn_completion *w);
/* 1 once signalled (or `done()` says so, checked on each wake), 0 at the deadline. */
int cn_completion_wait(cn_completion *w, int (*done)(void *), void *arg, long timeout_ms);

/* ---- names.c: the names policy (`self.`, `user.uid.N`, validation) ---- */
/* UTF-8 as D-Bus accepts it in a string: well formed, shortest form, no surrogate. */
int cn_utf8_valid(const char *text);
/* `self.` names (Apple's word) never leave the process and need no bus. */
int cn_is_self_name(const char *name);
/* `self` or a namespace under it: its posts never travel, so it needs no rule. */
int cn_is_self_namespace(const char *ns);
int cn_is_self_key(const char *key, int is_namespace);
/* Whether `name` is user.uid.N[...]: 0 not restricted; 1 restricted, with *uid = N (as notifyd:
 * no digits means 0); -1 restricted to a number that is not a uid: nobody may post or set it. */
int cn_restricted_uid(const char *name, uid_t *uid);
/* guard.c: NOTIFY_STATUS_NOT_AUTHORIZED (with the reason) unless this process may post or set `name`;
 * *restricted (if not NULL) tells whether a post of `name` must prove who sent it (a valid
 * user.uid.N name, or a name notify.conf reserves from others' posts). */
uint32_t cn_may_write(const char *name, int *restricted);
/* guard.c: NOTIFY_STATUS_NOT_AUTHORIZED (with the reason) if a notify.conf reserve's `r` bits do not let this
 * process observe `name`: what notify(3)'s registrations answer, as notifyd's. (A post is a
 * broadcast: this is a courtesy to the caller, not a secret kept; docs/PROTOCOL.md.) */
uint32_t cn_may_read(const char *name);
#define CN_GROUPS_MAX 64 /* groups of this process looked at on the stack; more are allocated (guard.c) */
/* This process's groups as the kernel stamps them on a credential or a socket: its gid first, then
 * every supplementary group (a user may be in hundreds). In `stack` when they fit, else allocated
 * (*gids != stack: the caller frees it); out of memory, or when the groups grew between the two
 * reads, the gid alone (a check then fails closed). Returns how many. */
size_t cn_self_groups(gid_t stack[CN_GROUPS_MAX], gid_t **gids);

/* notify_conf.c: notify.conf(5) parsed (pure: no file is opened). Apple's access bits
 * (libnotify.h NOTIFY_ACCESS_*): read 1, write 2, shifted 0 (owner), 4 (group), 8 (others). */
#define CN_ACCESS_USER_SHIFT 0
#define CN_ACCESS_GROUP_SHIFT 4
#define CN_ACCESS_OTHER_SHIFT 8
#define CN_ACCESS_DEFAULT 0x333u /* rwrwrw: what a `reserve` with no mode gives, as notifyd */
typedef struct { char *prefix; uid_t uid; gid_t gid; uint32_t access; } cn_conf_reserve;
typedef struct { char *name; char *path; } cn_conf_monitor;
typedef struct { char *name; uint64_t value; } cn_conf_set;
typedef struct {
    cn_conf_reserve *reserves; /* descending strcmp of prefix: the first match is the deepest */
    size_t nreserves, capreserves;
    cn_conf_monitor *monitors;
    size_t nmonitors, capmonitors;
    cn_conf_set *sets;
    size_t nsets, capsets;
} cn_conf;
typedef void (*cn_conf_report_fn)(void *ctx, const char *file, unsigned line, const char *why);
void cn_conf_init(cn_conf *conf);
void cn_conf_free(cn_conf *conf);
/* Adds the lines of `text` to `conf`; each bad line is reported (file, line, why) and skipped.
 * Returns how many were bad. */
size_t cn_conf_parse(cn_conf *conf, const char *text, size_t len, const char *file, cn_conf_report_fn report, void *ctx);
const cn_conf_reserve *cn_conf_reserve_of(const cn_conf *conf, const char *name);
/* notifyd's _internal_check_access for one reserve (NULL: not reserved, allowed). */
int cn_conf_allows(const cn_conf_reserve *r, uid_t uid, const gid_t *gids, size_t ngids, int req);
/* Whether a post of a name under `r` must prove who sent it: others may not write it. */
int cn_conf_needs_proof(const cn_conf_reserve *r);

/* policy.c: this process's notify.conf, read from its files and read again when they change
 * (looked at most once a second). The reserve deciding `name`, copied out (prefix not kept):
 * 1 if there is one. */
int cn_policy_reserve(const char *name, cn_conf_reserve *out);
/* The same from what was read last, with no look at the files: for callers holding a lock. */
int cn_policy_reserve_cached(const char *name, cn_conf_reserve *out);
/* Looks at the files if they are due, as cn_policy_reserve does; then a number that changes
 * whenever what was read changes: an answer of cn_name_guard holds while it stays the same (a
 * poster's lane, transport/fast/fast_endpoint.c). Takes no lock while the files are not due. */
uint64_t cn_policy_generation(void);

/* guard.c: who may post `name`. kind 0: anyone; 1: those cn_guard_allows (a user.uid.N name:
 * N and root; a reserved name: its reserve's owner, group or others, as its mode says, and root);
 * -1: nobody (user.uid. with a number that is no uid). */
typedef struct { int kind; int uid_name; int reserved; cn_conf_reserve reserve; } cn_guard;
int cn_name_guard(const char *name, cn_guard *g);
/* The same without looking at notify.conf's files again (cn_policy_reserve_cached): under a lock. */
int cn_name_guard_cached(const char *name, cn_guard *g);
int cn_guard_allows(const cn_guard *g, uid_t uid, const gid_t *gids, size_t ngids);
/* Whether `uid` may observe a post of a name `g` guards (its reserve's r bits; user.uid.N: N and
 * root): what a direct copy honours. The bus broadcasts to anyone who asks (PROTOCOL.md). */
int cn_guard_may_read(const cn_guard *g, uid_t uid, const gid_t *gids, size_t ngids);
/* NOTIFY_STATUS_OK if `ns` can be a D-Bus arg0namespace, else INVALID_NAME or NULL_INPUT. */
uint32_t cn_validate_namespace(const char *ns);

/* ---- protocol.c: the pure parts of docs/PROTOCOL.md ---- */
#define CN_PATH "/org/darwinnotify"
#define CN_INTERFACE "org.darwinnotify.Notify"
#define CN_MEMBER "Post"
#define CN_BUCKET_PREFIX CN_INTERFACE ".H"
#define CN_BUCKET_MASK 0xfffu
#define CN_BUCKET_INTERFACE_LEN 32 /* "org.darwinnotify.Notify.Hxxx" and its NUL */
#define CN_COMPAT_RULE "type='signal',path='" CN_PATH "',interface='" CN_INTERFACE "',member='" CN_MEMBER "'"
#define CN_CATCHALL_RULE "type='signal',path='" CN_PATH "',member='" CN_MEMBER "'"
/* Distributed notifications (PROTOCOL.md "Distributed notifications"): one interface, no buckets. */
#define CN_DISTRIBUTED_INTERFACE "org.darwinnotify.Distributed"
#define CN_DISTRIBUTED_RULE "type='signal',path='" CN_PATH "',interface='" CN_DISTRIBUTED_INTERFACE "',member='" CN_MEMBER "'"
#define CN_RULE_MAX 1024   /* DBUS_MAXIMUM_MATCH_RULE_LENGTH */
#define CN_BUS_ID_LEN 32   /* a bus id (GetId): 32 hex digits */
/* A post may add at most this many to `gaps` (a forged or restarted sequence must not count
 * 2^64 losses); a jump back is a new numbering, not a loss. */
#define CN_GAP_JUMP_MAX (1u << 20)
/* ... and one sender (one connection) at most this many in all, whatever it sends. */
#define CN_GAP_SENDER_MAX (1u << 22)
_Static_assert(sizeof CN_BUCKET_PREFIX - 1 + 3 < CN_BUCKET_INTERFACE_LEN, "a bucket interface fits its buffer");
_Static_assert(CN_BUCKET_MASK == 4095u, "4096 buckets: three hex digits");
void cn_bucket_interface(const char *name, char buf[CN_BUCKET_INTERFACE_LEN]);
/* The match rule that selects posts of exactly `name`; when the escaped rule would exceed the
 * bus's limit, the rule of the whole bucket instead (the process filters by name anyway). */
void cn_name_rule(const char *name, char *buf, size_t len);
/* The match rule that selects every post of `ns` and of the names under it (arg0namespace). */
void cn_namespace_rule(const char *ns, char *buf, size_t len);
/* The match rule that selects the distributed posts of `name` ("": of every name). */
void cn_distributed_rule(const char *name, char *buf, size_t len);
size_t cn_namespace_rule_prefix(const char *ns);
/* The next sequence number of `name` in `counts` (name -> last number): 1, 2, ...; 0 when out of
 * memory (sent unnumbered). The table is bounded: a receiver reads a restart at 1 as a reset. */
uint64_t cn_post_next_seq(cn_map *counts, const char *name);
/* A new origin (PROTOCOL.md "Origins"): 64 random bits from the kernel, never 0 (0 is "none"). */
int cn_origin_new(uint64_t *out);

/* ---- credentials.c: a poster's uid that outlives the poster ---- */
/* A new credential for one post (an fd to append and close), or -1 with the error set. */
int cn_credential_create(const char *bus_id, const char *sender, const char *name, uint64_t seq);
/* 1 if `fd` is a credential of exactly this post made by uid `owner` or root, else 0. */
int cn_credential_verify(int fd, const char *bus_id, const char *sender, const char *name, uint64_t seq, uid_t owner);
/* As cn_credential_verify, but says whose it is: 1 with the file's owner and group (the
 * creator's, set by the kernel) if it is a sealed credential of exactly this post. */
int cn_credential_identity(int fd, const char *bus_id, const char *sender, const char *name, uint64_t seq, uid_t *uid,
                           gid_t *gid);

/* ---- sockets.c: whether something answers on a unix socket path (a connect, no traffic) ---- */
int cn_socket_answers(const char *path);

/* ---- usable_dirs.c: a directory under a name anyone could have taken first ---- */
typedef const char *(*cn_dir_problem_fn)(const struct stat *st, const void *arg);
int cn_first_usable_dir(const char *parent, const char *base, cn_dir_problem_fn problem, const void *arg,
                        char *out, size_t len);
int cn_make_usable_dir_beside(const char *parent, const char *base, mode_t mode, cn_dir_problem_fn problem,
                              const void *arg, char *out, size_t len);

/* ---- state_dirs.c: which directories hold state, and which may be believed ---- */
typedef enum cn_state_place {
    CN_STATE_PRIVATE,       /* made 0700 if missing: $DARWIN_NOTIFY_STATE_DIR, the embedded bus */
    CN_STATE_INSTALLED,     /* only checked: /run/darwin-notify/state */
    CN_STATE_PREDICTABLE,   /* /tmp/darwin-notify-state-…: anyone may have made it first */
} cn_state_place;
uint32_t cn_state_root(const char *path, cn_state_place place, char *out, size_t len, int *shared);
uint32_t cn_state_root_in_use(const char *path, cn_state_place place, char *out, size_t len);
uint32_t cn_state_plain_dir(const char *root, int shared, char *out, size_t len);
int cn_state_find_uid_dir(const char *root, uid_t n, char *out, size_t len);
uint32_t cn_state_make_uid_dir(const char *root, uid_t n, char *out, size_t len);
/* The same for group G (gid.G: setgid, G's, not others' to write): the state of a name that a
 * notify.conf reserve lets its group write. */
int cn_state_find_gid_dir(const char *root, gid_t g, char *out, size_t len);
uint32_t cn_state_make_gid_dir(const char *root, gid_t g, char *out, size_t len);
int cn_state_move_aside(const char *dir, const char *path);
int cn_state_temp_file(const char *dir, char *path, size_t len);

/* ---- plist.c: the userInfo of distributed notifications (CNotify_plist_* builds and reads) ---- */
size_t cn_plist_depth(const CNotify_plist *p);   /* containers nested: 0 for a string or number */
size_t cn_plist_weight(const CNotify_plist *p);  /* what counts against CNOTIFY_PLIST_MAX_BYTES */

/* ---- test hooks: inert unless the environment of a test's child names them ---- */
/* DARWIN_NOTIFY_TEST_START_DELAY_MS: widens the moment between the loop thread's creation and
 * the return of the first start. */
void cn_test_start_delay(void);
/* DARWIN_NOTIFY_TEST_LATE_PROOFS=1: this endpoint takes no Sync as the proof of a new connection,
 * as when every Sync comes after the proof time (a bus behind by seconds): each connection is
 * closed unproved, its frames unread. */
int cn_test_late_proofs(void);
/* DARWIN_NOTIFY_TEST_CONNECT_AFTER=N: this poster connects to no endpoint before its Nth post, as
 * when the Query's answer comes late (a bus behind by that many posts): its connections are made
 * in the middle of what it posts. */
uint64_t cn_test_connect_after(void);
/* Key comparisons this thread's property-list look-ups made (plist.c): a test measures that a
 * look-up is O(1). */
extern _Thread_local unsigned long cn_test_plist_compares;

#endif
