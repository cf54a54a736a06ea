/*
 * transport/fast/fast.h: the same-host fast path (docs/PROTOCOL.md "Fast path"), one section per file.
 * A post goes on the bus as always, and also straight from the poster to each process on this
 * host that announced, over the bus, an endpoint observing the post's bucket: one connection of a
 * channel (a Unix seqpacket socket) per poster and observer, authenticated by the kernel
 * (SO_PEERCRED) and checked against what the bus says about the announcing connection. The receiver delivers whichever copy
 * comes first and drops the other. The bus stays the control plane: discovery, credentials, the
 * order barrier (Sync), departures (NameOwnerChanged), and every foreign client.
 *
 * Layer: transport/, beside the bus transport, which it wraps: it calls bus.h's functions, and
 * the bus reaches it only through the cn_bus_fast_hooks table it is handed. Below center/, which
 * sees a cn_transport. Only files of this folder and the entry point (transports.c) include it.
 *
 * Two parts (docs/DESIGN.md "Fast path: a control plane over channels"): the channels move frames
 * (channel.h: the contract; channels.c: their table; channel_seqpacket.c: the first), and these
 * files are the control plane, which decides who may talk and what a frame means: announcements
 * and Query (fast_announce), proofs of who a poster is (fast_accept), barriers (Sync) and the order
 * of a poster's posts across both paths (fast_endpoint), and the records of posters (fast_posters)
 * and of peers (fast_peers, fast_post). Which copy of a post is a duplicate is the center's rule
 * alone (center/received.c): the control plane marks each post with the path it came by.
 *
 * Order of the files (each calls only those before it, the channel's through its table, and the
 * bus files): channels, fast_wire, fast_files, fast_announce, fast_posters, fast_endpoint,
 * fast_accept, fast_coalesce, fast_peers, fast_post, fast_transport.
 */
#ifndef CNOTIFY_FAST_H
#define CNOTIFY_FAST_H

#include "../bus/bus.h"
#include "channel.h"

/* ---- fast_wire.c: endpoint tokens and frames (PROTOCOL.md "Fast path") ---- */
#define CN_FAST_TOKEN_LEN 32            /* an endpoint token: 32 lowercase hex digits */
enum { CN_FAST_HELLO = 1, CN_FAST_POST = 2, CN_FAST_SYNC = 3 };
/* A frame as read: `name` (POST) or `unique_name` (HELLO) point into the caller's buffer. */
typedef struct cn_fast_frame {
    int type;
    uint64_t origin, token;             /* HELLO (both), SYNC (token) */
    const char *unique_name;            /* HELLO: the poster's unique name on the bus */
    uint64_t seq;                       /* POST */
    const char *name;                   /* POST */
} cn_fast_frame;
int cn_fast_token_new(char out[CN_FAST_TOKEN_LEN + 1]);
int cn_fast_token_valid(const char *token);
size_t cn_fast_hello(uint64_t origin, uint64_t token, const char *unique_name, unsigned char *out, size_t cap);
size_t cn_fast_post(const char *name, uint64_t seq, unsigned char *out, size_t cap);
size_t cn_fast_sync(uint64_t token, unsigned char *out, size_t cap);
/* `buf` holds `len` bytes and room for one more. 0 and the frame, or -1 for anything malformed. */
int cn_fast_parse(unsigned char *buf, size_t len, cn_fast_frame *out);
unsigned cn_fast_bucket(const char *name);
static inline int cn_fast_bit(const unsigned char *bitmap, unsigned bucket) { return bitmap[bucket >> 3] >> (bucket & 7) & 1; }

/* Caps: past them a name falls back to the bus, nothing fails (PROTOCOL.md "Fast path", limits). */
#define CN_FAST_PEERS_MAX 1024          /* endpoints a poster keeps connections to */
#define CN_FAST_POSTERS_MAX 1024        /* connections an endpoint keeps from posters */
/* Either cap is also at most a quarter of the process's descriptor limit (RLIMIT_NOFILE, soft), so
 * that the fast path never takes the descriptors the program needs: 256 under the usual 1,024. */
