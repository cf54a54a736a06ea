/*
 * center/center.h: a center and its parts, one section per file of center/. Each sub-struct is
 * owned by the file named in its heading; another file touches it only through that file's
 * functions. Order of the files (each calls only those before it): registry, subscriptions,
 * received, delivery, outbox, state, lifecycle, center_ops.
 *
 * Layer: above transport/ (it reaches a transport only through cn_transport_ops, and is reached
 * by one only through the cn_transport_events it hands it), below api/.
 */
#ifndef CNOTIFY_CENTER_H
#define CNOTIFY_CENTER_H

#include "../transport/transport.h"

/* ---- registry.c: observer registrations ---- */
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
    /* distributed handlers (the center's `distributed` registry; name "" for every name): */
    CNotify_distributed_handler distributed_handler;
    char *object;              /* NULL: any object */
} cn_entry;
typedef struct cn_name_slot {
    cn_entry **entries;         /* `first` until more than CN_SLOT_INLINE observe the name */
    size_t count, cap;
    cn_entry *first[2];         /* most names have one or two observers: no second allocation */
} cn_name_slot;
#define CN_SLOT_INLINE 2
#define CN_REGISTRY_NAME_KEPT 96
#define CN_REGISTRY_KEPT 4
typedef struct cn_registry {
    cn_mutex lock;
    pthread_cond_t cond;            /* an invocation ended */
    unsigned waiting;               /* removers waiting on cond */
    cn_map names;                   /* name -> cn_name_slot */
    cn_map namespaces;              /* namespace -> cn_name_slot */
    cn_map ids;                     /* id -> cn_entry (live, not removed) */
    uint64_t next_id;
    cn_entry *running;              /* the entry whose callback runs now */
    /* The last name a snapshot was taken of and its entries, exact and through namespaces (docs/
     * DESIGN.md "A known poster's lane"): the next snapshot of that name copies them, with no
     * look-up in either map. Emptied by every add and remove. */
    int has_kept;
    char kept_name[CN_REGISTRY_NAME_KEPT];
    cn_entry *kept[CN_REGISTRY_KEPT];
    size_t nkept;
} cn_registry;
void cn_registry_init(cn_registry *r);
void cn_registry_free(cn_registry *r);
/* Adds `e` (taken); its id into *id. */
uint32_t cn_registry_add(cn_registry *r, cn_entry *e, uint64_t *id);
/* Drops the release of entry `id` (its context stays with the caller), if it is there. */
void cn_registry_disown(cn_registry *r, uint64_t id);
/* Which entries a removal takes. */
typedef int (*cn_entry_pred)(const cn_entry *e, const void *a, uint64_t b);
/* What a removal left: each key that lost entries, with how many (for the subscriptions). */
typedef struct cn_removal {
    struct { char *key; int is_namespace; size_t n; } *keys;
    size_t nkeys;
    size_t removed;
} cn_removal;
/* Removes the matching entries of `name` (NULL: of every name and namespace; or `id` != 0: that
 * one), waits out a running invocation of one (unless `in_delivery`), frees what no delivery holds. */
void cn_registry_remove(cn_registry *r, const char *name, int is_namespace, uint64_t id, cn_entry_pred pred,
                        const void *a, uint64_t b, int in_delivery, cn_removal *out);
void cn_removal_free(cn_removal *rm);
/* The entries observing `name` (exactly or through a namespace), pinned: *out is `stack` or a
 * malloc'd array; returns how many (0 when out of memory). */
size_t cn_registry_snapshot(cn_registry *r, const char *name, cn_entry **stack, size_t stack_len, cn_entry ***out);
int cn_registry_begin_run(cn_registry *r, cn_entry *e);
void cn_registry_end_run(cn_registry *r, cn_entry *e, int ran);

/* ---- subscriptions.c: which keys the transport must bring, counted ---- */
typedef struct cn_subscriptions {
    cn_mutex lock;
    pthread_cond_t cond;            /* a subscription settled */
    cn_map keys[CN_KEY_KINDS];      /* by cn_key_kind: key -> cn_subscription */
} cn_subscriptions;
void cn_subs_init(cn_subscriptions *s);
void cn_subs_free(cn_subscriptions *s);
/* One more registration of `key`: returns once the transport brings its posts (or is reconnecting,
 * and will). `may_wait` 0 on the loop thread, which must not wait for another thread's request
 * (it is the one that would read the answer). */
