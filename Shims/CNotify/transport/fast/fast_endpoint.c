/*
 * fast_endpoint.c: reading a poster's proved connection (docs/PROTOCOL.md "Fast path",
 * "Accepting", 2-5): frames 32 at a time, a SYNC whose Sync has not come holding back the frames
 * after it, each POST delivered once (per poster, name and origin the highest number delivered by
 * either path is kept, and whichever copy comes second is dropped: cn_endpoint_seen for the
 * bus's). A connection whose poster left the bus (departed) passes every barrier: all it wrote is
 * read. Restricted names are checked against the kernel's uid. Loop thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include "fast.h"

/* Frames are read CN_FAST_BATCH at a time (one recvmmsg). A SYNC among them whose Sync has not
 * come by the bus yet stops delivery: the frames after it are held here until it comes. */
enum { CN_FAST_BATCH = 32 };
typedef struct held_frames {
    unsigned count, next;
    uint16_t len[CN_FAST_BATCH];
    unsigned char data[CN_FAST_BATCH][CN_FAST_FRAME_MAX];
} held_frames;
static int deliver_held(cn_fast *f, cn_fast_poster *p);

/* A connection that may be read again: the held frames, then the socket (to its end once it hung
 * up and left the epoll set, or once its poster left the bus). */
void cn_endpoint_resume(cn_fast *f, cn_fast_poster *p) {
    p->state = CN_P_READY;
    cn_poster_set_reading(f, p, 1);
    if (!deliver_held(f, p) || p->io.fd < 0) return;
    if (!p->polled || p->departed) cn_endpoint_read(f, p, 0);
}

/* 1 if a copy of `name` numbered `seq` or later came from this poster already; changes nothing. */
static int delivered_already(cn_fast_poster *p, const char *name, uint64_t seq) {
    void *highest = cn_map_get(&p->highest, name);
    return highest && (uint64_t)(uintptr_t)highest >= seq;
}

/* The highest number delivered of `name` from this poster: 1 if `seq` is not past it. */
static int seen_before(cn_fast_poster *p, const char *name, uint64_t seq) {
    if (p->highest.count > CN_MAP_BOUND) cn_map_clear(&p->highest, NULL); /* bounded */
    void **slot = cn_map_upsert(&p->highest, name);
    if (!slot) return 0;
    if ((uint64_t)(uintptr_t)*slot >= seq) return 1;
    *slot = (void *)(uintptr_t)seq;
    return 0;
}

static void post_frame(cn_fast *f, cn_fast_poster *p, const cn_fast_frame *fr) {
    cn_guard g;
    int guarded = cn_is_self_name(fr->name) ? -1 : cn_name_guard(fr->name, &g); /* loop thread, no lock held */
    if (guarded < 0 || (guarded > 0 && !cn_guard_allows(&g, p->uid, &p->gid, 1))) {
        f->up.post_rejected(f->up.ctx); /* the kernel's uid (or group) may not post it: a forgery */
        return;
    }
    if (seen_before(p, fr->name, fr->seq)) {
        atomic_fetch_add(&f->duplicates, 1);
        return;
    }
    atomic_fetch_add(&f->fast_delivered, 1);
    cn_received_post up = { fr->name, p->unique, p->origin, fr->seq, 1 };
    f->up.post_arrived(f->up.ctx, &up);
}

/* One frame of a connection past its HELLO: 1 to go on, 0 when it closed (fd -1) or waits for the
 * Sync of a SYNC it just read (CN_P_SYNC). */
static int take_frame(cn_fast *f, cn_fast_poster *p, unsigned char *buf, size_t n) {
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
    while (p->held && p->held->next < p->held->count) {
        unsigned k = p->held->next++;
        if (!take_frame(f, p, p->held->data[k], p->held->len[k])) return 0; /* closed (held freed), or another SYNC */
    }
    free(p->held);
    p->held = NULL;
    return 1;
}