#define CN_FAST_FD_SHARE 4
#define CN_FAST_QUERIES_MAX 1024        /* askers awaiting an answer (then one broadcast answers them all) */
#define CN_FAST_ANSWER_MS 100           /* an asker is answered at most once in this long; one broadcast too */
#define CN_FAST_ANSWERS_PER_S 1000      /* answers sent one by one in a second; past it, one broadcast */
#define CN_FAST_ASKERS_KEPT 4096        /* askers remembered (their last answer) before the table is cleared */
/* Connections an endpoint accepted that have not proved who they are yet (HELLO, then the Sync
 * with its token by the bus, then the bus's credentials): at most this many at once, this many
 * of one uid (SO_PEERCRED at accept), and each at most CN_FAST_PROOF_MS; then closed, counted. */
#define CN_FAST_UNVERIFIED_MAX 64
#define CN_FAST_UNVERIFIED_PER_UID 8
#define CN_FAST_PROOF_MS 2000
/* Of the connections an endpoint keeps, a uid other than its own and root's holds at most this
 * share (1/N of the cap): another user's connections never take all the room. */
#define CN_FAST_OTHER_UID_SHARE 4
#define CN_FAST_SYNCS_KEPT 32           /* Sync tokens a poster's record keeps, unmatched, in order */
#define CN_FAST_RETRY_MS 1000           /* after a failed or dropped connection */
#define CN_FAST_STALL_MS 50             /* a poster waits at most this for room at an observer that is behind */
/* A new connection's first read (docs/DESIGN.md "A connection's first read"): the observer took the
 * HELLO, then reads the posts only once the HELLO's Sync has come by the bus, behind every bus
 * copy this poster sent before it, and the bus answered who made the connection. A poster that
 * fills the connection meanwhile waits for it (off the loop thread) up to CN_FAST_GRACE_MS from
 * the connection, not CN_FAST_STALL_MS. One grace per peer until it is seen reading; a uid whose
 * peer let one run out unread gets none for CN_FAST_GRACE_DENIED_MS (CN_FAST_GRACE_UIDS kept). */
#define CN_FAST_GRACE_MS CN_FAST_PROOF_MS /* an endpoint closes a connection not proved by then anyway */
#define CN_FAST_GRACE_DENIED_MS 60000
#define CN_FAST_GRACE_UIDS 8
#define CN_FAST_CHECK_EVERY 8           /* direct copies between two looks at how full a peer's socket is */

typedef struct cn_fast cn_fast;

/* ---- fast_files.c: the fast path's poll set (one epoll descriptor, one source of the loop).
 * Each record it polls begins with a cn_fast_file: its channel's connection and its own callback,
 * as dbus-broker's DispatchFile. ---- */
typedef struct cn_fast_file cn_fast_file;
/* Returns 0 when it only read frames of a proved connection that stays as it was; nonzero when a
 * connection came, went or changed its state (the loop's next round prepares: loop.h). */
typedef int (*cn_fast_ready_fn)(cn_fast *f, cn_fast_file *file, uint32_t events);
struct cn_fast_file {
    cn_channel *ch;                     /* NULL while not connected (or not listening) */
    cn_fast_ready_fn ready;             /* called with the epoll events when ch->fd is ready */
    uint32_t events;                    /* what it is watched for (cn_fast_watch, _rewatch) */
    int direct;                         /* polled by the loop itself, out of the epoll set (cn_fast_direct) */
};
/* Polls file->ch->fd for `events` (EPOLLIN, or 0 for hang-ups only): 0, or -1. */
int cn_fast_watch(cn_fast *f, cn_fast_file *file, uint32_t events);
void cn_fast_rewatch(cn_fast *f, cn_fast_file *file, uint32_t events);
void cn_fast_unwatch(cn_fast *f, cn_fast_file *file);
/* A read set the connection's bell (cn_channel_frames.rewatch): it is polled from now on, its
 * descriptor for hang-ups only. Loop thread. */
