/*
 * fast_peers.c: the poster's side of the fast path. Every Endpoint announcement is noted (its
 * token and buckets, per bus connection); once this center has posted, it connects to each
 * endpoint observing something, checks that the process listening there is the one the bus says
 * made the announcement (SO_PEERCRED against GetConnectionCredentials: nobody can pass another's
 * socket off as theirs), says who it is (HELLO), and sends the Sync barrier on the bus. From then
 * on each post goes to the peers observing its bucket too (fast_post.c). Records are kept of up to
 * CN_FAST_PEERS_MAX announcers that observe something, connections made to at most fd_cap of
 * them: in direct-only mode an announcer not connected, or not kept, gets the bus copy.
 *
 * peers.lock is taken with the outbox's lock held, around a post's direct copies and its bus
 * copy, and around a connection's Sync: that is the order barrier (PROTOCOL.md "Fast path"). No
 * lock is held while connecting, and the bus is asked without waiting: a connection awaits its
 * answer in `connecting` (the loop thread's), at most CN_FAST_CONNECTING_MAX at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <unistd.h>
#include "fast.h"

void cn_peers_init(cn_fast_peers *p) {
    memset(p, 0, sizeof *p);
    p->connect_after = cn_test_connect_after();
    cn_mutex_init(&p->lock, CN_LOCK_PEERS);
    atomic_init(&p->connect_at, UINT64_MAX);
}

/* A peer is due to be connected at `at` (ms): the loop's next look at the table is no later. */
static void connect_due_locked(cn_fast *f, uint64_t at) {
    assert(cn_mutex_is_held(&f->peers.lock));
    uint64_t current = atomic_load(&f->peers.connect_at);
    while (at < current && !atomic_compare_exchange_weak(&f->peers.connect_at, &current, at)) {}
    if (at < current && !cn_loop_on_thread(f->loop)) cn_loop_wake(f->loop); /* it may sleep past `at` */
}

void cn_peer_disconnect_locked(cn_fast *f, cn_fast_peer *peer, uint64_t retry_at) {
    assert(cn_mutex_is_held(&f->peers.lock));
    /* A connection that ends within its grace while posters wait for it, never seen reading (its
     * endpoint closed it just before the grace ran out, say): spent, as one that ran out. One
     * nobody waited for (an observer that read its one post and left) spends nothing. */
    int waited_for = peer->behind_since || peer->pressed_since;
    uint64_t now = waited_for && peer->grace_until && !peer->reads ? cn_now_ms() : 0;
    if (now && now < peer->grace_until) cn_peer_grace_spent_locked(f, peer, now);
    if (peer->behind_since) atomic_fetch_sub(&f->peers.behind, 1);
    if (peer->pressed_since) atomic_fetch_sub(&f->peers.pressed, 1);
    peer->behind_since = peer->pressed_since = 0;
    peer->grace_until = 0;
    cn_fast_file_close(f, &peer->io);
    peer->state = CN_K_KNOWN;
    peer->retry_at = retry_at;
    if (peer->observes) connect_due_locked(f, retry_at);
}

void cn_peer_grace_spent_locked(cn_fast *f, cn_fast_peer *peer, uint64_t now) {
    cn_fast_peers *p = &f->peers;
    assert(cn_mutex_is_held(&p->lock));
    peer->grace_spent = 1;
    size_t slot = 0; /* the uid's own entry, else the one that ends first */
    for (size_t i = 0; i < CN_FAST_GRACE_UIDS; i++) {
        if (p->graceless[i].uid == peer->uid && p->graceless[i].until > now) { slot = i; break; }
        if (p->graceless[i].until < p->graceless[slot].until) slot = i;
    }
    p->graceless[slot].uid = peer->uid;
    p->graceless[slot].until = now + CN_FAST_GRACE_DENIED_MS;
}