uint32_t cn_subs_retain(cn_subscriptions *s, cn_transport *t, const char *key, cn_key_kind kind, int may_wait);
/* `n` registrations of `key` fewer; the last one gone, the transport stops bringing it. */
void cn_subs_release(cn_subscriptions *s, cn_transport *t, const char *key, cn_key_kind kind, size_t n);
/* A connection of generation `gen` is in use: every key on it, with no reply awaited. */
void cn_subs_resubscribe(cn_subscriptions *s, cn_transport *t, uint64_t gen);

/* ---- received.c: sequence numbers of received posts (gaps, duplicates) ---- */
#define CN_RECEIVED_KEY_KEPT 128
typedef struct cn_received {
    cn_map last_seq;                /* "origin-or-sender\nname" -> last sequence; "sender\n" -> gaps counted */
    /* The last post's key and its slot in last_seq: a poster's next post of the same name finds it
     * with no look-up (docs/DESIGN.md "A known poster's lane"). "" when none; emptied with the map. */
    char last_key[CN_RECEIVED_KEY_KEPT];
    void **last_slot;
} cn_received;
typedef enum { CN_POST_FRESH, CN_POST_DUPLICATE } cn_post_verdict;
/* Notes `post` (loop thread); *gaps gets how many posts its number says were lost on the way. */
cn_post_verdict cn_received_note(cn_received *r, const cn_received_post *post, uint64_t *gaps);
void cn_received_forget(cn_received *r);

/* ---- center: counters, atomics updated without a lock ---- */
typedef struct cn_counters {
    _Atomic uint64_t received, delivered, gaps, reconnects, rejected;
    _Atomic uint64_t unmatched;     /* received, wanted by no observer (a wider rule's cost) */
    _Atomic uint64_t duplicates;    /* the same post a second time (PROTOCOL.md "Origins") */
    _Atomic uint64_t distributed_received, distributed_delivered, distributed_dropped, distributed_gaps;
} cn_counters;

/* ---- delivery.c: a post to its observers, one callback of a center at a time ---- */
struct cn_queued_post;
/* What the delivery reports to the center's lifecycle. */
typedef struct cn_delivery_owner {
    void *ctx;
    /* A callback destroyed the center, and the delivery that ran it is over (on that thread). */
    void (*destroyed)(void *ctx);
} cn_delivery_owner;
typedef struct cn_delivery {
    cn_delivery_owner owner;
    cn_mutex lock;           /* held around every callback */
    cn_mutex self_lock;      /* the queue of `self.` posts not yet delivered */
    struct cn_queued_post *self_head, *self_tail;
    _Atomic int self_queued;
    _Atomic int destroy_wanted;     /* destroyed: nothing more is delivered; deferred: ... */
    pthread_t destroyer;            /* ... this thread, whose callback destroyed it, finishes it */
} cn_delivery;

typedef struct CNotify_center CNotify_center;
void cn_delivery_init(cn_delivery *d, cn_delivery_owner owner);
void cn_delivery_free(cn_delivery *d);
/* Delivers a received post (loop thread), then any `self.` posts its callbacks made. When a
 * callback destroyed the center, the owner's `destroyed` has run when this returns. */
void cn_deliver(CNotify_center *c, const cn_received_post *post);
/* Queues a post of a `self.` name and delivers the queue unless a callback of this center runs on
 * this thread or another: that thread delivers it when its callback returns. As above. */
uint32_t cn_deliver_self(CNotify_center *c, const char *name);
int cn_in_delivery(CNotify_center *c);
/* A callback asks for the center's destroy: deferred to the end of its delivery. */
void cn_delivery_defer_destroy(CNotify_center *c);
/* The center is being destroyed from outside its callbacks: nothing more is delivered. */
void cn_delivery_close(CNotify_center *c);
/* The post this thread is delivering for `c`, or NULL. */
const cn_received_post *cn_delivering_post(CNotify_center *c);
/* Delivers a distributed post (loop thread) to the handlers of its name and of every name whose
 * object filter it passes, as cn_deliver does for posts. */
void cn_deliver_distributed(CNotify_center *c, const cn_received_distributed *post, int from_this_center);

/* ---- outbox.c: numbering and sending posts ---- */
typedef struct cn_outbox {
    cn_mutex lock;           /* post_counts: short, never across a send */
    cn_mutex restricted_lock;/* restricted posts leave in the order of their numbers */
    cn_map post_counts;             /* name -> posts so far by this origin (the sequence) */
    cn_map distributed_counts;      /* the same for distributed posts, numbered apart */
    uint64_t origin;                /* who we are, whatever connection carries our posts */
    uint64_t previous_origin;       /* the one before (posts of it may still arrive) */
} cn_outbox;
void cn_outbox_init(cn_outbox *o);
void cn_outbox_free(cn_outbox *o);
int cn_outbox_set_origin(cn_outbox *o);              /* 0, or -1 with no randomness */
uint32_t cn_outbox_post(CNotify_center *c, const char *name, int restricted);
uint32_t cn_outbox_post_distributed(CNotify_center *c, const cn_outgoing_distributed *post);
int cn_outbox_is_ours(cn_outbox *o, uint64_t origin);