void cn_fast_bell_set(cn_fast *f, cn_fast_file *file);
/* A read of a connection with a bell that may have left frames (it took as many as it asked for):
 * the bell reported again at the next round. Nothing for one without a bell. Loop thread. */
void cn_fast_rearm(cn_fast *f, cn_fast_file *file);
/* Out of the poll set, closed, ch NULL (nothing when not connected). */
void cn_fast_file_close(cn_fast *f, cn_fast_file *file);
/* The ready files' callbacks, at most 64 (the loop comes back for more): nonzero when one of
 * them returned nonzero. */
int cn_fast_dispatch(cn_fast *f);
/* A few files watched for EPOLLIN alone, closed only by the loop thread (a poster's proved
 * connection), are polled by the loop itself rather than through the epoll descriptor: a post's
 * wake-up is then one poll, not a poll and an epoll_wait, and the kernel wakes the loop from the
 * socket, not through the epoll set (docs/DESIGN.md "The loop"). cn_fast_direct moves `file` out
 * of the epoll set into the loop's (1, or 0: no room or not watched for EPOLLIN alone); its
 * rewatch, unwatch or close moves it back or out. Loop thread. */
#define CN_FAST_DIRECT_MAX 8
int cn_fast_direct(cn_fast *f, cn_fast_file *file);
/* The prepare: the epoll descriptor and every direct file, into fds (at most cap): how many. */
size_t cn_fast_files_prepare(cn_fast *f, struct pollfd *fds, size_t cap);
/* The handle: the direct files' callbacks, then the epoll set's; nonzero when one of them returned
 * nonzero, or when the direct files changed since the prepare (a close, a rewatch: the next round
 * prepares again, and whatever was ready is still ready then). */
int cn_fast_files_handle(cn_fast *f, const struct pollfd *fds, size_t n);

/* ---- the observer's side: fast_announce, fast_posters, fast_endpoint, fast_accept (loop thread, but
 * the counts: endpoint.lock) ---- */
typedef struct cn_fast_poster cn_fast_poster;
typedef struct cn_fast_endpoint {
    cn_mutex lock;               /* counts, wildcards, announce_due (a leaf) */
    unsigned counts[CN_BUCKET_MASK + 1];/* subscriptions per bucket */
    cn_map namespaces;                  /* namespace -> its subscriptions (a count): announced by name,
                                         * every bucket past CN_FAST_NAMESPACES_MAX of them */
    _Atomic int announce_due;           /* the buckets changed: broadcast them at the next round */
    /* loop thread only: */
    cn_fast_file listen;                /* not listening until the first subscription */
    char token[CN_FAST_TOKEN_LEN + 1];
    cn_fast_poster **posters;           /* connections from posters, and the records of posters */
    size_t nposters, capposters;
    cn_map by_sender;                   /* unique name -> its record (verified, or made by its Sync) */
    size_t unverified;                  /* connections not proved yet (CN_FAST_UNVERIFIED_MAX) */
    uint64_t next_deadline;             /* ms: the earliest an unverified connection runs out of time */
    uint64_t next_request;              /* credentials requests, numbered */
    uint64_t closes;                    /* connections closed, ever: did a read end one (poster_ready) */
    /* fast_announce.c: */
    char **queries;                     /* who asked (Query) and awaits its answer */
    size_t nqueries, capqueries;
    cn_map askers;                      /* unique name -> (ms of its last answer) << 1 | awaiting one */
    int broadcast_answer;
    uint64_t broadcast_at;              /* ms of the last broadcast answer */
    uint64_t second_at;                 /* ms: the second the answers below are counted in */
    unsigned answers_in_second;
} cn_fast_endpoint;

/* ---- fast_announce.c: what the observer announces, and its answers to Query (loop thread) ---- */
void cn_announce_init(cn_fast_endpoint *e);
void cn_announce_free(cn_fast *f);
void cn_endpoint_subscribed(cn_fast *f, const char *key, cn_key_kind kind, int delta);
void cn_endpoint_reset_counts(cn_fast *f);
/* The buckets are announced (and the endpoint listens, if it does not yet) at the next round. */
void cn_endpoint_announce_soon(cn_fast *f);
/* Announces what changed, answers who asked (at most once per CN_FAST_ANSWER_MS each), starts
 * listening on the first subscription; lowers *timeout_ms to the next answer due. */
