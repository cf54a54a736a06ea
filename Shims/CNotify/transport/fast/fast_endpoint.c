/*
 * fast_endpoint.c: reading a poster's proved connection (docs/PROTOCOL.md "Fast path",
 * "Accepting", 2-5): frames a batch at a time, a SYNC whose Sync has not come holding back the
 * frames after it, and before a bus copy of a poster's post every frame it wrote before it, so
 * that its posts keep their order across the two paths. Each copy goes up marked as one of a
 * poster with two paths: which is a duplicate is the center's rule (center/received.c). A
 * connection whose poster left the bus (departed) passes every barrier: all it wrote is read.
 * Restricted names are checked against the kernel's uid and groups (the gid and the supplementary
 * groups of the poster's socket). A poster's next frame of the
 * name it just posted takes its lane (docs/DESIGN.md "A known poster's lane"): the guard's answer
 * and the read_upto slot kept from the frame before, while notify.conf stays as it was. Loop
 * thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include "fast.h"

/* Frames are read a batch at a time (the channel's read). A SYNC among them whose Sync has not
 * come by the bus yet stops delivery: the frames after it are held here until it comes. */
typedef struct held_frames {
    unsigned next;
    cn_channel_frames frames;
} held_frames;
static int deliver_held(cn_fast *f, cn_fast_poster *p);

/* A connection that may be read again: the held frames, then the socket (to its end once it hung
 * up and left the epoll set, or once its poster left the bus). */
void cn_endpoint_resume(cn_fast *f, cn_fast_poster *p) {
    p->state = CN_P_READY;
    cn_poster_set_reading(f, p, 1);
    if (!deliver_held(f, p) || !p->io.ch) return;
    if (!p->polled || p->departed) cn_endpoint_read(f, p, 0);
}

/* The slot of `name` in how far the connection was read (the highest number read, bounded). */
static void **read_slot(cn_fast_poster *p, const char *name) {
    if (p->read_upto.count > CN_MAP_BOUND) cn_poster_forget_reads(p);
    return cn_map_upsert(&p->read_upto, name);
}

/* The lane's slot for a frame of `name`, when the lane holds that name under notify.conf's
 * generation `policy`: the guard let it through then and would now. NULL: ask the guard. */
CN_HOT static void **lane_slot(cn_fast_poster *p, const char *name, uint64_t policy) {
    cn_fast_lane *lane = &p->lane;
    return lane->read && lane->policy == policy && strcmp(lane->name, name) == 0 ? lane->read : NULL;
}

CN_HOT static void post_frame(cn_fast *f, cn_fast_poster *p, const cn_fast_frame *fr) {
    uint64_t policy = cn_policy_generation(); /* read before the guard: a change after it empties the lane */
    void **read = lane_slot(p, fr->name, policy);
    if (!read) {
        cn_guard g;
        int guarded = cn_is_self_name(fr->name) ? -1 : cn_name_guard(fr->name, &g); /* loop thread, no lock held */
        if (guarded < 0 || (guarded > 0 && !cn_guard_allows(&g, p->uid, p->groups.gid, p->groups.n))) {
            /* The kernel's uid (or group) may not post it: a forgery. But a poster in more groups
             * than were kept may be allowed by one cut off: it sends the bus copy too, which
             * decides (and is counted if it is one); this copy is set aside. */
            if (guarded < 0 || !p->groups.cut) f->up.post_rejected(f->up.ctx);
            return;
        }
        read = read_slot(p, fr->name);
        size_t len = strlen(fr->name);
        if (read && len <= CN_FAST_LANE_NAME) { /* a longer name always takes the whole path */
            memcpy(p->lane.name, fr->name, len + 1);
            p->lane.read = read;
            p->lane.policy = policy;
        }
    }
    if (read && (uint64_t)(uintptr_t)*read < fr->seq) *read = (void *)(uintptr_t)fr->seq;
    /* Whether its bus copy came first is the center's rule (center/received.c): two paths. */
    cn_received_post up = { .name = fr->name, .sender = p->unique, .origin = p->origin, .seq = fr->seq, .has_seq = 1,
                             .two_paths = 1, .taken = &f->fast_delivered };
    if (!f->up.post_arrived(f->up.ctx, &up)) atomic_fetch_add(&f->duplicates, 1);
}

/* One frame of a connection past its HELLO: 1 to go on, 0 when it closed (io.ch NULL) or waits for the
 * Sync of a SYNC it just read (CN_P_SYNC). */
