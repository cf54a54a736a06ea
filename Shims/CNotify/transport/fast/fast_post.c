/*
 * fast_post.c: a post's direct copies (docs/PROTOCOL.md "Fast path", "Connecting", 4-5): from
 * the posting thread, under peers.lock (taken with the outbox's lock held), one non-blocking send
 * to each connected peer that wants the post, then its bus copy: when every peer that announced
 * wanting the post took it, direct-only mode skips it and the default mode coalesces it per name
 * (fast_coalesce.c); else it goes now. A peer that reads slower than we post:
 * the next post waits for its room, holding no lock, at most CN_FAST_STALL_MS (a new connection's
 * first read: up to its grace, fast.h); one whose socket had no room gets a new barrier (a SYNC
 * frame and its Sync) before its next direct copy, or loses its connection (and has the bus
 * copies) until it is connected again after CN_FAST_RETRY_MS.
 */
#include <string.h>
#include <sys/random.h>
#include "fast.h"

/* Whether `name` is `ns` or under it (`ns.` and more). */
static int under(const char *name, const char *ns) {
    size_t len = strlen(ns);
    return strncmp(name, ns, len) == 0 && (name[len] == '\0' || name[len] == '.');
}

/* Whether the peer observes something of `bucket`, or a namespace `name` is under. */
static int wants(const cn_fast_peer *peer, unsigned bucket, const char *name) {
    if (cn_fast_bit(peer->bitmap, bucket)) return 1;
    for (size_t i = 0; i < peer->nnamespaces; i++)
        if (under(name, peer->namespaces[i])) return 1;
    return 0;
}

/* When a peer that fell behind at `since` (ms) is given up on: CN_FAST_STALL_MS later; or, while
 * its connection has a grace and the observer took the HELLO but was not seen reading the posts
 * yet (it reads them once the HELLO's Sync comes, behind our earlier bus copies), at the grace's
 * end. A deaf endpoint never takes its HELLO: the stall bound alone. */
static uint64_t give_up_at(cn_fast *f, const cn_fast_peer *peer, uint64_t since) {
    uint64_t at = since + CN_FAST_STALL_MS;
    if (peer->grace_until > at && !peer->reads && f->chan->consumed(peer->io.ch) == 1) at = peer->grace_until;
    return at;
}

/* A peer given up on: the bus copies from now on, and a connection again after CN_FAST_RETRY_MS;
 * its grace spent if it had one and was never seen reading. */
static void give_up_locked(cn_fast *f, cn_fast_peer *peer, uint64_t now) {
    atomic_fetch_add(&f->fallbacks, 1);
    if (peer->grace_until && !peer->reads) cn_peer_grace_spent_locked(f, peer, now);
    cn_peer_disconnect_locked(f, peer, now + CN_FAST_RETRY_MS);
}

/* A peer that fell behind: a SYNC frame and its Sync on the bus, behind the bus copies of the
 * posts it missed, so that no direct copy overtakes them; 1 once sent. Past CN_FAST_STALL_MS with
 * no room, the connection is dropped (the observer has the bus copies) and made again later. */
static int resync_locked(cn_fast *f, cn_fast_peer *peer) {
    assert(cn_mutex_is_held(&f->peers.lock));
    uint64_t token = 0;
    unsigned char frame[64];
    while (token == 0)
        if (getrandom(&token, sizeof token, GRND_NONBLOCK) != (ssize_t)sizeof token) token = cn_now_ms() ^ (uintptr_t)peer;
    size_t n = cn_fast_sync(token, frame, sizeof frame);
    int sent = f->chan->send(peer->io.ch, frame, n);
    if (sent == 1) f->chan->ring(peer->io.ch);
    if (sent == 1 && cn_bus_fast_sync(f->bus_impl, peer->unique, token) == NOTIFY_STATUS_OK) {
        atomic_fetch_sub(&f->peers.behind, 1);
        peer->behind_since = 0;
        return 1;
    }
    if (sent != 0) { /* gone, or its barrier's Sync not sent: a new connection brings a new one */
        atomic_fetch_add(&f->fallbacks, 1);
        cn_peer_disconnect_locked(f, peer, cn_now_ms() + CN_FAST_RETRY_MS);
    } else if (cn_now_ms() >= give_up_at(f, peer, peer->behind_since)) {
        give_up_locked(f, peer, cn_now_ms()); /* it does not read */
    }
    return 0;
}

