/*
 * channel_ring.c: the ring channel (channel.h), the fast path's second: a seqpacket connection
 * (the table's first channel, through its entry) whose frames go through memory its two ends
 * share, with a bell to wake the reader (docs/PROTOCOL.md "Fast path", "The ring").
 *
 * The poster makes, per connection, a memfd of RING_BYTES: a header page and a byte ring of
 * RING_DATA. It seals the memfd against shrinking and growing (F_SEAL_SHRINK, F_SEAL_GROW,
 * F_SEAL_SEAL), so that neither end's mapping can ever lose its pages (no SIGBUS), and sends it as
 * the connection's first message with the bell: an eventfd the poster keeps one of per uid at the
 * other end, shared by every connection to that user's processes. A send appends one record (the
 * frame's whole length, 4 bytes, then at most CN_FAST_FRAME_MAX + 1 of its bytes) and publishes
 * the new head; a ring writes the bell once for all the sends to its connections since its last
 * ring. The reader never reads or writes the bell: it polls it edge-triggered, and every write is
 * an edge for every reader (a read would take the edge from the others).
 *
 * What either end writes is the other's word: the reader copies a record out before it looks at
 * it, and a head more than a ring ahead, or a length past what was published, ends the
 * connection; the poster checks the tail the reader publishes the same way. Either end can only
 * spoil the frames of its own connection, which it could end anyway. An observer accepts a setup
 * only with a sealed memfd of exactly RING_BYTES that it can map writable, and an eventfd (as
 * /proc/self/fd names it); anything else, or a first message that carries descriptors and is no
 * setup, ends the connection. A first message with no descriptors is a poster of the seqpacket
 * channel (a client written from docs/PROTOCOL.md): its frames are read from the socket.
 *
 * A poster awaiting room (await_room) waits on a futex at the tail's low word, which the reader
 * wakes when `waiting` says someone waits; the waiter names the ring by a number in a list of the
 * rings alive (rings_lock), which keeps a mapping until its last waiter is done with it.
 */
#include <errno.h>
#include <endian.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <fcntl.h>
#include "channel.h"

#define RING_HEADER 4096u
#define RING_DATA 32768u                 /* a power of two: positions are taken modulo it */
#define RING_BYTES (RING_HEADER + RING_DATA)
#define RING_VERSION 1u
#define FRAME_LIMIT 65536                /* what send takes (channel.h) */
#define SOCKET_EVERY 64                  /* a poster looks whether its reader hung up every this many sends, and first */
#define RING_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
static const char setup_magic[8] = { 'd', 'n', '-', 'r', 'i', 'n', 'g', 0 };

/* The header page (docs/PROTOCOL.md "The ring"): each end writes its own line only. */
typedef struct ring_header {
    _Atomic uint64_t head;               /* 0: bytes ever appended (the poster's) */
    unsigned char pad0[56];
    _Atomic uint64_t tail;               /* 64: bytes ever read (the reader's); the futex is its low word */
    _Atomic uint32_t gone;               /* 72: the reader closed its end */
    unsigned char pad1[52];
    _Atomic uint32_t waiting;            /* 128: posters awaiting room (the poster's) */
    _Atomic uint32_t closed;             /* 132: the poster closed its end after the last head */
} ring_header;
_Static_assert(sizeof(ring_header) <= RING_HEADER, "the header fits its page");

/* A bell: one eventfd per uid at the other end, shared by this process's connections to it. */
typedef struct bell {
    struct bell *next;
    uid_t uid;
    int fd;
    unsigned refs;
    _Atomic int due;                     /* a frame was sent since the last ring */
} bell;

/* A mapping of a ring, alive while a connection or a waiter holds it. */
typedef struct mapping {
    struct mapping *next;
    uint64_t id;
    ring_header *hdr;
    unsigned refs;
    int listed;
} mapping;

enum { SETUP_PENDING, SETUP_RING, SETUP_PLAIN, SETUP_BROKEN };

typedef struct ring {
    cn_channel base;                     /* first: fd the socket's; bell the reader's (-1 before its setup) */
    cn_channel *sock;                    /* the seqpacket connection under it */
    int poster;
    int state;                           /* the reader's: SETUP_*; the poster's: SETUP_RING */
    mapping *map;
    unsigned char *data;                 /* RING_DATA bytes after the header */
    uint64_t pos;                        /* the poster's head, or the reader's tail, as this end knows it */
    unsigned sends;                      /* the poster's: its socket is looked at every SOCKET_EVERY sends */
    bell *bell;                          /* the poster's */
} ring;

static cn_mutex rings_lock = CN_MUTEX_INITIALIZER(CN_LOCK_RINGS);
static bell *bells;                      /* rings_lock */
static mapping *mappings;                /* rings_lock: the poster's rings alive, for their waiters */
static uint64_t next_id = 1;             /* rings_lock */

static long futex(_Atomic uint64_t *word, int op, uint32_t val, const struct timespec *timeout) {
    uint32_t *low = (uint32_t *)word + (__BYTE_ORDER == __BIG_ENDIAN); /* the tail's low word */
    return syscall(SYS_futex, low, op, val, timeout, NULL, 0);
}

