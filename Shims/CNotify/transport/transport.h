/*
 * transport/transport.h: what the center needs from a transport, what a transport reports up, and
 * the entry point that picks and opens one (transport/transports.c). Each transport lives in a
 * folder of its own: transport/bus/ (the bus, over libdbus), transport/fast/ (the same-host fast
 * path around the bus); a third goes beside them, with a row in transports.c's table. Nothing
 * here belongs to one transport only, and nothing above this layer reads libdbus types.
 *
 * Layer: above loop/ (a transport is a source of the center's loop), below center/. A transport
 * reaches the center only through the cn_transport_events table the center hands it; the center
 * and the API call the files of transport/ itself alone, never a file of a transport's folder (.ci/calls).
 */
#ifndef CNOTIFY_TRANSPORT_H
#define CNOTIFY_TRANSPORT_H

#include "../loop/loop.h"

/* A post as a transport hands it up, authenticated by the transport's own means. */
typedef struct cn_received_post {
    const char *name;
    const char *sender;         /* the transport's name of the poster (a bus unique name); NULL if unknown */
    uint64_t origin;            /* the poster's origin (PROTOCOL.md "Origins"); 0 when it carried none */
    uint64_t seq;
    int has_seq;
    /* The sender reaches this center by two paths (the fast path, and the bus), as the transport
     * knows it (a poster proved by the kernel and the bus, with this origin): every copy of a post
     * comes twice, and either may come first (PROTOCOL.md "Fast path", 4). */
    int two_paths;
    /* Posts of this name and numbering its poster held back and stands for with this copy (its `u
     * count` less one): not lost. */
    uint64_t coalesced;
    /* The transport's count of posts it delivered, or NULL: the center adds 1 once it takes the
     * post, before any callback runs, so a callback, and whoever saw one, sees the post counted. */
    _Atomic uint64_t *taken;
} cn_received_post;

/* A post the center sends: numbered by the center, whatever connection carries it. */
typedef struct cn_outgoing_post {
    const char *name;
    uint64_t seq;
    uint64_t origin;
    int restricted;             /* a user.uid.N name: the transport proves the poster's uid to receivers */
    uint32_t count;             /* the posts of this name this copy stands for (PROTOCOL.md "Bus copies,
                                 * coalesced"): 0 or 1, this one; more, the ones held back before it too */
} cn_outgoing_post;

/* A distributed notification (PROTOCOL.md "Distributed notifications") as a transport hands it
 * up: checked against the property-list bounds already; `user_info` is the transport's, valid
 * during the call. */
typedef struct cn_received_distributed {
    const char *name;
    const char *object;         /* NULL: none */
    const CNotify_plist *user_info; /* NULL: none */
    const char *sender;
    uint64_t origin;            /* 0 when it carried none */
    uint64_t seq;
    int has_seq;
    uint32_t options;           /* CNOTIFY_DISTRIBUTED_*; 0 when it carried none */
} cn_received_distributed;

/* A distributed notification the center sends, numbered as posts are (per name, its own count). */
typedef struct cn_outgoing_distributed {
    const char *name;
    const char *object;         /* NULL or "": none */
    const CNotify_plist *user_info; /* NULL: none; a dictionary within the bounds */
    uint64_t seq;
    uint64_t origin;
    uint32_t options;
} cn_outgoing_distributed;

/* What a subscription key is: a name, a namespace (the name and every name under it), or the
 * distributed notifications of a name ("": of every name). */
typedef enum cn_key_kind { CN_KEY_NAME = 0, CN_KEY_NAMESPACE = 1, CN_KEY_DISTRIBUTED = 2 } cn_key_kind;
#define CN_KEY_KINDS 3

/* What a transport reports, on the loop thread (connected: also on the first start's thread). */
typedef struct cn_transport_events {
    void *ctx;
    /* 1 when the post was taken, 0 when it was a copy of one taken already (the center's rule:
     * center/received.c). */
    int (*post_arrived)(void *ctx, const cn_received_post *post);
    void (*post_rejected)(void *ctx);                    /* a post that failed authentication */
    void (*distributed_arrived)(void *ctx, const cn_received_distributed *post);
    void (*distributed_dropped)(void *ctx);              /* malformed, or past the property-list bounds */
    /* A connection of generation `gen` is in use (`again`: a reconnection): add every subscription. */
    void (*connected)(void *ctx, uint64_t gen, int again);
    /* The connection is gone: what was learnt about senders on it no longer holds. */
    void (*disconnected)(void *ctx);
} cn_transport_events;