/* How full a peer's connection is, every CN_FAST_CHECK_EVERY direct copies (the seqpacket channel:
 * an ioctl, 0.3 µs). Over half full, the observer reads slower than we post: the next post waits for room, with no lock
 * held (cn_peers_await_room), before a copy finds none. A copy that found none would take the bus
 * alone, and every later one wait behind a new barrier (resync_locked), which comes by the bus,
 * behind all it carries: in a flood the fast path would be lost for good. The kernel queues some
 * 270 small frames a connection (SO_SNDBUF, about 0.8 KB each as it counts them). */
static void look_at_room_locked(cn_fast *f, cn_fast_peer *peer) {
    assert(cn_mutex_is_held(&f->peers.lock));
    if (++peer->unchecked < CN_FAST_CHECK_EVERY || peer->pressed_since) return;
    peer->unchecked = 0;
    if (f->chan->pressed(peer->io.ch)) {
        peer->pressed_since = cn_now_ms();
        atomic_fetch_add(&f->peers.pressed, 1);
    }
}

void cn_peers_await_room(cn_fast *f) {
    cn_fast_peers *p = &f->peers;
    if (atomic_load_explicit(&p->behind, memory_order_relaxed) == 0 && atomic_load_explicit(&p->pressed, memory_order_relaxed) == 0)
        return; /* the usual case: two loads */
    enum { WAITED_MAX = 64 };
    cn_channel_waiter waited[WAITED_MAX];
    size_t n = 0;
    uint64_t deadline = UINT64_MAX;
    int loop_thread = cn_loop_on_thread(f->loop); /* a callback's post: the stall bound, never a grace */
    cn_mutex_lock(&p->lock);
    for (size_t i = 0; i < p->npeers && n < WAITED_MAX; i++) {
        cn_fast_peer *peer = p->peers[i];
        uint64_t since = peer->behind_since ? peer->behind_since : peer->pressed_since;
        if (peer->state != CN_K_READY || !since) continue;
        f->chan->waiter(peer->io.ch, &waited[n++]); /* what to wait on, valid with no lock held */
        uint64_t until = loop_thread ? since + CN_FAST_STALL_MS : give_up_at(f, peer, since);
        if (until < deadline) deadline = until;
    }
    cn_mutex_unlock(&p->lock);
    /* No lock held: a connection closed meanwhile only ends the wait early. */
    uint64_t now = cn_now_ms();
    if (n && now < deadline) f->chan->await_room(waited, n, (int)(deadline - now));
    /* Pressed peers: room again, or past the bound (it does not read): the bus copies from now on.
     * Behind ones are settled by their next post (resync_locked). */
    if (atomic_load(&p->pressed) == 0) return;
    now = cn_now_ms();
    cn_mutex_lock(&p->lock);
    for (size_t i = 0; i < p->npeers; i++) {
        cn_fast_peer *peer = p->peers[i];
        if (peer->state != CN_K_READY || !peer->pressed_since) continue;
        if (!f->chan->pressed(peer->io.ch)) {
            peer->pressed_since = 0;
            atomic_fetch_sub(&p->pressed, 1);
        } else if (now >= give_up_at(f, peer, peer->pressed_since)) {
            give_up_locked(f, peer, now);
        }
    }
    cn_mutex_unlock(&p->lock);
}

/* A post of a new origin: the first post (discovery starts now), or a new numbering (PROTOCOL.md
 * "Origins"): every connection is made again, so that each endpoint learns it from a HELLO. */
static void note_origin(cn_fast *f, uint64_t origin) {
    cn_fast_peers *p = &f->peers;
    uint64_t known = atomic_load(&p->origin);
    if (known == origin) return;
    atomic_store(&p->origin, origin);
    if (known) cn_peers_disconnected(f);
    atomic_store(&p->query_due, 1);
    cn_loop_wake(f->loop);
}

/* The frame to one connected peer, non-blocking: 1 sent, 0 not (it then needs the bus copy).
 * peers.lock held. Before it, whether the observer reads this connection yet: a connection it
 * has not read past its barrier may be closed unread (a proof that came too late, a cap at
 * accept), and a frame in it is no copy the observer will have (peer->reads). */