/* ---- state.c: the values of names ---- */
typedef struct cn_state_store {
    cn_mutex lock;
    char *dir;                      /* D, resolved and checked once */
    char *plain;                    /* D/plain (or the plain.* in use), found once; NULL to find again */
    char uid_dir[PATH_MAX];         /* the last uid.N directory found ... */
    uid_t uid_dir_owner;            /* ... for this uid ... */
    struct timespec uid_dir_stamp;  /* ... while D's mtime is this: D unchanged, the answer holds */
    cn_map self_states;             /* `self.` name -> state */
} cn_state_store;
void cn_state_init(cn_state_store *s);
void cn_state_free(cn_state_store *s);
uint32_t cn_state_get(CNotify_center *c, const char *name, uint64_t *out);
uint32_t cn_state_set(CNotify_center *c, const char *name, uint64_t value);

/* ---- lifecycle.c: a center's life ---- */
typedef enum cn_lifecycle {
    CN_LIFE_LIVE = 0,
    CN_LIFE_DESTROYED,              /* destroy was called: the center is freed by cn_center_dispose */
} cn_lifecycle;

struct CNotify_center {
    char *bus_spec;                 /* what the user asked for (NULL: the default) */
    _Atomic int lifecycle;          /* cn_lifecycle */
    cn_counters counters;
    cn_loop loop;
    cn_transport *transport;
    cn_registry registry;
    cn_registry distributed;        /* distributed handlers, by name ("" for every name) */
    cn_subscriptions subs;
    cn_received received;
    cn_received distributed_received;
    cn_delivery delivery;
    cn_outbox outbox;
    cn_state_store state;
    int free_on_loop_exit;          /* disposed on its own loop thread: the loop's end frees it */
};

CNotify_center *cn_center_new(const char *bus, uint32_t *status);
CNotify_center *cn_center_default(void);
/* Starts the transport (the first connection, in this thread) once. */
uint32_t cn_center_start(CNotify_center *c);
/* Destroy: marks the center destroyed and disposes of it now, or, from inside one of its callbacks,
 * once that delivery is over. */
void cn_center_destroy(CNotify_center *c);
/* The one place that frees a center: joins its loop and frees it, or, on its own loop thread, stops
 * the loop, which frees it on its way out (cn_loop_owner.ended). */
void cn_center_dispose(CNotify_center *c);
void cn_center_flush_all(int timeout_ms);
int cn_center_is_default(CNotify_center *c);
uint32_t cn_center_flush(CNotify_center *c, int timeout_ms);
const char *cn_center_address(CNotify_center *c);
void cn_center_stats(CNotify_center *c, CNotify_stats *out);
void cn_center_set_fast_path(CNotify_center *c, int enabled);
void cn_center_fast_path_stats(CNotify_center *c, CNotify_fast_path_stats *out);
void cn_center_fast_path_guards(CNotify_center *c, CNotify_fast_path_guards *out);
uint64_t cn_center_unmatched(CNotify_center *c);
void cn_center_distributed_stats(CNotify_center *c, CNotify_distributed_stats *out);
/* Distributed notifications (center_ops.c): the arguments checked by the API already. */
uint32_t cn_center_post_distributed(CNotify_center *c, const char *name, const char *object, const CNotify_plist *user_info,
                                    uint32_t options);
uint32_t cn_center_add_distributed(CNotify_center *c, cn_entry *e, uint64_t *out_id);
uint32_t cn_center_remove_distributed(CNotify_center *c, uint64_t id);

/* ---- center_ops.c: what the API asks of a center (arguments already checked) ---- */
uint32_t cn_center_post(CNotify_center *c, const char *name);
uint32_t cn_center_add(CNotify_center *c, cn_entry *e, uint64_t *out_id);
/* Removes the entries of `name` (NULL: of all) that `pred` takes, or entry `id` (!= 0: then `pred`
 * is not used); returns how many. */
size_t cn_center_remove(CNotify_center *c, const char *name, int is_namespace, uint64_t id, cn_entry_pred pred,
                        const void *a, uint64_t b);
uint32_t cn_center_current_post(CNotify_center *c, CNotify_post_info *out);

#endif