void cn_announce_prepare(cn_fast *f, int *timeout_ms);
/* A Query: answered at the next round, or later (coalesced) if this asker had one just now. */
void cn_endpoint_query(cn_fast *f, const char *sender);
void cn_announce_forget(cn_fast *f, const char *unique);
void cn_announce_disconnected(cn_fast *f);

/* ---- fast_posters.c: an endpoint's connections and records of posters (loop thread) ---- */
/* CN_P_HELLO: accepted, its HELLO not read. CN_P_PROOF: HELLO read, its Sync awaited. CN_P_CRED:
 * the bus's credentials asked. CN_P_SYNC: proved, a barrier's Sync awaited. CN_P_READY: read. */
enum { CN_P_HELLO, CN_P_PROOF, CN_P_CRED, CN_P_SYNC, CN_P_READY, CN_P_CLOSED };
struct held_frames;
/* A poster's lane (fast_endpoint.c, docs/DESIGN.md "A known poster's lane"): the last name read
 * from its connection whose guard let it through, under notify.conf's generation `policy`, and
 * that name's slot in read_upto. The next frame of the same name asks neither again. Emptied
 * whenever the connection, its credentials or read_upto change (cn_poster_lane_reset). */
#define CN_FAST_LANE_NAME 95
typedef struct cn_fast_lane {
    char name[CN_FAST_LANE_NAME + 1];   /* "" when empty */
    void **read;                        /* its slot in read_upto */
    uint64_t policy;                    /* cn_policy_generation() when its guard was asked */
} cn_fast_lane;
struct cn_fast_poster {
    cn_fast_file io;                    /* first: the polled connection; ch NULL once closed */
    int state;
    int polled;                         /* in the epoll set or direct (out of both after a hang-up while not reading) */
    int departed;                       /* its bus connection left: every barrier has passed */
    pid_t pid;                          /* SO_PEERCRED: the kernel's word */
    uid_t uid;
    cn_fast_lane lane;                  /* beside what a frame reads: one post touches few lines */
    cn_channel_groups groups;           /* its gid, then its supplementary groups (channel.h) */
    uint64_t accepted_at;               /* ms; an unverified connection's clock */
    uint64_t request;                   /* P_CRED: the credentials request */
    char claim[256];                    /* unverified: the unique name its HELLO claims */
    char unique[256];                   /* its bus connection, once verified (or from its Sync) */
    uint64_t origin, token;             /* from HELLO; token: then the barrier awaited (P_SYNC) */
    uint64_t syncs[CN_FAST_SYNCS_KEPT]; /* Sync tokens that came by the bus, oldest first, unmatched */
    unsigned nsyncs;
    cn_map read_upto;                   /* name -> the highest number read from its connection */
    struct held_frames *held;           /* read with a SYNC before them, waiting for its Sync; NULL: none */
};
void cn_endpoint_init(cn_fast_endpoint *e);
void cn_endpoint_free(cn_fast *f);
int cn_poster_list(cn_fast_endpoint *e, cn_fast_poster *p);
int cn_poster_unverified(const cn_fast_poster *p);  /* connected, not proved yet */
/* Proved connections being read move to the loop's own poll set while it has room (cn_fast_direct). */
void cn_endpoint_offer_direct(cn_fast *f);
void cn_poster_close_fd(cn_fast *f, cn_fast_poster *p);
/* Its lane emptied: its connection or credentials changed. */
void cn_poster_lane_reset(cn_fast_poster *p);
/* read_upto emptied (a new numbering, its bound), and the lane, whose slot was in it. */
void cn_poster_forget_reads(cn_fast_poster *p);
void cn_poster_drop(cn_fast *f, cn_fast_poster *p); /* unlisted (and its record gone) and freed */
/* A connection ends: the record stays while it is the bus connection's, else it goes. */
void cn_poster_close(cn_fast *f, cn_fast_poster *p);
cn_fast_poster *cn_poster_record(cn_fast *f, const char *unique); /* made if none; NULL: no room */
void cn_poster_sync_came(cn_fast_poster *r, uint64_t token);
int cn_poster_sync_known(const cn_fast_poster *r, uint64_t token);
/* A barrier with `token` passes: its Sync and every older one are used up. 1 if it had come. */
int cn_poster_sync_pass(cn_fast_poster *r, uint64_t token);
void cn_poster_set_reading(cn_fast *f, cn_fast_poster *p, int reading);
/* A connection that hung up while not read leaves the epoll set; its frames stay in the socket. */
void cn_poster_unpoll(cn_fast *f, cn_fast_poster *p);