static int copy_to_peer_locked(cn_fast *f, cn_fast_peer *peer, const unsigned char *frame, size_t n) {
    if (peer->behind_since && !resync_locked(f, peer)) return 0; /* still no room: the bus copy */
    if (peer->posted && !peer->reads && f->chan->unread(peer->io.ch) == 0) {
        peer->reads = 1;
        peer->grace_spent = 0; /* seen reading: a later connection of it may have a grace again */
    }
    int sent = f->chan->send(peer->io.ch, frame, n);
    if (sent == 1) {
        atomic_fetch_add(&f->fast_sent, 1);
        peer->posted = 1;
        look_at_room_locked(f, peer);
        return 1;
    }
    if (sent == 0) {
        /* No room (it reads slower than we post): this post takes the bus, and the next direct
         * one waits behind a new barrier (resync_locked); the poster waits for room at most
         * CN_FAST_STALL_MS, no lock held (cn_peers_await_room). */
        peer->behind_since = cn_now_ms();
        atomic_fetch_add(&f->peers.behind, 1);
    } else { /* gone */
        atomic_fetch_add(&f->fallbacks, 1);
        cn_peer_disconnect_locked(f, peer, cn_now_ms() + CN_FAST_RETRY_MS);
    }
    return 0;
}

uint32_t cn_peers_post(cn_fast *f, const cn_outgoing_post *post, int direct_only) {
    cn_fast_peers *p = &f->peers;
    int sent = 0, failed = 0, unreached = 0, unproven = 0;
    note_origin(f, post->origin);
    if (p->connect_after) atomic_fetch_add(&p->posts, 1); /* a test's hook (base.h) */
    unsigned bucket = cn_fast_bucket(post->name);
    cn_guard guard; /* who may read it: a user.uid.N name N and root, a reserved one as its r bits say */
    int guarded = cn_name_guard_cached(post->name, &guard); /* outbox.lock held: no file looked at */
    int reserved = guarded != 0 || guard.reserved;
    unsigned char frame[CN_FAST_FRAME_MAX];
    size_t n = cn_fast_post(post->name, post->seq, frame, sizeof frame);
    cn_mutex_lock(&p->lock);
    for (size_t i = 0; n && i < p->npeers; i++) {
        cn_fast_peer *peer = p->peers[i];
        if (!wants(peer, bucket, post->name)) continue;
        if (peer->state != CN_K_READY) { /* announced, not connected (yet, or ever): it needs the bus copy */
            unreached++;
            continue;
        }
        /* user.uid.N: to N's processes (and root's) only, as no other may need it; a reserved
         * name to those its mode lets observe it. */
        if (reserved && !cn_guard_may_read(&guard, peer->uid, peer->groups.gid, peer->groups.n)) {
            if (peer->groups.cut) unreached++; /* a group not kept may let it read: the bus copy decides */
            continue;
        }
        if (copy_to_peer_locked(f, peer, frame, n)) {
            sent++;
            if (!peer->reads) unproven++;
            /* It judges a reserved name's copy by the groups it kept of ours: in more, the bus copy too. */
            if (reserved && peer->mine_cut) unreached++;
        } else {
            failed++;
        }
    }
    /* One ring for the copies (channel.h): a bell shared by several connections is written once. */
    for (size_t i = 0; sent && i < p->npeers; i++)
        if (p->peers[i]->state == CN_K_READY && p->peers[i]->posted) f->chan->ring(p->peers[i]->io.ch);
    /* Then the bus copy, still under the lock (see cn_peers_prepare's Sync). When the post reached
     * an observer directly and every observer that announced wanting it took it (none missed it,
     * none is unconnected, no announcement went unkept), the bus copy is only for whoever we do
     * not know of: foreign clients, and observers whose announcement has not come yet. Direct
     * only (opted into): none. By default: coalesced per name (fast_coalesce.c), as notify(3)
     * coalesces. Otherwise, now: a miss sends it on the bus, behind the direct copies, which the
     * observer reads first (fast_endpoint.c), so nothing this center is connected to loses it. */
    uint32_t st = NOTIFY_STATUS_OK;
    int all_took = sent > 0 && failed == 0 && unreached == 0 && !p->unlisted;
    if (direct_only && all_took) {
        atomic_fetch_add(&f->bus_skipped, 1);
    } else if (all_took && unproven == 0 && !reserved && !post->restricted) {
        /* Held only for observers seen reading their connection: a copy it took but may never
         * read (a connection closed before its proof) would be stood for by a later bus copy's
         * count, and that observer would have it nowhere. */
        st = cn_coalesce_post_locked(f, post);
    } else {
        if (direct_only && sent > 0 && failed == 0) atomic_fetch_add(&f->bus_kept, 1);
        st = cn_coalesce_send_locked(f, post);
    }
    cn_mutex_unlock(&p->lock);
    return st;
}

int cn_peers_is_ready(const cn_fast_peer *peer) { return peer->state == CN_K_READY; }
