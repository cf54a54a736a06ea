/*
 * darwin_notify.h: the CNotify center, a CFNotificationCenter-style Darwin notify center in C.
 *
 * A center is bound to one bus. Observers are C callbacks keyed by (observer pointer, name).
 * object and userInfo are always NULL, as on Apple's Darwin center.
 *
 * Threads: callbacks of a center run one at a time, in the order notifications arrived: those of
 * bus posts on the center's own I/O thread, those of `self.` names on the posting thread, before
 * the post returns (or, for a post made inside a callback, once that callback has returned). A callback may post (the post is delivered after the
 * callback returns, never re-entrantly), add observers, and remove observers, its own included.
 * Once a remove call returns, the removed callback never runs again on any thread; a remove
 * from another thread waits for a running invocation of that callback to finish.
 *
 * Every function returns a NOTIFY_STATUS_* code from <notify.h>; CNotify_last_error() gives a
 * sentence about the latest failure on the calling thread.
 */
#ifndef CNOTIFY_DARWIN_NOTIFY_H
#define CNOTIFY_DARWIN_NOTIFY_H

#include <stddef.h>
#include <stdint.h>
#include "notify.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CNotify_center CNotify_center;

/* Apple's CFNotificationCallback shape: (center, observer, name, object, userInfo). */
typedef void (*CNotify_callback)(CNotify_center *center, void *observer, const char *name,
                                 const void *object, const void *userInfo);

/* A handler with a context pointer, for language bindings; `release` frees the context. */
typedef void (*CNotify_handler)(void *context, const char *name);
typedef void (*CNotify_release)(void *context);

/* The longest name accepted, in bytes (without the terminating NUL). */
#define CNOTIFY_NAME_MAX 512

/*
 * The process-wide center on the default bus: DARWIN_NOTIFY_BUS if set, else the embedded bus.
 * Never NULL; the bus is reached on first use, and failures are reported by the calls.
 */
CNotify_center *CNotify_center_get_darwin_notify_center(void);

/*
 * A center on an explicit bus: a D-Bus address, or "session", "system", "embedded"; NULL means
 * the default resolution. On a malformed address returns NULL with *out_status set.
 * The bus itself is reached on first use.
 */
CNotify_center *CNotify_center_create(const char *bus, uint32_t *out_status);

/* Stops a center made by CNotify_center_create: removes its observers, cancels the tokens
 * registered on it (CNotify_center_register_*: afterwards they answer
 * NOTIFY_STATUS_INVALID_TOKEN, as after notify_cancel) and closes its bus. */
void CNotify_center_destroy(CNotify_center *center);

/* Adds `callback` for `name`; object and userInfo in the callback are always NULL. */
uint32_t CNotify_center_add_observer(CNotify_center *center, const void *observer,
                                     CNotify_callback callback, const char *name);

/* Removes every registration of `observer` for `name`. */
uint32_t CNotify_center_remove_observer(CNotify_center *center, const void *observer, const char *name);

/*
 * Namespace observation (beyond Apple): `callback` runs for every post of `ns` and of every name
 * under it (`com.example` matches `com.example` and `com.example.*`, never `com.examples`), with
 * the full name. `ns` is dot-separated elements of letters, digits, '_' and '-', none starting
 * with a digit (D-Bus arg0namespace); else NOTIFY_STATUS_INVALID_NAME. A process that observes a
 * name both exactly and through a namespace gets each post once per registration.
 * CNotify_center_remove_handler removes a namespace handler by its id, as any other.
 */
uint32_t CNotify_center_add_namespace_observer(CNotify_center *center, const void *observer,
                                               CNotify_callback callback, const char *ns);
uint32_t CNotify_center_add_namespace_handler(CNotify_center *center, const char *ns, CNotify_handler handler,
                                              void *context, CNotify_release release, uint64_t *out_id);
uint32_t CNotify_center_remove_namespace_observer(CNotify_center *center, const void *observer, const char *ns);

/* Removes every registration of `observer`, whatever its name. */
uint32_t CNotify_center_remove_every_observer(CNotify_center *center, const void *observer);