/* ---- fast_endpoint.c: reading a proved connection ---- */
/* Reads it: from the loop, 8 batches of 32 frames; with `events` 0, to its end. */
void cn_endpoint_read(cn_fast *f, cn_fast_poster *p, uint32_t events);
/* It may be read again (its barrier passed): the held frames, then the socket when it is out of
 * the epoll set or departed. */
void cn_endpoint_resume(cn_fast *f, cn_fast_poster *p);
/* A post that came by the bus, before it goes up: every frame its poster wrote before it is
 * delivered first; 1 when its poster reaches us by both paths (with this origin): two_paths. */
int cn_endpoint_before_bus(cn_fast *f, const cn_received_post *post);

/* ---- fast_accept.c: accepting and proving connections, departures ---- */
void cn_endpoint_prepare(cn_fast *f, int *timeout_ms);
/* The listener's callback (cn_fast_file): accepts the connections waiting. */
int cn_endpoint_accept_ready(cn_fast *f, cn_fast_file *listen, uint32_t events);
void cn_endpoint_sync(cn_fast *f, const char *sender, uint64_t token);
/* The bus's answer to credentials request `request` (cn_bus_fast_ask_credentials). */
void cn_endpoint_credentials(cn_fast *f, uint64_t request, int ok, pid_t pid, uid_t uid);
void cn_endpoint_sender_gone(cn_fast *f, const char *unique);
void cn_endpoint_disconnected(cn_fast *f);

/* ---- fast_coalesce.c: bus copies of posts that reached every known observer directly, per name
 * at most one at once and one a CN_FAST_COALESCE_MS later standing for the rest (peers.lock) ---- */
#define CN_FAST_COALESCE_MS 10          /* a name's bus copies are at least this far apart, the rest held */
#define CN_FAST_COALESCE_NAMES 4096     /* names remembered; past it every held copy is sent, then forgotten */
typedef struct cn_coalesced cn_coalesced;
typedef struct cn_fast_coalesce {
    cn_map names;                       /* name -> its cn_coalesced */
    cn_coalesced **held;                /* names with posts held back */
    size_t nheld, capheld;
    _Atomic uint64_t due_at;            /* ms: the earliest held copy is due; UINT64_MAX: none (the loop's
                                         * round then takes no lock) */
} cn_fast_coalesce;
void cn_coalesce_init(cn_fast_coalesce *c);
void cn_coalesce_free(cn_fast *f);
/* A post every observer the poster knows of took directly: on the bus now, or held. */
uint32_t cn_coalesce_post_locked(cn_fast *f, const cn_outgoing_post *post);
/* A post that needs its bus copy now: sent, carrying the posts of its name held so far. */
uint32_t cn_coalesce_send_locked(cn_fast *f, const cn_outgoing_post *post);
/* Every held copy sent (or, `send` 0, forgotten: the bus is gone). */
void cn_coalesce_flush_locked(cn_fast *f, int send);
/* Loop thread: the held copies that are due, sent; lowers *timeout_ms to the next. */
void cn_coalesce_prepare(cn_fast *f, int *timeout_ms);

/* ---- fast_peers.c: the poster's side ---- */
typedef struct cn_fast_peer cn_fast_peer;
enum { CN_K_KNOWN, CN_K_READY };

