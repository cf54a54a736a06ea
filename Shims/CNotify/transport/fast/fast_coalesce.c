/*
 * fast_coalesce.c: the bus copies of posts that went directly to every observer the poster knows
 * of wanting them (docs/PROTOCOL.md "Fast path", "Bus copies, coalesced"). Such a bus copy is for
 * whoever the poster does not know: foreign clients (dbus-monitor, gdbus, a client written from
 * PROTOCOL.md) and an observer whose Endpoint has not come yet. Per name, such a post is held;
 * CN_FAST_COALESCE_MS after the first one held, the last one held goes on the bus (from the loop),
 * carrying how many posts it stands for (`u count` after the origin), as notify(3) coalesces
 * ("multiple events posted for a name in rapid succession may result in a single notification").
 * So the bus is off the path of every post an observer of ours waits for (a copy it would drop
 * costs no wake-up then), and a flood or a ping-pong costs it one message a name per 10 ms. A bus
 * copy of the name sent meanwhile for another reason (an observer not connected) carries the held
 * ones with it.
 *
 * Everything here runs under peers.lock: the post's decision (fast_post.c), the loop's sending of
 * what is due, and a new connection's barrier (fast_peers.c), which first sends every held copy, so
 * that no held copy comes on the bus after a Sync.
 */
#include <stdlib.h>
#include <string.h>
#include "fast.h"

struct cn_coalesced {
    uint64_t held_at;                   /* ms: when the first of those held was (count > 0) */
    uint64_t seq, origin;               /* the last post held back (count > 0) */
    uint32_t count;                     /* posts held back since that bus copy */
    int listed;                         /* in the held list */
    char name[];
};

void cn_coalesce_init(cn_fast_coalesce *c) {
    memset(c, 0, sizeof *c);
    atomic_init(&c->due_at, UINT64_MAX);
}

static void free_entry(void *value) { free(value); }

/* The held post of `e` on the bus now, standing for e->count posts. */
static uint32_t send_held(cn_fast *f, cn_coalesced *e) {
    cn_outgoing_post post = { e->name, e->seq, e->origin, 0, e->count };
    e->count = 0;
    atomic_fetch_sub(&f->bus_skipped, 1); /* the last one held goes on the bus after all */
    return f->bus->ops->send(f->bus, &post);
}

/* Every held copy on the bus (`send`), or forgotten (the bus is gone); the table emptied. */
void cn_coalesce_flush_locked(cn_fast *f, int send) {
    cn_fast_coalesce *c = &f->coalesce;
    assert(cn_mutex_is_held(&f->peers.lock));
    for (size_t i = 0; i < c->nheld; i++)
        if (c->held[i]->count && send) send_held(f, c->held[i]);
    c->nheld = 0;
    cn_map_clear(&c->names, free_entry);
    atomic_store(&c->due_at, UINT64_MAX);
}

void cn_coalesce_free(cn_fast *f) {
    free(f->coalesce.held);
    cn_map_clear(&f->coalesce.names, free_entry);
}

/* The name's entry, made if absent; NULL past the bound (the post then goes on the bus itself). */
static cn_coalesced *entry_locked(cn_fast *f, const char *name) {
    cn_fast_coalesce *c = &f->coalesce;
    cn_coalesced *e = cn_map_get(&c->names, name);
    if (e) return e;
    if (c->names.count >= CN_FAST_COALESCE_NAMES) cn_coalesce_flush_locked(f, 1); /* a burst of copies, then room */
    size_t len = strlen(name);
    e = calloc(1, sizeof *e + len + 1);
    if (!e) return NULL;
    memcpy(e->name, name, len + 1);
    if (cn_map_put(&c->names, e->name, e) != 0) {
        free(e);
        return NULL;
    }
    return e;
}

static int hold_locked(cn_fast_coalesce *c, cn_coalesced *e) {
    if (e->listed) return 0;
    if (c->nheld == c->capheld) {
        size_t cap = c->capheld ? c->capheld * 2 : 16;
        cn_coalesced **grown = realloc(c->held, cap * sizeof *grown);
        if (!grown) return -1;
        c->held = grown;
        c->capheld = cap;
    }
    c->held[c->nheld++] = e;
    e->listed = 1;
    return 0;
}

uint32_t cn_coalesce_post_locked(cn_fast *f, const cn_outgoing_post *post) {
    cn_fast_coalesce *c = &f->coalesce;
    assert(cn_mutex_is_held(&f->peers.lock));
    uint64_t now = cn_now_ms();
    cn_coalesced *e = entry_locked(f, post->name);
    if (!e || hold_locked(c, e) != 0) return cn_coalesce_send_locked(f, post);
    if (e->count && e->origin != post->origin) send_held(f, e); /* a new numbering: the old one's last first */
    if (e->count++ == 0) e->held_at = now; /* the first one held: the copy is due CN_FAST_COALESCE_MS later */
    e->seq = post->seq;
    e->origin = post->origin;
    atomic_fetch_add(&f->bus_skipped, 1);
    uint64_t due = e->held_at + CN_FAST_COALESCE_MS, current = atomic_load(&c->due_at);
    if (due < current) {
        atomic_store(&c->due_at, due);
        if (!cn_loop_on_thread(f->loop)) cn_loop_wake(f->loop);
    }
    return NOTIFY_STATUS_OK;
}

uint32_t cn_coalesce_send_locked(cn_fast *f, const cn_outgoing_post *post) {
    assert(cn_mutex_is_held(&f->peers.lock));
    cn_outgoing_post carried = *post;
    /* Nothing held, or a restricted name (never held): no look-up, the usual bus-path post. */
    cn_coalesced *e = post->restricted || f->coalesce.nheld == 0 ? NULL : cn_map_get(&f->coalesce.names, post->name);
    if (e && e->count && e->origin == post->origin) {
        carried.count = e->count + 1; /* the held ones come with it */
        e->count = 0;
    } else if (e && e->count) {
        send_held(f, e);
    }
    return f->bus->ops->send(f->bus, &carried);
}

void cn_coalesce_prepare(cn_fast *f, int *timeout_ms) {
    cn_fast_coalesce *c = &f->coalesce;
    uint64_t now = cn_now_ms(), due = atomic_load(&c->due_at);
    if (due == UINT64_MAX) return; /* the usual round: nothing held, no lock taken */
    if (due > now) {
        cn_loop_timeout_until(timeout_ms, due, now);
        return;
    }
    cn_mutex_lock(&f->peers.lock);
    uint64_t next = UINT64_MAX;
    size_t kept = 0;
    for (size_t i = 0; i < c->nheld; i++) {
        cn_coalesced *e = c->held[i];
        if (e->count && e->held_at + CN_FAST_COALESCE_MS <= now) send_held(f, e);
        if (!e->count) { /* sent now, or with a later post meanwhile */
            e->listed = 0;
            continue;
        }
        if (e->held_at + CN_FAST_COALESCE_MS < next) next = e->held_at + CN_FAST_COALESCE_MS;
        c->held[kept++] = e;
    }
    c->nheld = kept;
    /* With nothing held, the entries go past half the bound (made again at a name's next post). */
    if (!kept && c->names.count > CN_FAST_COALESCE_NAMES / 2) cn_map_clear(&c->names, free_entry);
    atomic_store(&c->due_at, next);
    cn_mutex_unlock(&f->peers.lock);
    if (next != UINT64_MAX) cn_loop_timeout_until(timeout_ms, next, now);
}