/*
 * Posts `name`. Sent from the calling thread (no hand-off): posts from one thread reach the bus
 * in the order they were made. Returns NOTIFY_STATUS_SERVER_NOT_FOUND while no bus is reachable.
 * Posts the bus has not taken yet are queued in the process up to 4 MiB; past that a post waits
 * for the bus, and fails with NOTIFY_STATUS_FAILED if it took nothing for 5 s (a stopped or
 * wedged dbus-daemon): memory stays bounded and the caller learns of it.
 */
uint32_t CNotify_center_post(CNotify_center *center, const char *name);

/* Waits until every post made so far is written to the bus (timeout_ms is reserved; the wait
 * ends when written or when the bus goes away). Also run for every center when the process
 * exits through exit(). */
uint32_t CNotify_center_flush(CNotify_center *center, int timeout_ms);

/* Adds a handler with a context; *out_id identifies it for CNotify_center_remove_handler.
 * On failure `release` is never called: the context stays the caller's. */
uint32_t CNotify_center_add_handler(CNotify_center *center, const char *name, CNotify_handler handler,
                                    void *context, CNotify_release release, uint64_t *out_id);

/* Removes a handler; `release` runs once no invocation of it can still be running. */
uint32_t CNotify_center_remove_handler(CNotify_center *center, uint64_t id);

/* The resolved bus address of the center ("" before first use). */
const char *CNotify_center_bus_address(CNotify_center *center);

/* Counters for diagnostics and benchmarks. */
typedef struct CNotify_stats {
    uint64_t received;   /* Post signals received from the bus */
    uint64_t delivered;  /* callback invocations, each counted as it begins */
    uint64_t gaps;       /* posts missing from a sender's sequence (lost by the bus); one jump
                          * adds at most 2^20, and a reconnect starts every sequence afresh */
    uint64_t reconnects; /* successful reconnections after a lost bus */
    uint64_t rejected;   /* posts dropped as forged: user.uid.N not proven to come from N or root,
                          * and `self.` names, which never come from the bus */
} CNotify_stats;
void CNotify_center_get_stats(CNotify_center *center, CNotify_stats *out);
/* Posts received that no observer of `center` wanted: what a wider match rule than asked for
 * costs (a namespace whose element starts with a digit, such as `user.uid.1000`, is observed with
 * the rule of `user.uid`, and the posts of other uids are dropped here), and bucket neighbours. */
uint64_t CNotify_center_unmatched_posts(CNotify_center *center);

/* The post being delivered, for a callback or handler that needs to know where it came from
 * (a bridge that must not send its own posts back). Valid only inside a callback of `center`, on
 * the thread running it; `sender` lives until the callback returns. */
typedef struct CNotify_post_info {
    const char *sender;       /* the poster's unique bus name; NULL for a `self.` post */
    uint64_t sequence;        /* the poster's sequence number of this post (0 when it has none) */
    int has_sequence;         /* 0 for a foreign poster (dbus-send) or a `self.` post */
    int from_this_center;     /* posted by `center` itself (its connection, or its `self.` queue) */
} CNotify_post_info;
/* Fills `out` with the post `center` is delivering on this thread: NULL_INPUT, OK, or
 * INVALID_REQUEST outside a callback of `center`. */
uint32_t CNotify_center_current_post(CNotify_center *center, CNotify_post_info *out);

/* The same-host fast path (docs/PROTOCOL.md "Fast path"): a post also goes straight to each
 * process of this host that observes it with this library, over a Unix socket, besides its bus
 * copy, and an observer delivers whichever copy comes first. On by default;
 * DARWIN_NOTIFY_FAST_PATH=0 in the environment, or CNotify_center_set_fast_path(center,
 * CNOTIFY_FAST_PATH_OFF), makes this center's posts take the bus alone. CNOTIFY_FAST_PATH_DIRECT
 * (DARWIN_NOTIFY_FAST_PATH=direct), an opt-in for throughput, skips the bus copy of a post that
 * every connected observer of it took directly: foreign clients (dbus-monitor, gdbus, dbus-send
 * observers) and observers this center is not connected to yet do not get those posts. */