struct cn_fast_peer {
    cn_fast_file io;                    /* first: the polled connection; ch NULL while not connected */
    int state;
    char unique[256];
    char token[CN_FAST_TOKEN_LEN + 1];
    unsigned char bitmap[CN_FAST_BITMAP_BYTES];
    char **namespaces;                  /* announced with the bitmap: their posts go directly too */
    size_t nnamespaces;
    int observes;                       /* any bit set, or a namespace */
    uint32_t features;                  /* what its endpoint announced it reads (CN_FAST_FEATURE_*) */
    uid_t uid;                          /* the listener's, from the kernel */
    cn_channel_groups groups;           /* its gid, then its supplementary groups (channel.h) */
    int mine_cut;                       /* this process was in more groups than it keeps of ours */
    uint64_t retry_at;                  /* ms; 0: connect at the next round */
    uint64_t behind_since;              /* ms: its socket had no room for a post; 0: keeping up */
    uint64_t pressed_since;             /* ms: its connection was found over half full; 0: not */
    unsigned unchecked;                 /* direct copies since the last look at how full it is */
    uint64_t grace_until;               /* ms: this connection's first read may take until then; 0: none */
    int grace_spent;                    /* a grace ran out before it was seen reading: none again until it is */
    /* This connection: a direct copy sent; the observer seen to read one (its socket found empty
     * after a direct copy, so it is past its barrier and reads this connection before any later
     * bus copy of ours). Until then a post it took keeps its bus copy (fast_coalesce.c). */
    unsigned char posted, reads;
};

/* A connection made to an endpoint, awaiting the bus's word on who made its announcement. */
typedef struct cn_fast_connecting {
    uint64_t request;                   /* its credentials request (cn_bus_fast_ask_credentials) */
    char unique[256], token[CN_FAST_TOKEN_LEN + 1];
    cn_channel *ch;
    cn_channel_peer who;                /* who listens there, as the kernel says */
} cn_fast_connecting;
#define CN_FAST_CONNECTING_MAX 16       /* connections awaiting their answer at once */

typedef struct cn_fast_peers {
    cn_mutex lock;               /* the table; around a post's copies and a connection's Sync */
    cn_fast_peer **peers;
    size_t npeers, cap;
    _Atomic uint64_t origin;            /* the center's, from its first post: 0 until it posts */
    uint64_t connect_after;             /* a test's hook (cn_test_connect_after), read once: 0 off */
    _Atomic uint64_t posts;             /* posts made, counted only while that hook is on */
    _Atomic int query_due;              /* ask every endpoint at the next round */
    _Atomic int behind;                 /* peers whose socket had no room for a post (they await a SYNC) */
    _Atomic int pressed;                /* peers whose socket is over half full: the next post waits for room */
    int unlisted;                       /* an announcement was not kept (the table was full): until the
                                         * next connection to the bus, a direct-only post takes the bus too */
    _Atomic uint64_t connect_at;        /* ms: the earliest a peer is due to be connected; UINT64_MAX: none
                                         * (the loop's round then never takes the lock: a posting thread
                                         * holds it most of the time in a flood) */
    cn_fast_connecting connecting[CN_FAST_CONNECTING_MAX]; /* the loop thread's alone */
    size_t nconnecting;
    struct { uid_t uid; uint64_t until; } graceless[CN_FAST_GRACE_UIDS]; /* uids given no grace until then */
} cn_fast_peers;
void cn_peers_init(cn_fast_peers *p);
void cn_peers_free(cn_fast *f);
/* The peer's connection closed; connected again at `retry_at` (ms) if it observes something. */
void cn_peer_disconnect_locked(cn_fast *f, cn_fast_peer *peer, uint64_t retry_at);
/* A connection's grace (CN_FAST_GRACE_MS) ran out, or the connection ended within it, before its
 * observer was seen reading: none for this peer until it is, none for its uid for
 * CN_FAST_GRACE_DENIED_MS. peers.lock held. */