int cn_peers_grace_allowed_locked(const cn_fast_peers *p, uid_t uid, uint64_t now) {
    for (size_t i = 0; i < CN_FAST_GRACE_UIDS; i++)
        if (p->graceless[i].uid == uid && p->graceless[i].until > now) return 0;
    return 1;
}

static void free_namespaces(cn_fast_peer *peer) {
    for (size_t i = 0; i < peer->nnamespaces; i++) free(peer->namespaces[i]);
    free(peer->namespaces);
    peer->namespaces = NULL;
    peer->nnamespaces = 0;
}

static void remove_locked(cn_fast *f, size_t i) {
    cn_fast_peers *p = &f->peers;
    assert(cn_mutex_is_held(&p->lock));
    cn_peer_disconnect_locked(f, p->peers[i], 0);
    free_namespaces(p->peers[i]);
    free(p->peers[i]);
    p->peers[i] = p->peers[--p->npeers];
}

void cn_peers_free(cn_fast *f) {
    cn_fast_peers *p = &f->peers;
    while (p->nconnecting) f->chan->close(p->connecting[--p->nconnecting].ch);
    cn_mutex_lock(&p->lock);
    while (p->npeers) remove_locked(f, p->npeers - 1);
    cn_mutex_unlock(&p->lock);
    free(p->peers);
    cn_mutex_destroy(&p->lock);
}

static cn_fast_peer *find_locked(cn_fast_peers *p, const char *unique, size_t *index) {
    assert(cn_mutex_is_held(&p->lock));
    for (size_t i = 0; i < p->npeers; i++)
        if (strcmp(p->peers[i]->unique, unique) == 0) {
            if (index) *index = i;
            return p->peers[i];
        }
    return NULL;
}

/* Copies of `namespaces` (NULL with n 0); -1 when out of memory. */
static int copy_namespaces(const char *const *namespaces, size_t n, char ***out) {
    *out = NULL;
    if (n == 0) return 0;
    char **copy = calloc(n, sizeof *copy);
    for (size_t i = 0; copy && i < n; i++)
        if (!(copy[i] = strdup(namespaces[i]))) {
            while (i) free(copy[--i]);
            free(copy);
            copy = NULL;
        }
    *out = copy;
    return copy ? 0 : -1;
}

static int peer_ready(cn_fast *f, cn_fast_file *io, uint32_t events);

