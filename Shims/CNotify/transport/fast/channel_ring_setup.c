/*
 * channel_ring_setup.c: the ring channel's setup and what its connections share
 * (docs/PROTOCOL.md "The ring"): the memfd a poster makes, seals and sends with its bell as a
 * connection's first message; what an endpoint accepts of one (a sealed memfd of exactly the
 * ring's size it can map writable, and an eventfd), keeping none of the descriptors of a setup it
 * refuses; the bells, one per uid at the other end, shared by this process's connections to it;
 * and the poster's mappings alive, which a waiter for room holds by number (rings_lock, a leaf).
 * The data path is channel_ring.c's.
 */
#include <errno.h>
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "channel_ring.h"

static const char setup_magic[8] = { 'd', 'n', '-', 'r', 'i', 'n', 'g', 0 };

static cn_mutex rings_lock = CN_MUTEX_INITIALIZER(CN_LOCK_RINGS);
static bell *bells;                      /* rings_lock */
static mapping *mappings;                /* rings_lock: the poster's rings alive, for their waiters */
static uint64_t next_id = 1;             /* rings_lock */

/* ---- the bells (the poster's) ---- */

bell *cn_ring_bell_take(uid_t uid) {
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

void cn_ring_bell_drop(bell *b) {
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

void cn_ring_mapping_drop(mapping *m) {
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

/* The mapping of the ring numbered `id`, held for a waiter; NULL when it is gone. */
mapping *cn_ring_hold(uint64_t id) {
    cn_mutex_lock(&rings_lock);
    mapping *m = mappings;
    while (m && m->id != id) m = m->next;
    if (m) m->refs++;
    cn_mutex_unlock(&rings_lock);
    return m;
}

/* ---- the setup's bytes ---- */

/* The setup's 16 bytes (little-endian): the magic, the version, the size of the data. */
static void setup_body(unsigned char body[16]) {
    uint32_t version = htole32(RING_VERSION), size = htole32(RING_DATA);
    memcpy(body, setup_magic, 8);
    memcpy(body + 8, &version, 4);
    memcpy(body + 12, &size, 4);
}

/* A record's length field, and how many of the frame's bytes it stores. */
size_t cn_ring_record_head(size_t len, unsigned char out[4]) {
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
    size_t stored = cn_ring_record_head(len, head);
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

/* ---- the poster's setup ---- */

int cn_ring_make(ring *r, uid_t uid) {
    int fd = memfd_create("darwin-notify-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    int ok = fd >= 0 && ftruncate(fd, RING_BYTES) == 0 && fcntl(fd, F_ADD_SEALS, RING_SEALS) == 0
             && (r->map = mapping_new(fd, 1)) != NULL && (r->bell = cn_ring_bell_take(uid)) != NULL
             && send_setup(r->sock->fd, fd, r->bell->fd) == 0;
    int saved = errno;
    if (fd >= 0) close(fd); /* the mappings hold it */
    if (!ok) {
        errno = saved ? saved : EIO;
        return -1;
    }
    r->data = (unsigned char *)r->map->hdr + RING_HEADER;
    return 0;
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
void cn_ring_take_setup(ring *r, cn_channel_frames *out) {
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
