/*
 * test_fast_files.c: the fast path's poll set (fast_files.c): files in the epoll set and files
 * polled by the loop itself (direct). Over socketpairs and a fake channel whose close closes the
 * descriptor: a direct file's ready comes from the loop's poll, never also from the epoll set; only
 * a file watched for EPOLLIN alone goes direct, at most CN_FAST_DIRECT_MAX; a file that left the
 * direct ones since the prepare (closed, rewatched) is never called from that prepare's poll set,
 * and the handle says the round changed; a callback that closes its own file stops the rest of the
 * direct ones until the next prepare, which finds them still ready.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include "../fast.h"
#include "../../../base/tests/check.h"

static void fake_close(cn_channel *c) {
    close(c->fd);
    free(c);
}
static cn_channel_ops fake_channel = { .name = "fake", .close = fake_close };

typedef struct record {
    cn_fast_file io; /* first, as every polled record */
    int other_end;   /* the socketpair's end the test writes */
    int calls;
    uint32_t last_events;
    int close_on_ready;
} record;

static int record_ready(cn_fast *f, cn_fast_file *file, uint32_t events) {
    record *r = (record *)file;
    r->calls++;
    r->last_events = events;
    char buf[64];
    while (recv(file->ch->fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {}
    if (r->close_on_ready) {
        cn_fast_file_close(f, file);
        return 1;
    }
    return 0;
}

static void make(record *r) {
    memset(r, 0, sizeof *r);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) abort();
    cn_channel *ch = malloc(sizeof *ch);
    if (!ch) abort();
    ch->fd = sv[0];
    r->io = (cn_fast_file){ .ch = ch, .ready = record_ready };
    r->other_end = sv[1];
}

static void poke(record *r) {
    if (send(r->other_end, "x", 1, 0) != 1) abort();
}

/* One round as the loop makes it: prepare, poll (no wait), handle. The handle's result. */
static int round_of(cn_fast *f, size_t *polled) {
    struct pollfd fds[1 + CN_FAST_DIRECT_MAX + 4];
    size_t n = cn_fast_files_prepare(f, fds, sizeof fds / sizeof *fds);
    if (polled) *polled = n;
    poll(fds, n, 0);
    return cn_fast_files_handle(f, fds, n);
}

int main(void) {
    static cn_loop loop; /* never started: its set's events are asked for (cn_loop_epoll_events) */
    CHECK(cn_loop_init(&loop, (cn_loop_owner){ 0 }) == 0, "loop");
    cn_fast *f = calloc(1, sizeof *f);
    f->loop = &loop;
    f->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    f->chan = &fake_channel;
    enum { N = CN_FAST_DIRECT_MAX + 2 };
    record r[N];
    for (int i = 0; i < N; i++) {
        make(&r[i]);
        CHECK(cn_fast_watch(f, &r[i].io, EPOLLIN) == 0, "watch %d", i);
    }

    /* Nothing direct yet: the epoll set alone, and its file's ready through it. */
    size_t polled = 0;
    poke(&r[0]);
    CHECK(round_of(f, &polled) == 0 && polled == 1 && r[0].calls == 1, "through the epoll set: %zu polled, %d calls",
          polled, r[0].calls);

    /* Direct: as many as there is room for, each polled by the loop; a file watched for hang-ups only never. */
    cn_fast_rewatch(f, &r[N - 1].io, 0);
    CHECK(cn_fast_direct(f, &r[N - 1].io) == 0, "a file not read went direct");
    for (int i = 0; i < CN_FAST_DIRECT_MAX; i++) CHECK(cn_fast_direct(f, &r[i].io) == 1, "direct %d", i);
    CHECK(cn_fast_direct(f, &r[CN_FAST_DIRECT_MAX].io) == 0, "more direct files than CN_FAST_DIRECT_MAX");
    CHECK(cn_fast_direct(f, &r[0].io) == 0, "a direct file went direct twice");
    poke(&r[1]);
    poke(&r[CN_FAST_DIRECT_MAX]); /* in the epoll set */
    CHECK(round_of(f, &polled) == 0, "data only, a change reported");
    CHECK(polled == 1 + CN_FAST_DIRECT_MAX, "%zu polled, not the epoll descriptor and every direct file", polled);
    CHECK(r[1].calls == 1 && r[1].last_events == EPOLLIN, "the direct file: %d calls, events %x", r[1].calls, r[1].last_events);
    CHECK(r[CN_FAST_DIRECT_MAX].calls == 1, "the epoll set's file: %d calls", r[CN_FAST_DIRECT_MAX].calls);

    /* Read again while direct (a resumed record): it stays direct, no move through the epoll set. */
    cn_fast_rewatch(f, &r[2].io, EPOLLIN);
    CHECK(r[2].io.direct && f->ndirect == CN_FAST_DIRECT_MAX, "a direct file read again left the direct ones");

    /* A direct file is out of the epoll set: its data makes the epoll descriptor no readier. */
    poke(&r[2]);
    struct epoll_event ev;
    CHECK(epoll_wait(f->epoll_fd, &ev, 1, 0) == 0, "a direct file is still in the epoll set");
    round_of(f, NULL);
    CHECK(r[2].calls == 1, "the direct file, once: %d calls", r[2].calls);

    /* Closed between the prepare and the handle (as the bus's handle may, for a poster gone): its
     * slot of that poll set is never called, and the round is a change. */
    struct pollfd fds[1 + CN_FAST_DIRECT_MAX];
    size_t n = cn_fast_files_prepare(f, fds, 1 + CN_FAST_DIRECT_MAX);
    poke(&r[3]);
    poke(&r[4]);
    poll(fds, n, 0);
    cn_fast_file_close(f, &r[3].io);
    int calls4 = r[4].calls;
    CHECK(cn_fast_files_handle(f, fds, n) == 1, "a closed direct file's round is no change");
    CHECK(r[3].calls == 0 && r[4].calls == calls4, "called from a stale poll set: %d, %d", r[3].calls, r[4].calls - calls4);
    round_of(f, &polled); /* the next prepare: the closed one is gone, the other still ready */
    CHECK(polled == CN_FAST_DIRECT_MAX && r[4].calls == calls4 + 1 && r[3].calls == 0,
          "after the close: %zu polled, %d calls of the ready one", polled, r[4].calls - calls4);

    /* A callback that closes its own direct file: the rest wait for the next prepared round. */
    r[5].close_on_ready = 1;
    poke(&r[5]);
    poke(&r[6]);
    int first = round_of(f, NULL);
    int called5 = r[5].calls, called6 = r[6].calls;
    CHECK(first == 1 && called5 == 1, "a close in a callback: %d, %d calls", first, called5);
    round_of(f, NULL);
    CHECK(called6 == 0 && r[6].calls == 1 && r[5].calls == 1, "the one after the close: %d calls then, %d now", called6, r[6].calls);

    /* Not read any more (a SYNC awaits its Sync): back in the epoll set, for hang-ups only; read
     * again: in the epoll set until offered again. */
    cn_fast_rewatch(f, &r[7].io, 0);
    CHECK(!r[7].io.direct, "a file not read stayed direct");
    poke(&r[7]);
    CHECK(round_of(f, NULL) == 0 && r[7].calls == 0, "a file not read was called: %d", r[7].calls);
    f->direct_wanted = 0;
    cn_fast_rewatch(f, &r[7].io, EPOLLIN);
    CHECK(f->direct_wanted, "a file read again is not offered to go direct");
    round_of(f, NULL);
    CHECK(r[7].calls == 1 && !r[7].io.direct, "read again through the epoll set: %d calls", r[7].calls);
    CHECK(cn_fast_direct(f, &r[7].io) == 1, "back to direct once there is room");

    /* The loop waits in this set, a direct file in it as the loop's own entry (loop.c). The file
     * leaves the direct ones (not read: a SYNC awaits its Sync): the loop's entry makes way for
     * this file's own, which the next prepare leaves in place (it takes out only the loop's);
     * read again, the file is read through the set. Before the loop's entry made way, the add
     * was refused, the prepare took the entry out, and the file was never read again. */
    int fd7 = r[7].io.ch->fd;
    loop.set_fd = f->epoll_fd;
    loop.nfds = 2;
    loop.registered[1] = fd7;
    struct epoll_event mirror = { .events = EPOLLIN | EPOLLONESHOT, .data.u64 = CN_LOOP_MIRROR_TAG | 1 };
    CHECK(epoll_ctl(f->epoll_fd, EPOLL_CTL_ADD, fd7, &mirror) == 0, "the loop's entry");
    cn_fast_rewatch(f, &r[7].io, 0);
    if (loop.registered[1] >= 0) epoll_ctl(f->epoll_fd, EPOLL_CTL_DEL, loop.registered[1], NULL); /* the prepare's */
    loop.registered[1] = -1;
    loop.set_fd = -1;
    cn_fast_rewatch(f, &r[7].io, EPOLLIN);
    int calls7 = r[7].calls;
    poke(&r[7]);
    round_of(f, NULL);
    CHECK(r[7].calls == calls7 + 1, "the file left the direct ones under the loop's entry: read %d times", r[7].calls - calls7);

    for (int i = 0; i < N; i++) {
        cn_fast_file_close(f, &r[i].io);
        close(r[i].other_end);
    }
    CHECK(f->ndirect == 0, "%zu direct files after every close", f->ndirect);
    close(f->epoll_fd);
    free(f);
    cn_loop_free(&loop);
    return check_result("test_fast_files");
}
