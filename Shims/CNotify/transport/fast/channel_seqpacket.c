/*
 * channel_seqpacket.c: the seqpacket channel (channel.h), the fast path's first: a Unix seqpacket
 * socket in the abstract namespace, "\0darwin-notify/fp/<token>" (docs/PROTOCOL.md "Fast path"),
 * where the kernel keeps each frame's bounds and their order, and gives the process at the other
 * end (SO_PEERCRED, SO_PEERGROUPS). No file to squat, leave stale or clean up; a token is 128 random bits, so
 * nobody names another's socket in advance. Frames are read 32 at a time (recvmmsg); a full
 * socket refuses a frame (EAGAIN) and how full it is is read with SIOCOUTQ against SO_SNDBUF.
 * A connection keeps the message headers of its reads, built for the buffer it last read into.
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <linux/sockios.h>
#include <unistd.h>
#include "channel.h"

#define ABSTRACT_PREFIX "darwin-notify/fp/"
#define TOKEN_LEN 32
#define FRAME_LIMIT 65536 /* what send takes (channel.h) */

/* recvmmsg's headers for reads into `into`. recvmmsg writes back only each header's length and
 * flags, so they hold for every later read into the same buffer: a read of one frame then touches
 * the two headers the kernel looks at, not the 32 it would otherwise write first (an observer
 * woken for one post pays for every line it touches: docs/DESIGN.md "A known poster's lane"). */
typedef struct read_headers {
    const cn_channel_frames *into;
    struct iovec iov[CN_CHANNEL_BATCH];
    struct mmsghdr msgs[CN_CHANNEL_BATCH];
} read_headers;

typedef struct seqpacket {
    cn_channel base;       /* first */
    int sndbuf;            /* SO_SNDBUF of this end, bytes; 0: unknown (never pressed) */
    read_headers *headers; /* made at the first read; NULL before */
} seqpacket;

/* The abstract address of `token`; its length into *len. */
static void address_of(const char *token, struct sockaddr_un *out, socklen_t *len) {
    memset(out, 0, sizeof *out);
    out->sun_family = AF_UNIX;
    /* sun_path[0] stays NUL: the abstract namespace. */
    memcpy(out->sun_path + 1, ABSTRACT_PREFIX, sizeof ABSTRACT_PREFIX - 1);
    memcpy(out->sun_path + sizeof ABSTRACT_PREFIX, token, TOKEN_LEN);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + sizeof ABSTRACT_PREFIX + TOKEN_LEN);
}

static int sp_address(const char *token, char *out, size_t len) {
    int n = snprintf(out, len, "@" ABSTRACT_PREFIX "%s", token); /* '@' for the leading NUL, as ss(8) prints it */
    return n >= 0 && (size_t)n < len ? 0 : -1;
}

static cn_channel *wrap(int fd) {
    seqpacket *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    s->base.fd = fd;
    s->base.bell = -1;
    socklen_t len = sizeof s->sndbuf;
    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &s->sndbuf, &len) != 0) s->sndbuf = 0;
    return &s->base;
}

/* The peer's groups: `gid`, then what SO_PEERGROUPS gives (the supplementary groups it had when
 * the connection was made), as many as are kept. */
static void groups_of(int fd, gid_t gid, cn_channel_groups *out) {
    out->gid[0] = gid;
    out->n = 1;
    out->cut = 1; /* until the kernel says which */
    gid_t kept[CN_CHANNEL_GROUPS - 1], *all = kept;
    socklen_t len = sizeof kept;
    int r = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, kept, &len);
    if (r != 0 && errno == ERANGE && len > sizeof kept) { /* more than are kept: len says how many */
        all = malloc(len);
        r = all ? getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, all, &len) : -1;
    }
    if (r == 0) {
        size_t count = len / sizeof(gid_t), take = count < CN_CHANNEL_GROUPS - 1 ? count : CN_CHANNEL_GROUPS - 1;
        memcpy(out->gid + 1, all, take * sizeof(gid_t));
        out->n = 1 + (unsigned)take;
        out->cut = take < count;
    }
    if (all != kept) free(all);
}

static int peer_of(int fd, cn_channel_peer *peer) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
    peer->pid = cred.pid;
    peer->uid = cred.uid;
    peer->gid = cred.gid;
    groups_of(fd, cred.gid, &peer->groups);
    return 0;
}

/* A socket for the address of `token`, that address into *sa: the socket, or -1 and errno. */
static int socket_for(const char *token, struct sockaddr_un *sa, socklen_t *len) {
    if (strlen(token) != TOKEN_LEN) {
        errno = EINVAL;
        return -1;
    }
    address_of(token, sa, len);
    return socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

/* `fd` closed, errno kept: NULL. */
static cn_channel *give_up(int fd) {
    int saved = errno;
    close(fd);
    errno = saved;
    return NULL;
}

static cn_channel *sp_listen(const char *token) {
    struct sockaddr_un sa;
    socklen_t len;
    int fd = socket_for(token, &sa, &len);
    if (fd < 0) return NULL;
    if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, 128) != 0) return give_up(fd);
    return wrap(fd);
}