#define CNOTIFY_FAST_PATH_OFF 0
#define CNOTIFY_FAST_PATH_ON 1
#define CNOTIFY_FAST_PATH_DIRECT 2
typedef struct CNotify_fast_path_stats {
    int enabled;
    uint64_t peers;       /* observers this center posts to directly now */
    uint64_t sent;        /* post copies sent directly */
    uint64_t delivered;   /* posts delivered here from a direct copy */
    uint64_t duplicates;  /* second copies dropped (the bus copy of a post delivered directly, or the reverse) */
    uint64_t fallbacks;   /* direct connections dropped because the observer did not take a post at once:
                           * it had the bus copy */
    uint64_t refused;     /* announcements, connections and frames that failed a check */
    uint64_t bus_skipped; /* posts not sent on the bus (CNOTIFY_FAST_PATH_DIRECT), or held back and
                           * coalesced into a later bus copy of their name (the default mode) */
} CNotify_fast_path_stats;
/* `mode`: CNOTIFY_FAST_PATH_OFF, _ON or _DIRECT; INVALID_REQUEST for another value. */
uint32_t CNotify_center_set_fast_path(CNotify_center *center, int mode);
void CNotify_center_get_fast_path_stats(CNotify_center *center, CNotify_fast_path_stats *out);
/* What the fast path's bounds did (docs/PROTOCOL.md "Fast path", "Bounds"): each a count since the
 * center was made. */
typedef struct CNotify_fast_path_guards {
    uint64_t unverified_closed; /* connections to this endpoint closed before they proved who they are
                                 * (a cap at accept, or 2 s gone by) */
    uint64_t credential_asks;   /* GetConnectionCredentials asked, never waited for (one per proved HELLO) */
    uint64_t answers;           /* Endpoint answers sent to Query (one by one, or one broadcast) */
    uint64_t answers_coalesced; /* queries answered by an answer already due (rate-limited) */
    uint64_t bus_kept;          /* direct-only posts also sent on the bus: an observer that announced
                                 * wanting them was not connected, or not kept */
    uint64_t drained;           /* frames read after their poster left the bus or connected again */
} CNotify_fast_path_guards;
void CNotify_center_get_fast_path_guards(CNotify_center *center, CNotify_fast_path_guards *out);
/* The fast path's contract (docs/PROTOCOL.md "Fast path"), for tools and other implementations:
 *   CNotify_protocol_fast_address: the abstract socket an endpoint token names, written as ss(8)
 *     and strace show it ("@darwin-notify/fp/<token>"; the '@' is the address's leading NUL).
 *   CNotify_protocol_fast_hello, CNotify_protocol_fast_post: the two frames a poster sends, as
 *     bytes; INVALID_REQUEST for one a receiver would refuse. */
uint32_t CNotify_protocol_fast_address(const char *token, char *out, size_t len);
uint32_t CNotify_protocol_fast_hello(uint64_t origin, uint64_t token, const char *unique_name, unsigned char *out,
                                     size_t cap, size_t *out_len);
uint32_t CNotify_protocol_fast_post(const char *name, uint64_t seq, unsigned char *out, size_t cap, size_t *out_len);
/* The ring (docs/PROTOCOL.md "The ring"): CNotify_protocol_fast_ring_setup, the 16 bytes of a
 * setup (sent with the ring's and the bell's descriptors); CNotify_protocol_fast_ring_record, the
 * record a frame of `len` bytes (1 to 65,536) is in a ring. INVALID_REQUEST with no room in `out`. */
uint32_t CNotify_protocol_fast_ring_setup(unsigned char *out, size_t cap, size_t *out_len);
uint32_t CNotify_protocol_fast_ring_record(const unsigned char *frame, size_t len, unsigned char *out, size_t cap,
                                           size_t *out_len);

/* Whether `name` is restricted to one user (`user.uid.N…`, docs/PROTOCOL.md): 0 for a plain
 * name, 1 with *out_uid = N, -1 for a `user.uid.` number that is no uid (nobody may post it). */
int CNotify_name_restricted_uid(const char *name, uint32_t *out_uid);

/* 1 if a post of `name` must carry a credential (docs/PROTOCOL.md "Credentials"): a valid
 * user.uid.N name, or a name this process's notify.conf reserves from others' posts; -1 if
 * nobody may post it; 0 otherwise. A poster that builds its own messages sends such names through
 * a center, which attaches one. */