typedef struct cn_transport cn_transport;
typedef struct cn_rule_request cn_rule_request;

typedef struct cn_transport_ops {
    /* Connects in the caller's thread (so the first call learns at once whether the peer is
     * there) and joins the loop; once. NOTIFY_STATUS_SERVER_NOT_FOUND with the error set. */
    uint32_t (*start)(cn_transport *t);
    /* The generation of the connection in use, 0 while disconnected (reconnecting). */
    uint64_t (*generation)(cn_transport *t);
    /* Waits, called with no lock held, while the peer is behind (a bounded wait; then FAILED), and
     * says whether a send can go now (SERVER_NOT_FOUND while disconnected). */
    uint32_t (*ready)(cn_transport *t);
    /* Sends a post from the caller's thread; never waits (it may be called under the caller's lock). */
    uint32_t (*send)(cn_transport *t, const cn_outgoing_post *post);
    uint32_t (*send_distributed)(cn_transport *t, const cn_outgoing_distributed *post);
    /* Until every post sent is written, or timeout_ms (< 0: no limit). */
    uint32_t (*flush)(cn_transport *t, int timeout_ms);
    /* Subscribing to a key of a kind (cn_key_kind) in two steps: begin sends the request (non-blocking, so
     * the caller may hold its subscription lock), finish awaits the answer with no lock held.
     * NULL from begin: nothing to await. */
    cn_rule_request *(*subscribe_begin)(cn_transport *t, const char *key, cn_key_kind kind, uint64_t gen);
    uint32_t (*subscribe_finish)(cn_transport *t, cn_rule_request *request, const char *key);
    /* From `connected`: subscribes with no answer awaited (thousands may follow). */
    void (*subscribe_now)(cn_transport *t, const char *key, cn_key_kind kind, uint64_t gen);
    /* The key's last observer left; its subscription was made on connection `gen`. */
    void (*unsubscribe)(cn_transport *t, const char *key, cn_key_kind kind, uint64_t gen);
    /* The address this transport reaches ("" until known). */
    const char *(*address)(cn_transport *t);
    /* After the loop ended. */
    void (*destroy)(cn_transport *t);
} cn_transport_ops;

struct cn_transport {
    const cn_transport_ops *ops;
};

/* ---- transports.c: the entry point, the one table of transports ---- */
/* Where a spec ("session", "system", "embedded", an address, NULL: the default) leads, resolved
 * before the transport opens, so that a bad address fails at creation. `address` is malloc'd;
 * cn_transport_open takes it. */
typedef struct cn_transport_place {
    int kind;                   /* the transport's own (the bus: CN_BUS_*) */
    char *address;
} cn_transport_place;
uint32_t cn_transport_resolve(const char *spec, cn_transport_place *out);
/* Opens the transport for `spec` (`place`: resolved already, taken; NULL: resolved at its start).
 * NULL when out of memory. It adds itself to `loop` at its start. */
cn_transport *cn_transport_open(const char *spec, cn_transport_place *place, cn_loop *loop, cn_transport_events events);
/* Where the state of `spec` lives (docs/PROTOCOL.md "State files"), and who may have made it. */
uint32_t cn_transport_state_dir(const char *spec, char *out, size_t len, cn_state_place *place);
/* What some transports have and others not: the fast path's switch and counters (a transport
 * without one: nothing changes, and the counters read 0). */
void cn_transport_set_fast_path(cn_transport *t, int enabled);
void cn_transport_fast_path_stats(cn_transport *t, CNotify_fast_path_stats *out);
void cn_transport_fast_path_guards(cn_transport *t, CNotify_fast_path_guards *out);
/* A job's check-in with darwin-notifyd's launcher (CNotify_launch_check_in), over the bus: the
 * arguments already checked; `job` and `bus` NULL for the environment's. */
uint32_t cn_transport_launch_check_in(const char *job, const char *bus, CNotify_launch_handler handler, void *context);

#endif