static cn_channel *sp_accept(cn_channel *listener, cn_channel_peer *peer) {
    int fd = accept4(listener->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return NULL;
    if (peer_of(fd, peer) != 0) {
        close(fd);
        return NULL;
    }
    return wrap(fd);
}

static cn_channel *sp_connect(const char *token, unsigned flags, cn_channel_peer *peer) {
    (void)flags; /* frames are all it sends */
    struct sockaddr_un sa;
    socklen_t len;
    int fd = socket_for(token, &sa, &len);
    if (fd < 0) return NULL;
    if (connect(fd, (struct sockaddr *)&sa, len) != 0 || peer_of(fd, peer) != 0) return give_up(fd);
    return wrap(fd);
}

static int sp_send(cn_channel *c, const unsigned char *frame, size_t len) {
    if (len == 0 || len > FRAME_LIMIT) { /* an empty frame would read as a hang-up */
        errno = EMSGSIZE;
        return -1;
    }
    if (send(c->fd, frame, len, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)len) return 1;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
}

static void sp_ring(cn_channel *c) { (void)c; /* a send wakes the reader */ }

static void build_headers(read_headers *h, cn_channel_frames *out) {
    for (unsigned i = 0; i < CN_CHANNEL_BATCH; i++) {
        h->iov[i] = (struct iovec){ out->data[i], CN_FAST_FRAME_MAX + 1 };
        h->msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &h->iov[i], .msg_iovlen = 1 } };
    }
    h->into = out;
}

CN_HOT static void sp_read(cn_channel *c, unsigned max, cn_channel_frames *out) {
    seqpacket *s = (seqpacket *)c;
    if (max > CN_CHANNEL_BATCH) max = CN_CHANNEL_BATCH;
    out->count = 0;
    out->closed = 0;
    out->rewatch = 0;
    read_headers spare, *h = s->headers ? s->headers : (s->headers = calloc(1, sizeof *s->headers));
    if (!h) h = &spare, h->into = NULL; /* no memory to keep them: built for this read alone */
    if (h->into != out) build_headers(h, out); /* the last read went into another buffer */
    struct mmsghdr *msgs = h->msgs;
    int got = max ? recvmmsg(c->fd, msgs, max, MSG_DONTWAIT | MSG_TRUNC, NULL) : 0;
    if (got < 0) {
        out->closed = errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
        return;
    }
    if (got == 0 && max) { /* no frame, and the connection ended */
        out->closed = 1;
        return;
    }
    for (int i = 0; i < got; i++) {
        if (msgs[i].msg_len == 0) { /* an empty frame is the other end's hang-up */
            out->closed = 1;
            return;
        }
        /* With MSG_TRUNC, msg_len is the frame's whole length, past the room given too. */
        int cut = (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) != 0 || msgs[i].msg_len > CN_FAST_FRAME_MAX;
        out->len[out->count++] = cut ? CN_FAST_FRAME_MAX + 1 : (uint16_t)msgs[i].msg_len;
    }
}

static int sp_pressed(cn_channel *c) {
    seqpacket *s = (seqpacket *)c;
    int queued = 0;
    return s->sndbuf > 0 && ioctl(c->fd, SIOCOUTQ, &queued) == 0 && queued > s->sndbuf / 2;
}

static int sp_unread(cn_channel *c) {
    int queued = 0;
    if (ioctl(c->fd, SIOCOUTQ, &queued) != 0) return -1;
    return queued > 0;
}

/* The kernel counts what waits in a socket, not what left it: a reader that read some frames and
 * one that read none look alike while frames wait. */
static int sp_consumed(cn_channel *c) {
    (void)c;
    return 0;
}

static void sp_waiter(cn_channel *c, cn_channel_waiter *out) {
    out->fd = c->fd;
    out->id = 0;
}

static int sp_await_room(const cn_channel_waiter *w, size_t n, int timeout_ms) {
    struct pollfd fds[64];
    if (n > 64) n = 64; /* the rest are looked at by the next post */
    for (size_t i = 0; i < n; i++) fds[i] = (struct pollfd){ .fd = w[i].fd, .events = POLLOUT };
    uint64_t deadline = cn_now_ms() + (timeout_ms > 0 ? (uint64_t)timeout_ms : 0);
    /* POLLOUT: a quarter full or less. poll returns when any one has room: wait until all have. */
    for (;;) {
        uint64_t now = cn_now_ms();
        int left = now < deadline ? (int)(deadline - now) : 0;
        if (poll(fds, n, left) < 0 && errno != EINTR) return 0;
        int all = 1;
        for (size_t i = 0; i < n; i++) {
            if (fds[i].revents & (POLLOUT | POLLERR | POLLHUP | POLLNVAL)) fds[i].events = 0, fds[i].fd = -1;
            all &= fds[i].fd < 0;
        }
        if (all) return 1;
        if (left == 0) return 0;
    }
}

static void sp_close(cn_channel *c) {
    if (!c) return;
    close(c->fd);
    free(((seqpacket *)c)->headers);
    free(c);
}

const cn_channel_ops cn_channel_seqpacket = {
    .name = "seqpacket",
    .address = sp_address,
    .listen = sp_listen,
    .accept = sp_accept,
    .connect = sp_connect,
    .send = sp_send,
    .ring = sp_ring,
    .read = sp_read,
    .pressed = sp_pressed,
    .unread = sp_unread,
    .consumed = sp_consumed,
    .waiter = sp_waiter,
    .await_room = sp_await_room,
    .close = sp_close,
};