/* ---- the bells (the poster's) ---- */

static bell *bell_take(uid_t uid) {
    cn_mutex_lock(&rings_lock);
    bell *b = bells;
    while (b && b->uid != uid) b = b->next;
    if (!b && (b = calloc(1, sizeof *b)) != NULL) {
        b->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (b->fd < 0) {
            free(b);
            b = NULL;
        } else {
            b->uid = uid;
            b->next = bells;
            bells = b;
        }
    }
    if (b) b->refs++;
    cn_mutex_unlock(&rings_lock);
    return b;
}

static void bell_drop(bell *b) {
    if (!b) return;
    cn_mutex_lock(&rings_lock);
    if (--b->refs == 0) {
        bell **at = &bells;
        while (*at != b) at = &(*at)->next;
        *at = b->next;
        close(b->fd);
        free(b);
    }
    cn_mutex_unlock(&rings_lock);
}

/* ---- mappings ---- */

static void mapping_drop_locked(mapping *m) {
    if (--m->refs) return;
    if (m->listed) {
        mapping **at = &mappings;
        while (*at != m) at = &(*at)->next;
        *at = m->next;
    }
    munmap(m->hdr, RING_BYTES);
    free(m);
}

static void mapping_drop(mapping *m) {
    cn_mutex_lock(&rings_lock);
    mapping_drop_locked(m);
    cn_mutex_unlock(&rings_lock);
}

