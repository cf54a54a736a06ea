/*
 * channel_ring.c: the ring channel (channel.h), the fast path's first: a seqpacket connection
 * (the table's other channel, through its operations) whose frames go through memory its two
 * ends share, with a bell to wake the reader (docs/PROTOCOL.md "Fast path", "The ring"). This
 * file is its data path; the setup, the bells and the mappings are channel_ring_setup.c's.
 *
 * Per connection a memfd of RING_BYTES, a header page and a byte ring of RING_DATA, sealed so
 * that no end's mapping can lose its pages (no SIGBUS). A send appends one record (the frame's
 * whole length, 4 bytes, then at most CN_FAST_FRAME_MAX + 1 of its bytes) and publishes the new
 * head; a ring writes the bell once for all the sends to its connections since its last ring. The
 * reader never reads or writes the bell: it polls it edge-triggered, and every write is an edge
 * for every reader (a read would take the edge from the others).
 *
 * What either end writes is the other's word: the reader copies a record out before it looks at
 * it, and a head more than a ring ahead or behind, or a length past what was published, ends the
 * connection; the poster checks the tail the reader publishes the same way. Either end can only
 * spoil the frames of its own connection, which it could end anyway. A connection whose poster
 * sent no setup (a client written from docs/PROTOCOL.md) is read from the socket.
 *
 * A poster awaiting room (await_room) waits on a futex at the tail's low word, which the reader
 * wakes when `waiting` says someone waits; the waiter names the ring by its number among the
 * rings alive, which keeps a mapping until its last waiter is done with it.
 */
#include <errno.h>
#include <endian.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "channel_ring.h"

static long futex(_Atomic uint64_t *word, int op, uint32_t val, const struct timespec *timeout) {
    uint32_t *low = (uint32_t *)word + (__BYTE_ORDER == __BIG_ENDIAN); /* the tail's low word */
    return syscall(SYS_futex, low, op, val, timeout, NULL, 0);
}

/* ---- the ring's bytes ---- */

static void copy_in(unsigned char *data, uint64_t at, const unsigned char *from, size_t n) {
    size_t off = (size_t)(at & (RING_DATA - 1)), first = n < RING_DATA - off ? n : RING_DATA - off;
    memcpy(data + off, from, first);
    memcpy(data, from + first, n - first);
}

static void copy_out(const unsigned char *data, uint64_t at, unsigned char *to, size_t n) {
    size_t off = (size_t)(at & (RING_DATA - 1)), first = n < RING_DATA - off ? n : RING_DATA - off;
    memcpy(to, data + off, first);
    memcpy(to + first, data, n - first);
}

static ring *ring_of(cn_channel *sock, int poster) {
    ring *r = calloc(1, sizeof *r);
    if (!r) {
        cn_channel_seqpacket.close(sock);
        errno = ENOMEM;
        return NULL;
    }
    r->sock = sock;
    r->base.fd = sock->fd;
    r->base.bell = -1;
    r->poster = poster;
    r->state = poster ? SETUP_RING : SETUP_PENDING;
    return r;
}

/* ---- listening and connecting ---- */

static int rg_address(const char *token, char *out, size_t len) { return cn_channel_seqpacket.address(token, out, len); }

static cn_channel *rg_listen(const char *token) {
    cn_channel *sock = cn_channel_seqpacket.listen(token);
    ring *r = sock ? ring_of(sock, 0) : NULL;
    return r ? &r->base : NULL;
}

static cn_channel *rg_accept(cn_channel *listener, cn_channel_peer *peer) {
    cn_channel *sock = cn_channel_seqpacket.accept(((ring *)listener)->sock, peer);
    if (!sock) return NULL;
    ring *r = ring_of(sock, 0);
    return r ? &r->base : NULL;
}

static void rg_close(cn_channel *c);

static cn_channel *rg_connect(const char *token, unsigned flags, cn_channel_peer *peer) {
    cn_channel *sock = cn_channel_seqpacket.connect(token, flags, peer);
    if (!sock) return NULL;
    ring *r = ring_of(sock, 1);
    if (!r) return NULL;
    if (flags & CN_CHANNEL_FRAMES_ONLY) { /* a listener of frames alone: the socket's */
        r->state = SETUP_PLAIN;
        return &r->base;
    }
    if (cn_ring_make(r, peer->uid) != 0) {
        int saved = errno;
        rg_close(&r->base);
        errno = saved;
        return NULL;
    }
    return &r->base;
}

/* ---- sending ---- */

