/*
 * ring_stranger.h: the ring channel's tests (test_channel_ring.c) playing the other end by hand:
 * the layout of docs/PROTOCOL.md "The ring", a setup message sent with descriptors of the test's
 * choosing, a ring whose poster is the test (its mapping kept, to write what a stranger would),
 * and an observer whose setup's descriptors are taken by hand. Included by that one test only.
 */
#ifndef CN_TEST_RING_STRANGER_H
#define CN_TEST_RING_STRANGER_H
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include "../channel.h"
/* The layout of docs/PROTOCOL.md "The ring". */
#define HEADER 4096u
#define DATA 32768u
#define BYTES (HEADER + DATA)
#define HEAD_AT 0
#define TAIL_AT 64

static const cn_channel_ops *ring = &cn_channel_ring, *sp = &cn_channel_seqpacket;

static void new_token(char out[33]) {
    unsigned char raw[16];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) abort();
    for (int i = 0; i < 16; i++) sprintf(out + 2 * i, "%02x", raw[i]);
}

static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n - 1; /* the directory's own */
}

static int readable(int fd, int ms) {
    struct pollfd p = { .fd = fd, .events = POLLIN };
    return poll(&p, 1, ms) == 1;
}

/* A setup message as a poster sends it (16 bytes: magic, version, size), with `fds`. */
static int send_setup(int sock, const char *magic, uint32_t version, uint32_t size, size_t len, const int *fds, int nfds) {
    unsigned char body[32] = { 0 };
    memcpy(body, magic, 8);
    memcpy(body + 8, &version, 4);
    memcpy(body + 12, &size, 4);
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(4 * sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = { body, len };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (nfds) {
        msg.msg_control = control.buf;
        msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
    }
    return sendmsg(sock, &msg, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

static int memfd_of(off_t size, int seals) {
    int fd = memfd_create("test-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, size) != 0 || (seals && fcntl(fd, F_ADD_SEALS, seals) != 0)) abort();
    return fd;
}

static char token[33];

/* A ring whose poster is the test: a good setup, the mapping kept to write what a stranger would. */
typedef struct crafted {
    cn_channel *raw, *obs;
    unsigned char *map;
} crafted;

static int craft(cn_channel *listener, crafted *c) {
    cn_channel_peer peer;
    memset(c, 0, sizeof *c);
    c->raw = sp->connect(token, 0, &peer);
    if (!c->raw) return -1;
    int fds[2] = { memfd_of(BYTES, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK) };
    c->map = mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    int ok = c->map != MAP_FAILED && send_setup(c->raw->fd, "dn-ring", 1, DATA, 16, fds, 2) == 0;
    close(fds[0]);
    close(fds[1]);
    c->obs = ok && readable(listener->fd, 2000) ? ring->accept(listener, &peer) : NULL;
    return c->obs ? 0 : -1;
}

static void uncraft(crafted *c) {
    if (c->obs) ring->close(c->obs);
    if (c->raw) sp->close(c->raw);
    if (c->map && c->map != MAP_FAILED) munmap(c->map, BYTES);
}

static void put64(unsigned char *map, size_t at, uint64_t v) { __atomic_store_n((uint64_t *)(map + at), v, __ATOMIC_RELEASE); }
static void put_record(unsigned char *map, uint64_t at, uint32_t len, const void *bytes, size_t n) {
    unsigned char *data = map + HEADER;
    for (size_t i = 0; i < 4; i++) data[(at + i) % DATA] = ((unsigned char *)&len)[i];
    for (size_t i = 0; i < n; i++) data[(at + 4 + i) % DATA] = ((const unsigned char *)bytes)[i];
}

/* A raw observer of a ring poster: the setup's descriptors taken by hand. */
typedef struct raw_observer {
    cn_channel *listener, *poster, *conn;
    unsigned char *map;
    int bell;
} raw_observer;

static int take_fds(int sock, int fds[2]) {
    unsigned char body[16];
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(2 * sizeof(int))];
    } control;
    struct iovec iov = { body, sizeof body };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf };
    if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 16) return -1;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    if (!cm || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(2 * sizeof(int))) return -1;
    memcpy(fds, CMSG_DATA(cm), 2 * sizeof(int));
    return 0;
}

static int raw_observe(raw_observer *o) {
    cn_channel_peer peer;
    memset(o, 0, sizeof *o);
    o->bell = -1;
    o->listener = sp->listen(token);
    o->poster = o->listener ? ring->connect(token, 0, &peer) : NULL;
    o->conn = o->poster && readable(o->listener->fd, 2000) ? sp->accept(o->listener, &peer) : NULL;
    int fds[2];
    if (!o->conn || !readable(o->conn->fd, 2000) || take_fds(o->conn->fd, fds) != 0) return -1;
    o->map = mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    close(fds[0]);
    o->bell = fds[1];
    return o->map == MAP_FAILED ? -1 : 0;
}

static void raw_close(raw_observer *o) {
    if (o->map && o->map != MAP_FAILED) munmap(o->map, BYTES);
    if (o->bell >= 0) close(o->bell);
    if (o->conn) sp->close(o->conn);
    if (o->poster) ring->close(o->poster);
    if (o->listener) sp->close(o->listener);
}

/* The count of an eventfd, as the kernel shows it (never read: that would take others' edges). */
static long bell_count(int fd) {
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    FILE *f = fopen(path, "r");
    long count = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "eventfd-count:", 14) == 0) count = strtol(line + 14, NULL, 16);
    if (f) fclose(f);
    return count;
}

#endif