int CNotify_name_needs_credential(const char *name);

/*
 * notify.conf(5): notifyd's configuration (`reserve`, `monitor`, `set`), read by every process
 * from $DARWIN_NOTIFY_CONF if set (a file, or a directory whose *.conf files are read in byte
 * order), else /etc/darwin-notify/notify.conf and then /etc/darwin-notify/notify.conf.d/ *.conf.
 * A file must be a regular file owned by root (or, from $DARWIN_NOTIFY_CONF, by this process's
 * user) that group and others cannot write; any other is skipped, and said so. A `reserve`d name
 * may be posted or set only by whom its mode allows (Apple's NOTIFY_ACCESS_* bits); root always.
 */
#define CNOTIFY_ACCESS_READ 1
#define CNOTIFY_ACCESS_WRITE 2

/* A problem found in a configuration: its file, its line (0: the whole file) and why. */
typedef void (*CNotify_conf_report)(void *context, const char *file, unsigned line, const char *problem);

/* Reads the configuration at `path` (NULL: where this process reads it) as the library does,
 * reporting every problem (a bad line is skipped; the rest applies). *out_bad (if not NULL): how
 * many. NULL_INPUT for a NULL report; OK otherwise, even with problems. Rules found are counted
 * in *out_reserves, *out_monitors, *out_sets when not NULL. */
uint32_t CNotify_conf_check(const char *path, CNotify_conf_report report, void *context, size_t *out_bad,
                            size_t *out_reserves, size_t *out_monitors, size_t *out_sets);

/* Whether `uid` (whose groups are `gids`) may post or set (CNOTIFY_ACCESS_WRITE) or observe
 * (CNOTIFY_ACCESS_READ) `name` under this process's notify.conf and the user.uid.N rule: OK or
 * NOT_AUTHORIZED (with the reserve that decided in CNotify_last_error). */
uint32_t CNotify_name_access(const char *name, uint32_t uid, const uint32_t *gids, size_t ngids, int access);

/* The `monitor` and `set` lines of this process's notify.conf, for the daemon that serves them:
 * calls `each` once per line, in the files' order; kind is "monitor" (arg = the path) or "set"
 * (value = the state). Returns how many. */
/* Reads this process's notify.conf again now, rather than within the second after a change. */
void CNotify_conf_reload(void);

typedef void (*CNotify_conf_line)(void *context, const char *kind, const char *name, const char *arg, uint64_t value);
size_t CNotify_conf_lines(CNotify_conf_line each, void *context);

/* Validates a namespace as the namespace observers do (D-Bus arg0namespace: dot-separated
 * elements of letters, digits, '_' and '-'): NULL_INPUT, INVALID_NAME (with a sentence in
 * CNotify_last_error) or OK. */
uint32_t CNotify_validate_namespace(const char *ns);

/* Validates a notification name: NULL_INPUT, INVALID_NAME (empty, too long, not UTF-8) or OK. */
uint32_t CNotify_validate_name(const char *name);

/*
 * Launch on post (launchd's LaunchEvents of com.apple.notifyd.matching; darwin-notify-launch(5)):
 * a job that darwin-notifyd's launcher started because a name it declared was posted checks in
 * here for its events, as launchd's jobs do with xpc_set_event_stream_handler. The handler runs
 * on a thread of the library's, one event at a time, in the launcher's order: first every event
 * since the launcher started the job (those queued while no job ran coalesced per name: `count`
 * posts of `name`), then each live one. Each event is consumed when handed over: the job gets it
 * once, and a job started again later does not get it again.
 *   job: the declaration's label (the file name without .conf); NULL: $DARWIN_NOTIFY_JOB, which
 *     the launcher sets for an exec job.
 *   bus: the launcher's bus (an address, "session" or "system"); NULL: $DARWIN_NOTIFY_LAUNCHER_BUS,
 *     else $DBUS_STARTER_ADDRESS (a service dbus-daemon started), else the system bus for root and
 *     the session bus for others.
 * A service job's check-in owns its D-Bus service name (the proof that it is the job). Once per
 * process. Returns OK once the launcher has taken the job's check-in; INVALID_NAME when the
 * launcher declares no such job, NOT_AUTHORIZED when the caller is not the job,
 * SERVER_NOT_FOUND when no launcher answers, INVALID_REQUEST on a second call; with a sentence
 * in CNotify_last_error. */