/* Whether the reader's end of the socket is closed (a reader that died says nothing in the ring). */
static int hung_up(const ring *r) {
    struct pollfd p = { .fd = r->sock->fd, .events = POLLIN };
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

/* The tail the reader published, if it is one (at most the head, at most a ring behind). */
static int tail_of(const ring *r, uint64_t *tail) {
    *tail = atomic_load_explicit(&r->map->hdr->tail, memory_order_acquire);
    return *tail <= r->pos && r->pos - *tail <= RING_DATA;
}

CN_HOT static int rg_send(cn_channel *c, const unsigned char *frame, size_t len) {
    ring *r = (ring *)c;
    if (r->state == SETUP_PLAIN) return cn_channel_seqpacket.send(r->sock, frame, len);
    if (len == 0 || len > FRAME_LIMIT) {
        errno = EMSGSIZE;
        return -1;
    }
    uint64_t tail;
    if (!r->poster || atomic_load_explicit(&r->map->hdr->gone, memory_order_relaxed) || !tail_of(r, &tail)
        || (r->sends++ % SOCKET_EVERY == 0 && hung_up(r))) {
        errno = EPIPE; /* the reader left, or spoiled its tail */
        return -1;
    }
    unsigned char head[4];
    size_t stored = cn_ring_record_head(len, head);
    if (RING_DATA - (r->pos - tail) < 4 + stored) return hung_up(r) ? -1 : 0; /* no room now */
    copy_in(r->data, r->pos, head, 4);
    copy_in(r->data, r->pos + 4, frame, stored);
    r->pos += 4 + stored;
    atomic_store_explicit(&r->map->hdr->head, r->pos, memory_order_release);
    atomic_store(&r->bell->due, 1); /* after the head: a ring that sees it rings for this frame */
    return 1;
}

CN_HOT static void rg_ring(cn_channel *c) {
    ring *r = (ring *)c;
    if (!r->poster || !r->bell || !atomic_exchange(&r->bell->due, 0)) return;
    uint64_t one = 1, full;
    if (write(r->bell->fd, &one, sizeof one) < 0 && errno == EAGAIN) {
        /* The count is full (someone who holds the bell filled it): empty it, and ring again. */
        if (read(r->bell->fd, &full, sizeof full) < 0) return;
        if (write(r->bell->fd, &one, sizeof one) < 0) return;
    }
}

/* ---- reading ---- */

CN_HOT static void rg_read(cn_channel *c, unsigned max, cn_channel_frames *out) {
    ring *r = (ring *)c;
    if (max > CN_CHANNEL_BATCH) max = CN_CHANNEL_BATCH;
    out->count = 0;
    out->closed = 0;
    out->rewatch = 0;
    if (r->state == SETUP_PENDING && max) cn_ring_take_setup(r, out);
    if (r->state == SETUP_PLAIN) {
        cn_channel_seqpacket.read(r->sock, max, out);
        return;
    }
    if (r->state == SETUP_BROKEN) {
        out->closed = 1;
        return;
    }
    if (r->state != SETUP_RING) return; /* no setup yet */
    ring_header *h = r->map->hdr;
    uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire), pos = r->pos;
    int broken = head < pos || head - pos > RING_DATA;
    while (!broken && out->count < max && head - pos >= 4) {
        uint32_t whole;
        copy_out(r->data, pos, (unsigned char *)&whole, 4);
        whole = le32toh(whole);
        size_t stored = whole > CN_FAST_FRAME_MAX ? CN_FAST_FRAME_MAX + 1 : whole;
        if (whole == 0 || whole > FRAME_LIMIT || head - pos - 4 < stored) {
            broken = 1;
            break;
        }
        copy_out(r->data, pos + 4, out->data[out->count], stored);
        out->len[out->count++] = (uint16_t)stored;
        pos += 4 + stored;
    }
    if (!broken && pos != head && head - pos < 4 && out->count < max) broken = 1; /* a record cut short */
    if (pos != r->pos) {
        r->pos = pos;
        atomic_store_explicit(&h->tail, pos, memory_order_seq_cst);
        if (atomic_load_explicit(&h->waiting, memory_order_seq_cst)) futex(&h->tail, FUTEX_WAKE, INT_MAX, NULL);
    }
    if (broken) {
        r->state = SETUP_BROKEN;
        out->closed = 1;
        return;
    }
    if (out->count == max || pos != head) return;
    /* All read: the poster closed after its last frame, or, when nothing came, whether it left. */
    if (atomic_load_explicit(&h->closed, memory_order_acquire)) {
        out->closed = 1;
    } else if (out->count == 0) {
        char byte;
        ssize_t n = recv(r->sock->fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) out->closed = 1;
        if (n > 0) { /* a ring's poster writes nothing more on the socket */
            r->state = SETUP_BROKEN;
            out->closed = 1;
        }
    }
}