void cn_peers_announced(cn_fast *f, const char *sender, const char *token, const unsigned char *bitmap,
                        const char *const *namespaces, size_t n, uint32_t features) {
    cn_fast_peers *p = &f->peers;
    char **copies = NULL;
    if (!cn_fast_token_valid(token) || strlen(sender) >= 256) {
        atomic_fetch_add(&f->refused, 1); /* not one of our tokens: no socket of anyone's is named */
        return;
    }
    if (copy_namespaces(namespaces, n, &copies) != 0) return; /* out of memory: the bus copies */
    int observes = n > 0;
    for (size_t i = 0; i < CN_FAST_BITMAP_BYTES && !observes; i++) observes = bitmap[i] != 0;
    cn_mutex_lock(&p->lock);
    size_t at;
    cn_fast_peer *peer = find_locked(p, sender, &at);
    if (!observes) { /* observes nothing: no record (it takes no room an observer could use) */
        if (peer) remove_locked(f, at);
        cn_mutex_unlock(&p->lock);
        free(copies);
        return;
    }
    /* Past CN_FAST_PEERS_MAX records an announcement is not kept, and a direct-only post can no
     * longer know that every observer wanting it was reached: it takes the bus too. */
    if (!peer && p->npeers >= CN_FAST_PEERS_MAX) p->unlisted = 1;
    if (!peer && p->npeers < CN_FAST_PEERS_MAX) {
        if (p->npeers == p->cap) {
            size_t cap = p->cap ? 2 * p->cap : 16;
            cn_fast_peer **list = realloc(p->peers, cap * sizeof *list);
            if (list) { p->peers = list; p->cap = cap; }
        }
        if (p->npeers < p->cap && (peer = calloc(1, sizeof *peer))) {
            peer->io.ready = peer_ready;
            snprintf(peer->unique, sizeof peer->unique, "%s", sender);
            p->peers[p->npeers++] = peer;
        }
    }
    if (peer) {
        if (strcmp(peer->token, token) != 0 || peer->features != features) { /* a new endpoint of that connection */
            cn_peer_disconnect_locked(f, peer, 0);
            memcpy(peer->token, token, sizeof peer->token);
            peer->features = features;
        }
        /* Buckets it did not observe: their posts went by the bus alone until now, and a direct
         * copy of the next could overtake them. A new connection brings a new barrier (Sync). */
        int gained = 0;
        for (size_t i = 0; i < CN_FAST_BITMAP_BYTES && !gained; i++) gained = (bitmap[i] & ~peer->bitmap[i]) != 0;
        for (size_t i = 0; i < n && !gained; i++) { /* a namespace it did not observe is a gain too */
            gained = 1;
            for (size_t k = 0; k < peer->nnamespaces && gained; k++) gained = strcmp(namespaces[i], peer->namespaces[k]) != 0;
        }
        if (gained && peer->state == CN_K_READY) cn_peer_disconnect_locked(f, peer, 0);
        memcpy(peer->bitmap, bitmap, CN_FAST_BITMAP_BYTES);
        free_namespaces(peer);
        peer->namespaces = copies;
        peer->nnamespaces = n;
        copies = NULL;
        peer->observes = observes;
        if (peer->state == CN_K_KNOWN && observes && peer->retry_at != UINT64_MAX) connect_due_locked(f, peer->retry_at);
    }
    cn_mutex_unlock(&p->lock);
    if (copies) { /* not kept (past the cap, or out of memory) */
        for (size_t i = 0; i < n; i++) free(copies[i]);
        free(copies);
    }
}

void cn_peers_gone(cn_fast *f, const char *unique) {
    cn_fast_peers *p = &f->peers;
    cn_mutex_lock(&p->lock);
    size_t i;
    if (find_locked(p, unique, &i)) remove_locked(f, i);
    cn_mutex_unlock(&p->lock);
}

void cn_peers_disconnected(cn_fast *f) {
    cn_fast_peers *p = &f->peers;
    cn_mutex_lock(&p->lock);
    while (p->npeers) remove_locked(f, p->npeers - 1);
    p->unlisted = 0; /* every observer announces itself again, to the Query that follows */
    cn_mutex_unlock(&p->lock);
}

/* Peers connected or being connected: at most fd_cap of them (a quarter of the descriptors). */
static size_t connections_locked(cn_fast_peers *p) {
    assert(cn_mutex_is_held(&p->lock));
    size_t n = 0;
    for (size_t i = 0; i < p->npeers; i++) n += p->peers[i]->io.ch || p->peers[i]->retry_at == UINT64_MAX;
    return n;
}

/* A peer's connection is ready: an endpoint never writes, so that is its hang-up. */
static int peer_ready(cn_fast *f, cn_fast_file *io, uint32_t events) {
    (void)events;
    cn_mutex_lock(&f->peers.lock);
    cn_peer_disconnect_locked(f, (cn_fast_peer *)io, cn_now_ms() + CN_FAST_RETRY_MS);
    cn_mutex_unlock(&f->peers.lock);
    return 1;
}

/* Connects to the endpoint `token` of `unique` and asks the bus who made that announcement (no
 * waiting): 1 when the connection now awaits the answer, 0 when it failed. No lock held. */
