/*
 * test_channel_ring.c: what the ring channel (channel_ring.c) owes beyond the generic suite
 * (test_channels.c): every end is the other's stranger. An observer refuses a setup that is not
 * a sealed memfd of the ring's size it can map and an eventfd, keeping none of the descriptors it
 * was sent; it refuses a ring whose head or records lie, and reads no byte outside it. A poster
 * refuses a tail its reader spoiled. One ring wakes every reader of a user once: the bell is
 * shared, and written once for the sends to all of them. A poster awaiting room is woken by the
 * read that makes it, not by its time limit.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include "../channel.h"
#include "../../../base/tests/check.h"
#include "ring_stranger.h"

/* A stranger's setup: a raw connection to a ring listener sends `fds` as the ring and the bell;
 * the observer's first read. Returns whether it refused (closed, no bell). */
typedef struct stranger {
    const char *what;
    const char *magic;
    uint32_t version, size;
    size_t len;
    int fds[4], nfds;
} stranger;

/* One stranger: connect raw, send, accept, read; the descriptors counted before and after. */
static void one_stranger(cn_channel *listener, stranger s, int expect_refused) {
    int before = open_fds() - s.nfds; /* the crafted ones are closed here */
    cn_channel_peer peer;
    cn_channel *raw = sp->connect(token, 0, &peer);
    CHECK(raw != NULL, "%s: no raw connection", s.what);
    if (!raw) return;
    CHECK(send_setup(raw->fd, s.magic, s.version, s.size, s.len, s.fds, s.nfds) == 0, "%s: not sent: %s", s.what, strerror(errno));
    for (int i = 0; i < s.nfds; i++) close(s.fds[i]); /* the observer's copies are its own */
    cn_channel *obs = readable(listener->fd, 2000) ? ring->accept(listener, &peer) : NULL;
    CHECK(obs != NULL, "%s: not accepted", s.what);
    if (obs) {
        static cn_channel_frames got;
        CHECK(readable(obs->fd, 2000), "%s: the setup never came", s.what);
        ring->read(obs, CN_CHANNEL_BATCH, &got);
        if (expect_refused)
            CHECK(got.closed && got.count == 0 && obs->bell < 0 && !got.rewatch, "%s: taken (closed %d, count %u, bell %d)", s.what,
                  got.closed, got.count, obs->bell);
        else
            CHECK(!got.closed && obs->bell >= 0 && got.rewatch, "%s: a good setup refused (closed %d, bell %d)", s.what, got.closed,
                  obs->bell);
        ring->read(obs, CN_CHANNEL_BATCH, &got);
        if (expect_refused) CHECK(got.closed, "%s: a read after a refusal was not closed", s.what);
        ring->close(obs);
    }
    sp->close(raw);
    int after = open_fds();
    CHECK(after == before, "%s: %d descriptors before, %d after", s.what, before, after);
}

static void setups(void) {
    cn_channel *listener = ring->listen(token);
    CHECK(listener != NULL, "listen: %s", strerror(errno));
    if (!listener) return;
    const int good = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
    const char *magic = "dn-ring";
    char wrong[8] = "dn-rinG";
    /* A good one first: the crafted setup is the poster's. */
    one_stranger(listener, (stranger){ "good", magic, 1, DATA, 16, { memfd_of(BYTES, good), eventfd(0, EFD_CLOEXEC) }, 2 }, 0);
    one_stranger(listener, (stranger){ "unsealed", magic, 1, DATA, 16, { memfd_of(BYTES, 0), eventfd(0, EFD_CLOEXEC) }, 2 }, 1);
    one_stranger(listener, (stranger){ "shrinkable", magic, 1, DATA, 16, { memfd_of(BYTES, F_SEAL_GROW), eventfd(0, EFD_CLOEXEC) }, 2 }, 1);
    one_stranger(listener, (stranger){ "small", magic, 1, DATA, 16, { memfd_of(BYTES - 4096, good), eventfd(0, EFD_CLOEXEC) }, 2 }, 1);
    one_stranger(listener, (stranger){ "large", magic, 1, DATA, 16, { memfd_of(BYTES + 4096, good), eventfd(0, EFD_CLOEXEC) }, 2 }, 1);
    one_stranger(listener,
                 (stranger){ "write-sealed", magic, 1, DATA, 16, { memfd_of(BYTES, good | F_SEAL_WRITE), eventfd(0, EFD_CLOEXEC) }, 2 }, 1);
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) abort();
    one_stranger(listener, (stranger){ "a pipe for a bell", magic, 1, DATA, 16, { memfd_of(BYTES, good), p[0], p[1] }, 2 }, 1);
    close(p[1]);
    one_stranger(listener,
                 (stranger){ "a timer for a bell", magic, 1, DATA, 16, { memfd_of(BYTES, good), timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC) }, 2 }, 1);
    one_stranger(listener, (stranger){ "a ring for a bell", magic, 1, DATA, 16, { memfd_of(BYTES, good), memfd_of(BYTES, good) }, 2 }, 1);
    int m = memfd_of(BYTES, good);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", m);
    int readonly = open(path, O_RDONLY | O_CLOEXEC);
    close(m);
    one_stranger(listener, (stranger){ "read-only", magic, 1, DATA, 16, { readonly, eventfd(0, EFD_CLOEXEC) }, 2 }, 1);
    one_stranger(listener, (stranger){ "one descriptor", magic, 1, DATA, 16, { memfd_of(BYTES, good) }, 1 }, 1);
    one_stranger(listener,
                 (stranger){ "three descriptors", magic, 1, DATA, 16, { memfd_of(BYTES, good), eventfd(0, EFD_CLOEXEC), eventfd(0, EFD_CLOEXEC) }, 3 }, 1);
    one_stranger(listener, (stranger){ "wrong magic", wrong, 1, DATA, 16, { memfd_of(BYTES, good), eventfd(0, EFD_CLOEXEC) }, 2 }, 1);
    one_stranger(listener, (stranger){ "version 2", magic, 2, DATA, 16, { memfd_of(BYTES, good), eventfd(0, EFD_CLOEXEC) }, 2 }, 1);
    one_stranger(listener, (stranger){ "another size", magic, 1, DATA * 2, 16, { memfd_of(BYTES, good), eventfd(0, EFD_CLOEXEC) }, 2 }, 1);
    one_stranger(listener, (stranger){ "15 bytes", magic, 1, DATA, 15, { memfd_of(BYTES, good), eventfd(0, EFD_CLOEXEC) }, 2 }, 1);
    one_stranger(listener, (stranger){ "17 bytes", magic, 1, DATA, 17, { memfd_of(BYTES, good), eventfd(0, EFD_CLOEXEC) }, 2 }, 1);
    ring->close(listener);
}