CN_HOT static int take_frame(cn_fast *f, cn_fast_poster *p, unsigned char *buf, size_t n) {
    cn_fast_frame fr;
    if (n > CN_FAST_FRAME_MAX || cn_fast_parse(buf, n, &fr) != 0) {
        atomic_fetch_add(&f->refused, 1);
        cn_poster_close(f, p);
        return 0;
    }
    if (fr.type == CN_FAST_SYNC) { /* a barrier again: its posts in between went by the bus alone */
        p->token = fr.token;
        if (p->departed || cn_poster_sync_pass(p, fr.token)) return 1;
        p->state = CN_P_SYNC;
        cn_poster_set_reading(f, p, 0);
        return 0;
    }
    if (fr.type != CN_FAST_POST) {
        atomic_fetch_add(&f->refused, 1);
        cn_poster_close(f, p);
        return 0;
    }
    post_frame(f, p, &fr);
    return 1;
}

/* The frames a SYNC held back, once its Sync came: 1 when none is left. */
static int deliver_held(cn_fast *f, cn_fast_poster *p) {
    while (p->held && p->held->next < p->held->frames.count) {
        unsigned k = p->held->next++;
        if (!take_frame(f, p, p->held->frames.data[k], p->held->frames.len[k])) return 0; /* closed (held freed), or another SYNC */
    }
    free(p->held);
    p->held = NULL;
    return 1;
}

/* The frames of `got` from `from` on, held until the Sync of the SYNC before them comes. */
static void hold(cn_fast_poster *p, const cn_channel_frames *got, unsigned from) {
    if (from >= got->count) return;
    held_frames *h = malloc(sizeof *h);
    if (!h) return; /* out of memory: like frames lost with a connection; their bus copies follow */
    h->next = 0;
    h->frames.count = 0;
    h->frames.closed = 0;
    for (unsigned i = from; i < got->count; i++) {
        h->frames.len[h->frames.count] = got->len[i]; /* each at most CN_FAST_FRAME_MAX: take_frame checked it */
        memcpy(h->frames.data[h->frames.count++], got->data[i], got->len[i]);
    }
    p->held = h;
}

/* A connection that hung up while it is not read: out of the epoll set (a hang-up is reported
 * at every round), its frames kept in the socket for when it may be read. */
void cn_poster_unpoll(cn_fast *f, cn_fast_poster *p) {
    if (!p->polled) return;
    cn_fast_unwatch(f, &p->io);
    p->polled = 0;
}

CN_HOT void cn_endpoint_read(cn_fast *f, cn_fast_poster *p, uint32_t events) {
    if (p->state != CN_P_READY) { /* not reading until its Sync (or credentials) */
        if (events & (EPOLLHUP | EPOLLERR)) cn_poster_unpoll(f, p);
        return;
    }
    if (!deliver_held(f, p)) return;
    cn_channel_frames got;
    /* From the loop, 8 batches, then the other sources' turn; draining before a bus post (events
     * 0), all there are. */
    for (int round = 0; round < 8 || events == 0; round++) {
        f->chan->read(p->io.ch, CN_CHANNEL_BATCH, &got);
        if (got.rewatch) cn_fast_bell_set(f, &p->io);
        for (unsigned i = 0; i < got.count; i++) {
            if (!take_frame(f, p, got.data[i], got.len[i])) {
                if (p->io.ch) hold(p, &got, i + 1); /* waiting for a Sync (a hang-up after is read again) */
                return;
            }
            if (p->departed) atomic_fetch_add(&f->drained, 1);
        }
        if (got.closed) { /* the poster hung up, after these */
            cn_poster_close(f, p);
            return;
        }
        if (got.count < CN_CHANNEL_BATCH) { /* nothing more now (a drain has all there was) */
            if (got.count == 0 && (events & (EPOLLHUP | EPOLLERR))) cn_poster_close(f, p);
            return;
        }
    }
    cn_fast_rearm(f, &p->io); /* more may wait, and a bell says so only once */
}

int cn_endpoint_before_bus(cn_fast *f, const cn_received_post *post) {
    if (!post->has_seq || !post->sender || !post->origin) return 0;
    cn_fast_poster *p = cn_map_get(&f->endpoint.by_sender, post->sender);
    if (!p) return 0; /* no connection from it, ever: the bus alone */
    void *read = p->origin == post->origin ? cn_map_get(&p->read_upto, post->name) : NULL;
    if (read && (uint64_t)(uintptr_t)read >= post->seq) return 1; /* the usual case: its direct copy was read, and all before */
    /* A poster writes a post's direct copy before its bus copy: every frame it sent before this
     * bus post is in the socket by now. Delivered first, they keep the poster's order even when
     * a connection ended with frames unread (a poster that gave up on a full socket). */
    if (p->state == CN_P_READY && p->io.ch) cn_endpoint_read(f, p, 0);
    p = cn_map_get(&f->endpoint.by_sender, post->sender); /* a malformed frame may have ended it */
    if (!p) return 0;
    if (!p->origin) p->origin = post->origin; /* a record its Sync made: the bus copies name it */
    return post->origin == p->origin;
}