void cn_peer_grace_spent_locked(cn_fast *f, cn_fast_peer *peer, uint64_t now);
/* Whether a connection to `uid` made now gets a grace. peers.lock held. */
int cn_peers_grace_allowed_locked(const cn_fast_peers *p, uid_t uid, uint64_t now);
void cn_peers_announced(cn_fast *f, const char *sender, const char *token, const unsigned char *bitmap,
                        const char *const *namespaces, size_t n, uint32_t features);
void cn_peers_gone(cn_fast *f, const char *unique);
void cn_peers_disconnected(cn_fast *f);
void cn_peers_prepare(cn_fast *f, int *timeout_ms);
/* The bus's answer to credentials `request`: 1 when it was a connection's of this file (taken). */
int cn_peers_credentials(cn_fast *f, uint64_t request, int ok, pid_t pid, uid_t uid);

/* ---- fast_post.c: a post's direct copies, and a peer that reads slower than we post ---- */
/* Any thread, the outbox's lock held: the post to every connected peer observing its bucket,
 * then on the bus (unless `direct_only` and every peer that announced wanting it took it), all
 * under peers.lock. */
uint32_t cn_peers_post(cn_fast *f, const cn_outgoing_post *post, int direct_only);
int cn_peers_is_ready(const cn_fast_peer *peer);
/* Any thread, no lock held: waits, at most CN_FAST_STALL_MS from when it fell behind (or its socket
 * was found over half full), until every such peer has room again; one still without room then is
 * disconnected (the bus copies from then on). */
void cn_peers_await_room(cn_fast *f);

/* ---- fast_transport.c: the fast path as a transport around the bus ---- */
struct cn_fast {
    cn_transport base;                  /* first: a cn_fast is a cn_transport */
    cn_transport *bus;                  /* the bus transport it wraps (owned) */
    cn_bus *bus_impl;                   /* the same, for bus.h's functions */
    cn_transport_events up;             /* the center's */
    cn_loop *loop;
    int epoll_fd;                       /* every descriptor of the fast path but the direct ones */
    cn_fast_file *direct[CN_FAST_DIRECT_MAX]; /* fast_files.c: polled by the loop itself (loop thread) */
    size_t ndirect;
    cn_fast_file *direct_polled[CN_FAST_DIRECT_MAX]; /* the last prepare's, in its order */
    size_t ndirect_polled;
    uint64_t direct_changes, direct_prepared; /* a file left `direct`, ever; and as of the last prepare */
    int direct_wanted;                  /* a file may be moved to `direct` (cn_endpoint_offer_direct) */
    struct epoll_event *batch;          /* fast_files.c: the events being dispatched, and which (loop thread) */
    int batch_n, batch_at;
    const cn_channel_ops *chan;         /* the channel its connections are made on (cn_channels[0]) */
    _Atomic int source_added;
    _Atomic int enabled;                /* CNOTIFY_FAST_PATH_OFF, _ON or _DIRECT */
    size_t fd_cap;                      /* connections either side keeps (CN_FAST_FD_SHARE), at creation */
    cn_fast_endpoint endpoint;
    cn_fast_peers peers;
    cn_fast_coalesce coalesce;          /* under peers.lock */
    _Atomic uint64_t fast_sent, fast_delivered, duplicates, fallbacks, refused, bus_skipped;
    /* CNotify_fast_path_guards */
    _Atomic uint64_t unverified_closed, credential_asks, answers, answers_coalesced, bus_kept, drained;
};
/* The fast path around a bus transport it makes for `spec` (arguments as cn_bus_transport_new's). */
cn_transport *cn_fast_transport_new(const char *spec, int resolved, cn_bus_kind kind, char *address, cn_loop *loop,
                                    cn_transport_events events);
/* Whether `t` is a fast path (one made by cn_fast_transport_new). */
int cn_fast_transport_is(const cn_transport *t);
/* The switch and the counters of CNotify_center_set_fast_path and _get_fast_path_stats/_guards. */
void cn_fast_transport_set(cn_transport *t, int enabled);
void cn_fast_transport_stats(cn_transport *t, CNotify_fast_path_stats *out);
void cn_fast_transport_guards(cn_transport *t, CNotify_fast_path_guards *out);

#endif