static void hold(cn_fast_poster *p, unsigned char (*bufs)[CN_FAST_FRAME_MAX + 1], const struct mmsghdr *msgs,
                 unsigned from, unsigned to) {
    if (from >= to) return;
    held_frames *h = calloc(1, sizeof *h);
    if (!h) return; /* out of memory: like frames lost with a connection; their bus copies follow */
    for (unsigned i = from; i < to; i++) {
        h->len[h->count] = (uint16_t)msgs[i].msg_len; /* each checked <= CN_FAST_FRAME_MAX by its reader */
        memcpy(h->data[h->count++], bufs[i], msgs[i].msg_len);
    }
    p->held = h;
}

/* A connection that hung up while it is not read: out of the epoll set (a hang-up is reported
 * at every round), its frames kept in the socket for when it may be read. */
void cn_poster_unpoll(cn_fast *f, cn_fast_poster *p) {
    if (!p->polled) return;
    epoll_ctl(f->epoll_fd, EPOLL_CTL_DEL, p->io.fd, NULL);
    p->polled = 0;
}

void cn_endpoint_read(cn_fast *f, cn_fast_poster *p, uint32_t events) {
    if (p->state != CN_P_READY) { /* not reading until its Sync (or credentials) */
        if (events & (EPOLLHUP | EPOLLERR)) cn_poster_unpoll(f, p);
        return;
    }
    if (!deliver_held(f, p)) return;
    unsigned char bufs[CN_FAST_BATCH][CN_FAST_FRAME_MAX + 1];
    struct iovec iov[CN_FAST_BATCH];
    struct mmsghdr msgs[CN_FAST_BATCH];
    /* From the loop, 8 batches, then the other sources' turn; draining before a bus post (events
     * 0), all there are. */
    for (int round = 0; round < 8 || events == 0; round++) {
        for (unsigned i = 0; i < CN_FAST_BATCH; i++) {
            iov[i] = (struct iovec){ bufs[i], CN_FAST_FRAME_MAX };
            msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
        }
        int got = recvmmsg(p->io.fd, msgs, CN_FAST_BATCH, MSG_DONTWAIT | MSG_TRUNC, NULL);
        if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (events & (EPOLLHUP | EPOLLERR)) cn_poster_close(f, p);
            return;
        }
        if (got <= 0) {
            cn_poster_close(f, p);
            return;
        }
        for (int i = 0; i < got; i++) {
            if (msgs[i].msg_len == 0) { /* the poster hung up */
                cn_poster_close(f, p);
                return;
            }
            if (!take_frame(f, p, bufs[i], msgs[i].msg_len)) {
                if (p->io.fd >= 0) hold(p, bufs, msgs, (unsigned)i + 1, (unsigned)got); /* waiting for a Sync */
                return;
            }
            if (p->departed) atomic_fetch_add(&f->drained, 1);
        }
        if (got < CN_FAST_BATCH) return; /* the socket is empty (a drain has all there was) */
    }
}

int cn_endpoint_seen(cn_fast *f, const cn_received_post *post) {
    if (!post->has_seq || !post->sender) return 0;
    cn_fast_poster *p = cn_map_get(&f->endpoint.by_sender, post->sender);
    if (!p) return 0;
    /* The usual case by far: its direct copy came first. Dropped with no system call. */
    if (p->origin && post->origin == p->origin && delivered_already(p, post->name, post->seq)) return 1;
    /* A poster writes a post's direct copy before its bus copy: every frame it sent before this
     * bus post is in the socket by now. Delivered first, they keep the poster's order even when
     * a connection ended with frames unread (a poster that gave up on a full socket). */
    if (p->state == CN_P_READY && p->io.fd >= 0) cn_endpoint_read(f, p, 0);
    p = cn_map_get(&f->endpoint.by_sender, post->sender); /* a malformed frame may have ended it */
    if (!p) return 0;
    if (!p->origin) p->origin = post->origin; /* a record its Sync made: the bus copies name it */
    if (post->origin != p->origin) return 0;
    return seen_before(p, post->name, post->seq);
}