/* Each lie of a ring's poster ends the connection, after the frames before it. */
static void lies(void) {
    cn_channel *listener = ring->listen(token);
    CHECK(listener != NULL, "listen: %s", strerror(errno));
    if (!listener) return;
    static cn_channel_frames got;
    struct {
        const char *what;
        uint32_t len;   /* the record's length field */
        size_t written; /* bytes of it after the field */
        uint64_t head;  /* the head published */
    } cases[] = {
        { "more than a ring ahead", 5, 5, DATA + 1 },
        { "a record of length 0", 0, 0, 4 },
        { "a length past the head", 100, 50, 54 },
        { "a record cut short (2 bytes)", 5, 0, 2 },
        { "a length over 64 KiB", 70000, 600, 604 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        crafted c;
        CHECK(craft(listener, &c) == 0, "%s: no crafted ring", cases[k].what);
        if (c.obs) {
            ring->read(c.obs, CN_CHANNEL_BATCH, &got); /* the setup */
            CHECK(!got.closed && got.rewatch, "%s: the good setup refused", cases[k].what);
            unsigned char bytes[600];
            memset(bytes, 'x', sizeof bytes);
            put_record(c.map, 0, 5, "hello", 5); /* one good frame first */
            put_record(c.map, 9, cases[k].len, bytes, cases[k].written);
            put64(c.map, HEAD_AT, cases[k].head + (cases[k].head > DATA ? 0 : 9));
            ring->read(c.obs, CN_CHANNEL_BATCH, &got);
            if (cases[k].head > DATA)
                CHECK(got.closed && got.count == 0, "%s: read %u frames, closed %d", cases[k].what, got.count, got.closed);
            else
                CHECK(got.closed && got.count == 1 && got.len[0] == 5 && memcmp(got.data[0], "hello", 5) == 0,
                      "%s: read %u frames, closed %d", cases[k].what, got.count, got.closed);
            ring->read(c.obs, CN_CHANNEL_BATCH, &got);
            CHECK(got.closed && got.count == 0, "%s: a read after it was not closed", cases[k].what);
        }
        uncraft(&c);
    }
    /* A head moved back: refused too. */
    crafted c;
    CHECK(craft(listener, &c) == 0, "no crafted ring");
    if (c.obs) {
        ring->read(c.obs, CN_CHANNEL_BATCH, &got);
        put_record(c.map, 0, 5, "hello", 5);
        put64(c.map, HEAD_AT, 9);
        ring->read(c.obs, CN_CHANNEL_BATCH, &got);
        CHECK(got.count == 1 && !got.closed, "a good frame: %u, closed %d", got.count, got.closed);
        put64(c.map, HEAD_AT, 4);
        ring->read(c.obs, CN_CHANNEL_BATCH, &got);
        CHECK(got.closed, "a head moved back was not refused");
        /* A frame longer than CN_FAST_FRAME_MAX is read as its first bytes and a length past it. */
    }
    uncraft(&c);
    ring->close(listener);
}

static void spoiled_tail(void) {
    raw_observer o;
    CHECK(raw_observe(&o) == 0, "no raw observer");
    if (o.map && o.map != MAP_FAILED) {
        unsigned char frame[8] = "abcdefg";
        CHECK(ring->send(o.poster, frame, 7) == 1 && ring->unread(o.poster) == 1, "a first frame");
        put64(o.map, TAIL_AT, 1000); /* past the head */
        CHECK(ring->send(o.poster, frame, 7) == -1, "a tail past the head was taken");
        CHECK(ring->unread(o.poster) == -1 && ring->pressed(o.poster), "a spoiled tail is neither known nor roomy");
        put64(o.map, TAIL_AT, 11); /* read all */
        CHECK(ring->send(o.poster, frame, 7) == 1 && ring->unread(o.poster) == 1, "the tail mended");
    }
    raw_close(&o);
}

/* One ring for two readers of one user: the bell written once, both woken. */
static void one_bell(void) {
    raw_observer a, b;
    CHECK(raw_observe(&a) == 0, "no first raw observer");
    new_token(token);
    CHECK(raw_observe(&b) == 0, "no second raw observer");
    if (a.bell >= 0 && b.bell >= 0) {
        long start = bell_count(a.bell);
        CHECK(start >= 0 && bell_count(b.bell) == start, "two bells for one user (%ld, %ld)", start, bell_count(b.bell));
        int ep[2];
        for (int i = 0; i < 2; i++) {
            ep[i] = epoll_create1(EPOLL_CLOEXEC);
            struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
            epoll_ctl(ep[i], EPOLL_CTL_ADD, i ? b.bell : a.bell, &ev);
        }
        struct epoll_event ev;
        for (int i = 0; i < 2; i++) epoll_wait(ep[i], &ev, 1, 0); /* the edge every add gives, when it counts already */
        unsigned char frame[4] = "post";
        CHECK(ring->send(a.poster, frame, 4) == 1 && ring->send(b.poster, frame, 4) == 1, "two sends");
        CHECK(epoll_wait(ep[0], &ev, 1, 0) == 0, "a send rang before its ring");
        ring->ring(a.poster);
        ring->ring(b.poster);
        CHECK(bell_count(a.bell) == start + 1, "one ring for two sends wrote the bell %ld times", bell_count(a.bell) - start);
        CHECK(epoll_wait(ep[0], &ev, 1, 2000) == 1 && epoll_wait(ep[1], &ev, 1, 2000) == 1, "a reader not woken by the shared ring");
        ring->ring(a.poster);
        CHECK(bell_count(a.bell) == start + 1, "a ring with nothing sent wrote the bell");
        /* Someone who holds the bell fills its count: the poster empties it and rings all the same. */
        uint64_t most = 0xfffffffffffffffeULL - (uint64_t)bell_count(a.bell);
        CHECK(write(a.bell, &most, sizeof most) == sizeof most, "the bell not filled");
        CHECK(ring->send(a.poster, frame, 4) == 1, "a send after the bell filled");
        ring->ring(a.poster);
        CHECK(epoll_wait(ep[1], &ev, 1, 2000) == 1, "a full bell woke nobody");
        CHECK(bell_count(a.bell) == 1, "a full bell not emptied and rung (count %ld)", bell_count(a.bell));
        close(ep[0]);
        close(ep[1]);
    }
    raw_close(&a);
    raw_close(&b);
}

/* A poster awaiting room is woken by the read that makes it. */
typedef struct drain {
    cn_channel *obs;
    atomic_int waiting;
} drain;

static void *drainer(void *arg) {
    drain *d = arg;
    while (!atomic_load(&d->waiting)) sched_yield(); /* the poster is about to wait */
    static cn_channel_frames got;
    do ring->read(d->obs, CN_CHANNEL_BATCH, &got);
    while (got.count);
    return NULL;
}

static void awaited(void) {
    cn_channel *listener = ring->listen(token);
    cn_channel_peer peer;
    cn_channel *poster = listener ? ring->connect(token, 0, &peer) : NULL;
    cn_channel *obs = poster && readable(listener->fd, 2000) ? ring->accept(listener, &peer) : NULL;
    CHECK(obs != NULL, "no ring connection");
    if (obs) {
        static cn_channel_frames got;
        ring->read(obs, CN_CHANNEL_BATCH, &got); /* the setup */
        unsigned char frame[100] = { 1 };
        while (ring->send(poster, frame, sizeof frame) == 1) {}
        cn_channel_waiter w;
        ring->waiter(poster, &w);
        drain d = { obs, 0 };
        pthread_t t;
        pthread_create(&t, NULL, drainer, &d);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        atomic_store(&d.waiting, 1);
        int room = ring->await_room(&w, 1, 20000);
        clock_gettime(CLOCK_MONOTONIC, &b);
        pthread_join(t, NULL);
        double waited = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
        CHECK(room == 1 && waited < 10, "await_room gave %d after %.3f s of its 20 s", room, waited);
        ring->close(obs);
        CHECK(ring->send(poster, frame, sizeof frame) == -1, "a send after the reader closed");
        ring->waiter(poster, &w);
        ring->close(poster);
        CHECK(ring->await_room(&w, 1, 20000) == 1, "awaiting a ring closed meanwhile did not return at once");
        poster = NULL;
    }
    if (poster) ring->close(poster);
    if (listener) ring->close(listener);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    new_token(token);
    setups();
    new_token(token);
    lies();
    new_token(token);
    spoiled_tail();
    new_token(token);
    one_bell();
    new_token(token);
    awaited();
    return check_result("test_channel_ring");
}