typedef struct CNotify_launch_event {
    const char *name;  /* the name posted */
    uint32_t count;    /* how many posts of it this event stands for: 1, or more when coalesced */
    uint64_t serial;   /* the launcher's number of the event for this job: increasing, from 1 */
} CNotify_launch_event;
typedef void (*CNotify_launch_handler)(void *context, const CNotify_launch_event *event);
uint32_t CNotify_launch_check_in(const char *job, const char *bus, CNotify_launch_handler handler, void *context);

/*
 * notify(3) tokens on a given center (its bus), for bindings and programs that use more than
 * the default bus. The tokens are ordinary notify tokens: notify_check, notify_cancel,
 * notify_suspend/resume and notify_get/set_state take them. A handler token calls
 * `handler(context, token)` on the delivery thread for each post (after suspension is applied)
 * and `release(context)` once it can no longer run.
 */
typedef void (*CNotify_token_handler)(void *context, int token);
uint32_t CNotify_center_register_check(CNotify_center *center, const char *name, int *out_token);
uint32_t CNotify_center_register_file_descriptor(CNotify_center *center, const char *name, int *notify_fd, int flags,
                                                 int *out_token);
uint32_t CNotify_center_register_signal(CNotify_center *center, const char *name, int sig, int *out_token);
uint32_t CNotify_center_register_handler(CNotify_center *center, const char *name, CNotify_token_handler handler,
                                         void *context, CNotify_release release, int *out_token);

/* The 64-bit state of a name on the center's bus (notify_get_state/notify_set_state by name).
 * Shared by every process on the bus and kept after the setter exits and across bus restarts;
 * 0 if never set. `user.uid.N` names: only uid N or root may set them. `self.` names: this
 * process only. */
uint32_t CNotify_center_get_state(CNotify_center *center, const char *name, uint64_t *state);
uint32_t CNotify_center_set_state(CNotify_center *center, const char *name, uint64_t state);

/* The wire contract's computed names (docs/PROTOCOL.md), for tools and other implementations:
 * the bucket interface a post of `name` travels on ("org.darwinnotify.Notify.Hxxx"), and the
 * file name of its state (32 hex digits). */
void CNotify_bucket_interface(const char *name, char out[32]);
void CNotify_state_file_name(const char *name, char out[33]);

/* The rest of the wire contract, so another implementation (or a test) can be checked against
 * this one without a bus:
 *   CNotify_protocol_match_rule: the match rule a process adds to observe `key` (a name, or with
 *     is_namespace a namespace), escaping included; INVALID_REQUEST if `len` is too small.
 *   CNotify_protocol_build_post: the Post signal of `name` numbered `seq`, marshalled as D-Bus
 *     sends it (serial 1); free *out_bytes with CNotify_protocol_free.
 *   CNotify_protocol_parse_post: reads marshalled bytes as a receiver does: INVALID_REQUEST (with
 *     a sentence) for anything that is not a Post, else the name and, if it carries one, the
 *     sequence number.
 *   CNotify_protocol_build_post_from: the same Post signed with `origin` (64 bits, never 0:
 *     docs/PROTOCOL.md "Origins"), as our library sends it.
 *   CNotify_protocol_post_origin: the origin a marshalled Post carries into *out, 0 if none. */
/* The dbus-daemon configuration the embedded bus runs with, for any private bus (tests, benchmarks):
 * `listen` its address, `type` its <type>, `pidfile` NULL for none, `policy` NULL for the embedded
 * bus's (this user's processes may do everything) or the <policy> elements (and <include>s) to use,
 * `limits` nonzero for the embedded bus's limits (50,000 match rules per connection), 0 for
 * dbus-daemon's built-in ones. INVALID_REQUEST if `len` is too small. */
uint32_t CNotify_bus_config(const char *listen, const char *type, const char *pidfile, const char *policy, int limits,
                            char *out, size_t len);