/* A mapping of the memfd `fd` (read and write, shared), listed for waiters when `listed`. */
static mapping *mapping_new(int fd, int listed) {
    mapping *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    void *at = mmap(NULL, RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (at == MAP_FAILED) {
        free(m);
        return NULL;
    }
    m->hdr = at;
    m->refs = 1;
    cn_mutex_lock(&rings_lock);
    m->id = next_id++;
    if (listed) {
        m->listed = 1;
        m->next = mappings;
        mappings = m;
    }
    cn_mutex_unlock(&rings_lock);
    return m;
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

/* The setup's 16 bytes (little-endian): the magic, the version, the size of the data. */
static void setup_body(unsigned char body[16]) {
    uint32_t version = htole32(RING_VERSION), size = htole32(RING_DATA);
    memcpy(body, setup_magic, 8);
    memcpy(body + 8, &version, 4);
    memcpy(body + 12, &size, 4);
}

/* A record's length field, and how many of the frame's bytes it stores. */
static size_t record_head(size_t len, unsigned char out[4]) {
    uint32_t whole = htole32((uint32_t)len);
    memcpy(out, &whole, 4);
    return len > CN_FAST_FRAME_MAX ? CN_FAST_FRAME_MAX + 1 : len;
}

uint32_t CNotify_protocol_fast_ring_setup(unsigned char *out, size_t cap, size_t *out_len) {
    cn_clear_error();
    if (!out || !out_len) { cn_set_error("an argument is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    if (cap < 16) { cn_set_error("no room for a setup (16 bytes)"); return NOTIFY_STATUS_INVALID_REQUEST; }
    setup_body(out);
    *out_len = 16;
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_protocol_fast_ring_record(const unsigned char *frame, size_t len, unsigned char *out, size_t cap,
                                           size_t *out_len) {
    cn_clear_error();
    if (!frame || !out || !out_len) { cn_set_error("an argument is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    unsigned char head[4];
    size_t stored = record_head(len, head);
    if (len == 0 || len > FRAME_LIMIT || cap < 4 + stored) {
        cn_set_error("not a frame a ring carries (1 to 65,536 bytes), or no room for its record");
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    memcpy(out, head, 4);
    memcpy(out + 4, frame, stored);
    *out_len = 4 + stored;
    return NOTIFY_STATUS_OK;
}

/* The setup: the ring's memfd and the bell, as the connection's first message. */
static int send_setup(int sock, int memfd, int bellfd) {
    unsigned char body[16];
    setup_body(body);
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(2 * sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = { body, sizeof body };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf };
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
    int fds[2] = { memfd, bellfd };
    memcpy(CMSG_DATA(cm), fds, sizeof fds);
    return sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof body ? 0 : -1;
}

static cn_channel *rg_connect(const char *token, unsigned flags, cn_channel_peer *peer) {
    cn_channel *sock = cn_channel_seqpacket.connect(token, flags, peer);
    if (!sock) return NULL;
    ring *r = ring_of(sock, 1);
    if (!r) return NULL;
    if (flags & CN_CHANNEL_FRAMES_ONLY) { /* a listener of frames alone: the socket's */
        r->state = SETUP_PLAIN;
        return &r->base;
    }
    int fd = memfd_create("darwin-notify-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    int ok = fd >= 0 && ftruncate(fd, RING_BYTES) == 0 && fcntl(fd, F_ADD_SEALS, RING_SEALS) == 0
             && (r->map = mapping_new(fd, 1)) != NULL && (r->bell = bell_take(peer->uid)) != NULL
             && send_setup(sock->fd, fd, r->bell->fd) == 0;
    int saved = errno;
    if (fd >= 0) close(fd); /* the mappings hold it */
    if (!ok) {
        rg_close(&r->base);
        errno = saved ? saved : EIO;
        return NULL;
    }
    r->data = (unsigned char *)r->map->hdr + RING_HEADER;
    return &r->base;
}

/* ---- the reader's setup ---- */

/* Whether `fd` is an eventfd, as /proc names it (no /proc: not known, refused). */
static int is_eventfd(int fd) {
    char path[64], link[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n < 0) return 0;
    link[n] = '\0';
    return strcmp(link, "anon_inode:[eventfd]") == 0;
}

/* Whether `fd` is a memfd of exactly RING_BYTES that nobody can shrink. */
static int is_ring_memfd(int fd) {
    struct stat st;
    int seals = fcntl(fd, F_GET_SEALS);
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == (off_t)RING_BYTES && seals >= 0
           && (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) == (F_SEAL_SHRINK | F_SEAL_GROW);
}

/* The connection's first message, when it has come: a setup (the ring mapped, its bell kept), or
 * a frame of a seqpacket poster (the first of those read from the socket: SETUP_PLAIN). It is
 * first looked at without taking it or any descriptor it carries: one that carries some must be
 * a setup, and anything else ends the connection (SETUP_BROKEN). */
static void take_setup(ring *r, cn_channel_frames *out) {
    char first;
    struct iovec piov = { &first, 1 };
    struct msghdr peek = { .msg_iov = &piov, .msg_iovlen = 1 };
    ssize_t n = recvmsg(r->sock->fd, &peek, MSG_DONTWAIT | MSG_PEEK);
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) r->state = SETUP_BROKEN;
        return;
    }
    if (n > 0 && !(peek.msg_flags & MSG_CTRUNC)) { /* no descriptors: a poster of frames alone */
        r->state = SETUP_PLAIN;
        return;
    }
    if (n == 0) { /* the poster hung up before a word */
        r->state = SETUP_BROKEN;
        return;
    }
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(4 * sizeof(int))];
    } control;
    struct iovec iov = { out->data[0], CN_FAST_FRAME_MAX + 1 };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf };
    n = recvmsg(r->sock->fd, &msg, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);
    if (n < 0) {
        r->state = SETUP_BROKEN;
        return;
    }
    int fds[4], nfds = 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k && nfds < 4; i++) memcpy(&fds[nfds++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
    }
    uint32_t version = 0, size = 0;
    if (n == 16) {
        memcpy(&version, out->data[0] + 8, 4);
        memcpy(&size, out->data[0] + 12, 4);
        version = le32toh(version);
        size = le32toh(size);
    }
    int ok = n == 16 && !(msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) && nfds == 2 && memcmp(out->data[0], setup_magic, 8) == 0
             && version == RING_VERSION && size == RING_DATA && is_ring_memfd(fds[0]) && is_eventfd(fds[1])
             && (r->map = mapping_new(fds[0], 0)) != NULL;
    if (ok) {
        r->data = (unsigned char *)r->map->hdr + RING_HEADER;
        r->pos = atomic_load_explicit(&r->map->hdr->tail, memory_order_acquire);
        r->base.bell = fds[1]; /* kept; the memfd is closed below (the mapping holds it) */
        fds[1] = -1;
        r->state = SETUP_RING;
        out->rewatch = 1;
    } else {
        r->state = SETUP_BROKEN;
    }
    for (int i = 0; i < nfds; i++)
        if (fds[i] >= 0) close(fds[i]);
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
    size_t stored = record_head(len, head);
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
    if (r->state == SETUP_PENDING && max) take_setup(r, out);
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

static void rg_waiter(cn_channel *c, cn_channel_waiter *out) {
    ring *r = (ring *)c;
    out->fd = c->fd;
    out->id = r->poster && r->map ? r->map->id : 0; /* 0: a socket's room (the frames alone) */
}

/* The mapping of the ring numbered `id`, held for a waiter; NULL when it is gone. */
static mapping *hold(uint64_t id) {
    cn_mutex_lock(&rings_lock);
    mapping *m = mappings;
    while (m && m->id != id) m = m->next;
    if (m) m->refs++;
    cn_mutex_unlock(&rings_lock);
    return m;
}

/* Room: a quarter full or less, or the reader gone (its tail spoiled counts as gone). */
static int roomy(ring_header *h) {
    uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed), tail = atomic_load(&h->tail);
    return atomic_load(&h->gone) || tail > head || head - tail <= RING_DATA / 4;
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
        mapping *m = hold(w[i].id);
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
        mapping_drop(m);
        if (!room) return 0;
    }
    return 1;
}

static void rg_close(cn_channel *c) {
    if (!c) return;
    ring *r = (ring *)c;
    if (r->map) {
        if (r->poster) atomic_store_explicit(&r->map->hdr->closed, 1, memory_order_release);
        else atomic_store_explicit(&r->map->hdr->gone, 1, memory_order_release);
        mapping_drop(r->map);
    }
    if (r->poster && r->bell) bell_drop(r->bell);
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
    .waiter = rg_waiter,
    .await_room = rg_await_room,
    .close = rg_close,
};