/* ---- room ---- */

static int rg_pressed(cn_channel *c) {
    ring *r = (ring *)c;
    if (r->state == SETUP_PLAIN) return cn_channel_seqpacket.pressed(r->sock);
    uint64_t tail;
    return r->poster && (!tail_of(r, &tail) || r->pos - tail > RING_DATA / 2);
}

static int rg_unread(cn_channel *c) {
    ring *r = (ring *)c;
    if (r->state == SETUP_PLAIN) return cn_channel_seqpacket.unread(r->sock);
    uint64_t tail;
    if (!r->poster || !tail_of(r, &tail)) return -1;
    return tail != r->pos;
}

/* The tail counts the bytes ever read: past 0, the reader took the connection's first frame. */
static int rg_consumed(cn_channel *c) {
    ring *r = (ring *)c;
    if (r->state == SETUP_PLAIN) return cn_channel_seqpacket.consumed(r->sock);
    uint64_t tail;
    return r->poster && tail_of(r, &tail) && tail > 0;
}

static void rg_waiter(cn_channel *c, cn_channel_waiter *out) {
    ring *r = (ring *)c;
    out->fd = c->fd;
    out->id = r->poster && r->map ? r->map->id : 0; /* 0: a socket's room (the frames alone) */
}

/* Room: a quarter full or less, or either end gone (a tail spoiled counts as gone): the waiter
 * is done with it. */
static int roomy(ring_header *h) {
    uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed), tail = atomic_load(&h->tail);
    return atomic_load(&h->gone) || atomic_load(&h->closed) || tail > head || head - tail <= RING_DATA / 4;
}

static int rg_await_room(const cn_channel_waiter *w, size_t n, int timeout_ms) {
    uint64_t deadline = cn_now_ms() + (timeout_ms > 0 ? (uint64_t)timeout_ms : 0);
    cn_channel_waiter sockets[64];
    size_t nsockets = 0;
    for (size_t i = 0; i < n; i++)
        if (w[i].id == 0 && nsockets < 64) sockets[nsockets++] = w[i];
    if (nsockets && !cn_channel_seqpacket.await_room(sockets, nsockets, timeout_ms)) return 0;
    for (size_t i = 0; i < n; i++) {
        if (w[i].id == 0) continue;
        mapping *m = cn_ring_hold(w[i].id);
        if (!m) continue; /* closed meanwhile */
        ring_header *h = m->hdr;
        atomic_fetch_add(&h->waiting, 1);
        int room = 0;
        for (;;) {
            uint64_t tail = atomic_load(&h->tail), now = cn_now_ms();
            if ((room = roomy(h)) || now >= deadline) break;
            uint64_t left = deadline - now;
            struct timespec ts = { (time_t)(left / 1000), (long)(left % 1000) * 1000000L };
            futex(&h->tail, FUTEX_WAIT, (uint32_t)tail, &ts); /* a change of the tail, a wake, or the time */
        }
        atomic_fetch_sub(&h->waiting, 1);
        cn_ring_mapping_drop(m);
        if (!room) return 0;
    }
    return 1;
}

static void rg_close(cn_channel *c) {
    if (!c) return;
    ring *r = (ring *)c;
    if (r->map) {
        ring_header *h = r->map->hdr;
        atomic_store(r->poster ? &h->closed : &h->gone, 1);
        if (atomic_load(&h->waiting)) futex(&h->tail, FUTEX_WAKE, INT_MAX, NULL); /* a waiter is done */
        cn_ring_mapping_drop(r->map);
    }
    if (r->poster && r->bell) cn_ring_bell_drop(r->bell);
    if (r->base.bell >= 0) close(r->base.bell);
    cn_channel_seqpacket.close(r->sock);
    free(r);
}

const cn_channel_ops cn_channel_ring = {
    .name = "ring",
    .reads_rings = 1,
    .address = rg_address,
    .listen = rg_listen,
    .accept = rg_accept,
    .connect = rg_connect,
    .send = rg_send,
    .ring = rg_ring,
    .read = rg_read,
    .pressed = rg_pressed,
    .unread = rg_unread,
    .consumed = rg_consumed,
    .waiter = rg_waiter,
    .await_room = rg_await_room,
    .close = rg_close,
};