uint32_t CNotify_protocol_match_rule(const char *key, int is_namespace, char *out, size_t len);
uint32_t CNotify_protocol_build_post(const char *name, uint64_t seq, char **out_bytes, int *out_len);
uint32_t CNotify_protocol_build_post_from(const char *name, uint64_t seq, uint64_t origin, char **out_bytes,
                                          int *out_len);
uint32_t CNotify_protocol_post_origin(const char *bytes, int len, uint64_t *out);
/* A Post as libdbus hands it (`message`: a DBusMessage *, read, not changed), read as a receiver
 * reads it (a monitor's reader): INVALID_REQUEST for anything that is not a Post; else the name,
 * the sequence if it carries one, the origin (0: none), and how many posts it stands for (1, or
 * more for a bus copy its poster coalesced: docs/PROTOCOL.md "Bus copies, coalesced"). */
uint32_t CNotify_protocol_read_post(const void *message, char *out_name, size_t name_len, uint64_t *out_seq,
                                    int *out_has_seq, uint64_t *out_origin, uint32_t *out_count);
/* The receiver's rule for the numbers of posts that come by the bus alone (docs/PROTOCOL.md
 * "Origins"), for monitors and other implementations: per `origin` (0: none, then per `sender`)
 * and name, the number just seen again is a duplicate (*out_duplicate 1); a jump forward counts
 * the posts lost into *out_gaps, at most 2^20 a jump and 2^22 a sender, less the `count` - 1
 * posts the copy stands for besides itself (coalesced, not lost; `count` 0 or 1: itself only); a
 * jump back is a new numbering. The book is bounded as a center's is. One thread at a time per
 * book. */
typedef struct CNotify_sequences CNotify_sequences;
CNotify_sequences *CNotify_sequences_create(void);
uint32_t CNotify_sequences_note(CNotify_sequences *sequences, const char *sender, uint64_t origin, const char *name,
                                uint64_t seq, uint32_t count, int *out_duplicate, uint64_t *out_gaps);
void CNotify_sequences_destroy(CNotify_sequences *sequences);
uint32_t CNotify_protocol_parse_post(const char *bytes, int len, char *out_name, size_t name_len, uint64_t *out_seq,
                                     int *out_has_seq);
void CNotify_protocol_free(void *bytes);
/* The state directory of `bus` (an address, "system", "embedded", or NULL for the default), as
 * every client of that bus finds it: the predictable one, or the `<it>.XXXXXX` in use when
 * another user took it (docs/PROTOCOL.md, "State files"); not created (for the embedded bus its
 * runtime directory is). */
uint32_t CNotify_state_directory(const char *bus, char *out, size_t len);

/* The library's version, "MAJOR.MINOR.PATCH" (the VERSION file of the source tree). */
const char *CNotify_version(void);

/* A sentence about the latest failure on this thread ("" if none). */
const char *CNotify_last_error(void);

/* Apple-style name of a status code ("Invalid Name", ...). */
const char *CNotify_status_string(uint32_t status);

/* Which bus a center made with no address uses, and why: *scope is "DARWIN_NOTIFY_BUS" (the
 * variable names it), "system" (installed system-wide: the shared state directory exists and the
 * system bus answers), or "embedded" (the per-user bus, started on first use). */
uint32_t CNotify_default_bus(char *out_scope, size_t scope_len, char *out_address, size_t address_len);

/* The address a center on `bus` (an address, "session", "system", "embedded", or NULL for the
 * default) connects to, resolved as every center resolves it (guid= removed); the embedded bus is
 * started if it does not run. For tools that open a connection of their own (notifyutil --monitor). */
uint32_t CNotify_bus_address(const char *bus, char *out, size_t len);

/* Embedded bus control (used by notifyutil). Each returns a status and fills `out` (may be NULL). */
uint32_t CNotify_embedded_bus_start(char *out_address, size_t out_len);
uint32_t CNotify_embedded_bus_stop(void);
/* Sets *running to 1 if the embedded bus answers; fills the address and runtime directory. */
uint32_t CNotify_embedded_bus_status(int *running, char *out_address, size_t out_len, char *out_dir, size_t dir_len);

#ifdef __cplusplus
}
#endif

#endif /* CNOTIFY_DARWIN_NOTIFY_H */