static int connect_peer(cn_fast *f, const char *unique, const char *token, uint32_t features) {
    /* A ring to an endpoint that said it reads rings; frames alone to any other (PROTOCOL.md "The ring"). */
    cn_channel_peer who = { 0 };
    cn_channel *ch = f->chan->connect(token, features & CN_FAST_FEATURE_RING ? 0 : CN_CHANNEL_FRAMES_ONLY, &who);
    if (!ch) return 0;
    uint64_t request = ++f->endpoint.next_request; /* one numbering with the endpoint's asks */
    if (cn_bus_fast_ask_credentials(f->bus_impl, unique, request) != NOTIFY_STATUS_OK) {
        f->chan->close(ch);
        return 0;
    }
    cn_fast_connecting *c = &f->peers.connecting[f->peers.nconnecting++];
    c->request = request;
    snprintf(c->unique, sizeof c->unique, "%s", unique);
    snprintf(c->token, sizeof c->token, "%s", token);
    c->ch = ch;
    c->who = who;
    return 1;
}

/* The connection checked: the listener is the process the bus says made the announcement. Says
 * HELLO; returns the HELLO's sync token, or 0 (the connection then closed). */
static uint64_t say_hello(cn_fast *f, cn_channel *ch) {
    uint64_t sync_token = 0;
    unsigned char frame[CN_FAST_FRAME_MAX];
    char own[256];
    size_t n;
    while (sync_token == 0)
        if (getrandom(&sync_token, sizeof sync_token, 0) != (ssize_t)sizeof sync_token) return 0;
    if (!cn_bus_fast_unique_name(f->bus_impl, own) ||
        !(n = cn_fast_hello(atomic_load(&f->peers.origin), sync_token, own, frame, sizeof frame)) ||
        f->chan->send(ch, frame, n) != 1)
        return 0;
    f->chan->ring(ch);
    return sync_token;
}

/* The next peer due for a connection, its names copied out and marked "being connected"; 0 when
 * none is due now (the poll bounded by the earliest that will be). peers.lock held. */
static int pick_due_locked(cn_fast *f, uint64_t now, char unique[256], char token[CN_FAST_TOKEN_LEN + 1],
                           uint32_t *features, int *timeout_ms) {
    cn_fast_peers *p = &f->peers;
    int found = 0;
    /* At the cap, the others keep their records (and, direct only, their bus copies) and are
     * connected once one of these goes. */
    int room = connections_locked(p) < f->fd_cap;
    for (size_t i = 0; room && i < p->npeers && !found; i++) {
        cn_fast_peer *peer = p->peers[i];
        if (peer->state != CN_K_KNOWN || !peer->observes || peer->retry_at == UINT64_MAX) continue;
        if (peer->retry_at > now) {
            connect_due_locked(f, peer->retry_at);
            continue;
        }
        if (atomic_load(&p->posts) < p->connect_after) { /* a test's hook (base.h): look again in 1 ms */
            connect_due_locked(f, now + 1);
            continue;
        }
        memcpy(unique, peer->unique, 256);
        memcpy(token, peer->token, CN_FAST_TOKEN_LEN + 1);
        *features = peer->features;
        peer->retry_at = UINT64_MAX; /* being connected */
        found = 1;
    }
    if (!room) connect_due_locked(f, now + CN_FAST_RETRY_MS);
    uint64_t next = atomic_load(&p->connect_at);
    if (!found && next != UINT64_MAX) cn_loop_timeout_until(timeout_ms, next, now); /* the earliest still due */
    return found;
}

/* A connection made (or NULL) to the peer `unique` announced with `token`: ready once it is
 * polled and its barrier is on the bus, else closed and retried later. peers.lock held. */
static void adopt_locked(cn_fast *f, const char *unique, const char *token, cn_channel *ch, const cn_channel_peer *who,
                         uint64_t sync_token, uint64_t now) {
    cn_fast_peer *peer = find_locked(&f->peers, unique, NULL);
    if (peer && ch && !peer->io.ch && strcmp(peer->token, token) == 0) {
        peer->io.ch = ch;
        /* The barrier, sent with the lock held: a post takes the lock around its direct copies
         * and its bus copy (cn_peers_post), so every post that went by the bus alone is on the
         * bus before the Sync, and every post after it has its direct copy too. */
        if (cn_fast_watch(f, &peer->io, EPOLLIN | EPOLLRDHUP) == 0) {
            cn_coalesce_flush_locked(f, 1); /* no held bus copy comes after the barrier */
            if (cn_bus_fast_sync(f->bus_impl, unique, sync_token) == NOTIFY_STATUS_OK) {
                peer->unchecked = 0;
                peer->posted = peer->reads = 0;
                peer->uid = who->uid;
                peer->groups = who->groups;
                /* What it keeps of this process's groups, as the kernel gave them at connect. */
                peer->mine_cut = getgroups(0, NULL) + 1 > CN_CHANNEL_GROUPS;
                peer->state = CN_K_READY;
                peer->retry_at = 0;
                /* Its first read comes after the bus copies sent before the Sync (fast.h). */
                int graced = !peer->grace_spent && cn_peers_grace_allowed_locked(&f->peers, who->uid, now);
                peer->grace_until = graced ? now + CN_FAST_GRACE_MS : 0;
                return;
            }
            cn_fast_unwatch(f, &peer->io);
        }
        peer->io.ch = NULL;
    }
    if (ch) f->chan->close(ch);
    if (peer && peer->retry_at == UINT64_MAX) {
        peer->retry_at = now + CN_FAST_RETRY_MS;
        if (peer->observes) connect_due_locked(f, peer->retry_at);
    }
}

void cn_peers_prepare(cn_fast *f, int *timeout_ms) {
    cn_fast_peers *p = &f->peers;
    uint64_t origin = atomic_load(&p->origin);
    if (!origin || !atomic_load(&f->enabled)) return; /* connections are made for posting only */
    if (atomic_exchange(&p->query_due, 0)) cn_bus_fast_query(f->bus_impl);
    uint64_t now = cn_now_ms(), at = atomic_load(&p->connect_at);
    if (at == UINT64_MAX) return; /* the usual round: nobody to connect, and no lock taken */
    if (at > now) {
        cn_loop_timeout_until(timeout_ms, at, now);
        return;
    }
    atomic_store(&p->connect_at, UINT64_MAX); /* what is still due is noted again below */
    /* One peer at a time, the lock dropped while connecting; the bus's answers come later. */
    while (p->nconnecting < CN_FAST_CONNECTING_MAX) {
        char unique[256], token[CN_FAST_TOKEN_LEN + 1];
        uint32_t features = 0;
        cn_mutex_lock(&p->lock);
        int found = pick_due_locked(f, now, unique, token, &features, timeout_ms);
        cn_mutex_unlock(&p->lock);
        if (!found) return;
        if (connect_peer(f, unique, token, features)) continue;
        cn_mutex_lock(&p->lock);
        adopt_locked(f, unique, token, NULL, NULL, 0, now);
        cn_mutex_unlock(&p->lock);
    }
    /* As many await their answer as may: the rest stay due, looked at again once one is in. */
    atomic_store(&p->connect_at, now);
}

int cn_peers_credentials(cn_fast *f, uint64_t request, int ok, pid_t pid, uid_t uid) {
    cn_fast_peers *p = &f->peers;
    size_t i = 0;
    while (i < p->nconnecting && p->connecting[i].request != request) i++;
    if (i == p->nconnecting) return 0;
    cn_fast_connecting c = p->connecting[i];
    p->connecting[i] = p->connecting[--p->nconnecting];
    uint64_t sync_token = 0;
    if (!ok || pid != c.who.pid || uid != c.who.uid)
        atomic_fetch_add(&f->refused, 1); /* the listener is another process: never posted to */
    else
        sync_token = say_hello(f, c.ch); /* 0: the HELLO could not be said */
    if (!sync_token) {
        f->chan->close(c.ch);
        c.ch = NULL;
    }
    cn_mutex_lock(&p->lock);
    adopt_locked(f, c.unique, c.token, c.ch, &c.who, sync_token, cn_now_ms());
    cn_mutex_unlock(&p->lock);
    if (atomic_load(&p->connect_at) != UINT64_MAX) cn_loop_unsettle(f->loop); /* the next due may go now */
    return 1;
}
