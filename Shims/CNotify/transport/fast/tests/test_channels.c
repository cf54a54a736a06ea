/*
 * test_channels.c: the generic suite every fast-path channel passes (channel.h), run on each entry
 * of the table of channels (channels.c), as iceoryx2 runs one suite on every implementation of its
 * event contract. What the control plane relies on: a listener's address is one listener's; a
 * connection gives the kernel's word on the other end; frames keep their bounds and their order;
 * a stranger's oversized frame is never cut to look whole; a full connection refuses a frame
 * without blocking, says it is pressed before that, and its room can be awaited with a bound; a
 * hang-up is reported after every frame sent before it; a connection gone is an error to its sender.
 * Reads into different buffers, in turn, on one connection each fill the buffer they were given.
 * A peer's groups are the kernel's: its gid, then its supplementary groups, as many as are kept,
 * and said to be cut when there are more.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../channel.h"
#include "../../../base/tests/check.h"
#include "channel_suite.h"

static void addresses(void) {
    char token[33];
    new_token(token);
    cn_channel *l = ch->listen(token);
    CHECK(l != NULL, "%s: listen failed: %s", ch->name, strerror(errno));
    if (!l) return;
    errno = 0;
    cn_channel *again = ch->listen(token);
    CHECK(again == NULL && errno == EADDRINUSE, "%s: a second listener at one address (errno %d)", ch->name, errno);
    if (again) ch->close(again);
    cn_channel_peer peer;
    CHECK(ch->accept(l, &peer) == NULL, "%s: accept with none waiting gave a connection", ch->name);
    char other[33];
    new_token(other);
    CHECK(ch->connect(other, flags, &peer) == NULL, "%s: a connection to an address nobody listens at", ch->name);
    CHECK(ch->connect("abc", flags, &peer) == NULL && errno == EINVAL, "%s: a short token named an address", ch->name);
    CHECK(ch->listen("0123456789abcdef0123456789abcdef0") == NULL, "%s: a long token named an address", ch->name);
    char name[128];
    CHECK(ch->address(token, name, sizeof name) == 0 && strstr(name, token) != NULL, "%s: the address does not name its token",
          ch->name);
    CHECK(ch->address(token, name, 8) == -1, "%s: an address was cut to fit", ch->name);
    ch->close(l);
    cn_channel *after = ch->listen(token); /* the address is free again once its listener closed */
    CHECK(after != NULL, "%s: the address stayed taken after its listener closed", ch->name);
    if (after) ch->close(after);
}

static void peers_and_order(void) {
    pair p = { 0 };
    CHECK(open_pair(&p) == 0, "%s: no connection made", ch->name);
    if (p.observer) {
        CHECK(p.at_poster.pid == getpid() && p.at_poster.uid == geteuid() && p.at_poster.gid == getegid(),
              "%s: the listener's credentials are not the kernel's", ch->name);
        CHECK(p.at_observer.pid == getpid() && p.at_observer.uid == geteuid(), "%s: the poster's credentials are wrong", ch->name);
        cn_channel_frames none;
        read_frames(p.observer, CN_CHANNEL_BATCH, &none);
        CHECK(none.count == 0 && none.closed == 0, "%s: a read with nothing sent gave %u frames, closed %d", ch->name,
              none.count, none.closed);
        unsigned char frame[CN_FAST_FRAME_MAX];
        unsigned sent = 0, read = 0;
        for (int round = 0; round < 5; round++) { /* 5 × 100 frames of every length, read 1, 7 and 32 at a time */
            for (int i = 0; i < 100; i++, sent++) CHECK(ch->send(p.poster, frame, frame_of(sent, frame)) == 1, "%s: send %u refused", ch->name, sent);
            ch->ring(p.poster);
            read += read_checked(p.observer, read, 100);
        }
        CHECK(read == sent, "%s: %u of %u frames came back whole and in order", ch->name, read, sent);
    }
    close_pair(&p);
}

/* Reads of one connection into two buffers in turn, and into a third made where the first was:
 * each read fills the buffer it was given (a channel that keeps state between reads keeps it for
 * the buffer it was built for). */
static void buffers_in_turn(void) {
    pair p = { 0 };
    CHECK(open_pair(&p) == 0, "%s: no connection made", ch->name);
    if (p.observer) {
        static cn_channel_frames a, b;
        cn_channel_frames *c = malloc(sizeof *c);
        cn_channel_frames *in_turn[] = { &a, &b, &a, c, &b, c };
        unsigned char frame[CN_FAST_FRAME_MAX], expect[CN_FAST_FRAME_MAX];
        for (unsigned i = 0; i < 6; i++) CHECK(ch->send(p.poster, frame, frame_of(1000 + i, frame)) == 1, "%s: send %u refused", ch->name, i);
        ch->ring(p.poster);
        for (unsigned i = 0; c && i < 6; i++) {
            cn_channel_frames *into = in_turn[i];
            memset(into->data[0], 0, sizeof into->data[0]);
            into->count = 0;
            CHECK(readable(p.observer, 2000), "%s: frame %u never came", ch->name, i);
            read_frames(p.observer, 1, into);
            size_t len = frame_of(1000 + i, expect);
            CHECK(into->count == 1 && into->len[0] == len && memcmp(into->data[0], expect, len) == 0,
                  "%s: read %u did not fill the buffer it was given (count %u)", ch->name, i, into->count);
        }
        free(c);
    }
    close_pair(&p);
}

static void oversized(void) {
    pair p = { 0 };
    CHECK(open_pair(&p) == 0, "%s: no connection made", ch->name);
    if (p.observer) {
        static unsigned char big[65537];
        memset(big, 'x', sizeof big);
        size_t lens[] = { CN_FAST_FRAME_MAX, CN_FAST_FRAME_MAX + 1, CN_FAST_FRAME_MAX + 100, 65536, 3 };
        for (size_t i = 0; i < 5; i++) CHECK(ch->send(p.poster, big, lens[i]) == 1, "%s: a frame of %zu not sent", ch->name, lens[i]);
        CHECK(ch->send(p.poster, big, 0) == -1, "%s: an empty frame (a hang-up on the wire) was sent", ch->name);
        CHECK(ch->send(p.poster, big, 65537) == -1, "%s: a frame over 64 KiB was sent", ch->name);
        ch->ring(p.poster);
        static cn_channel_frames got;
        unsigned seen = 0;
        size_t expect[] = { CN_FAST_FRAME_MAX, CN_FAST_FRAME_MAX + 1, CN_FAST_FRAME_MAX + 1, CN_FAST_FRAME_MAX + 1, 3 };
        while (seen < 5 && readable(p.observer, 2000)) {
            read_frames(p.observer, CN_CHANNEL_BATCH, &got);
            if (!got.count) break;
            for (unsigned i = 0; i < got.count && seen < 5; i++, seen++)
                CHECK(got.len[i] == expect[seen], "%s: frame %u read with length %u, not %zu", ch->name, seen, got.len[i], expect[seen]);
        }
        CHECK(seen == 5 && !got.closed, "%s: %u of 5 frames read (closed %d)", ch->name, seen, got.closed);
    }
    close_pair(&p);
}

static void full(void) {
    pair p = { 0 };
    CHECK(open_pair(&p) == 0, "%s: no connection made", ch->name);
    if (p.observer) {
        unsigned char frame[CN_FAST_FRAME_MAX];
        size_t len = frame_of(0, frame);
        unsigned sent = 0, pressed_at = 0;
        int r = 1;
        while (sent < 100000 && (r = ch->send(p.poster, frame, len)) == 1) {
            sent++;
            if (!pressed_at && ch->pressed(p.poster)) pressed_at = sent;
        }
        ch->ring(p.poster);
        CHECK(r == 0, "%s: a full connection answered %d, not 0 (no room), after %u frames", ch->name, r, sent);
        CHECK(pressed_at > 0 && pressed_at < sent, "%s: pressed only at %u of %u", ch->name, pressed_at, sent);
        cn_channel_waiter one[1];
        ch->waiter(p.poster, &one[0]);
        CHECK(ch->await_room(one, 1, 30) == 0, "%s: room awaited on a full connection nobody reads", ch->name);
        CHECK(ch->consumed(p.poster) == 0, "%s: a connection nobody read said read", ch->name);
        static cn_channel_frames got;
        unsigned drained = 0;
        do { read_frames(p.observer, CN_CHANNEL_BATCH, &got); drained += got.count; } while (got.count);
        CHECK(drained == sent, "%s: %u of %u frames read from a full connection", ch->name, drained, sent);
        CHECK(ch->unread(p.poster) == 0, "%s: frames said unread after every one was read", ch->name);
        /* The ring knows (its tail); a socket cannot tell, and says 0 (a ring's frames alone too). */
        CHECK(ch->consumed(p.poster) == (ch == &cn_channel_ring && !flags), "%s%s: said %d of a connection read to its end", ch->name,
              flags ? " (frames only)" : "", ch->consumed(p.poster));
        CHECK(ch->await_room(one, 1, 2000) == 1, "%s: no room after everything was read", ch->name);
        CHECK(!ch->pressed(p.poster) && ch->send(p.poster, frame, len) == 1, "%s: still full after a drain", ch->name);
        CHECK(ch->unread(p.poster) == 1, "%s: a frame sent and not read is not said unread", ch->name);
        CHECK(ch->await_room(NULL, 0, 0) == 1, "%s: awaiting none did not return at once", ch->name);
    }
    close_pair(&p);
}

static void hang_ups(void) {
    pair p = { 0 };
    CHECK(open_pair(&p) == 0, "%s: no connection made", ch->name);
    if (p.observer) {
        unsigned char frame[CN_FAST_FRAME_MAX];
        for (unsigned i = 0; i < 3; i++) ch->send(p.poster, frame, frame_of(i, frame));
        ch->ring(p.poster);
        ch->close(p.poster);
        p.poster = NULL;
        static cn_channel_frames got;
        unsigned seen = 0;
        int closed = 0;
        while (!closed && readable(p.observer, 2000)) {
            read_frames(p.observer, 2, &got);
            seen += got.count;
            closed = got.closed;
        }
        CHECK(seen == 3 && closed, "%s: %u of 3 frames before the hang-up (closed %d)", ch->name, seen, closed);
        read_frames(p.observer, CN_CHANNEL_BATCH, &got);
        CHECK(got.count == 0 && got.closed, "%s: a read after the hang-up was not closed", ch->name);
    }
    close_pair(&p);
    pair r = { 0 };
    CHECK(open_pair(&r) == 0, "%s: no connection made", ch->name);
    if (r.observer) { /* more frames than a read's first look takes, then the hang-up: one read has them all */
        unsigned char frame[CN_FAST_FRAME_MAX];
        for (unsigned i = 0; i < 6; i++) CHECK(ch->send(r.poster, frame, frame_of(i, frame)) == 1, "%s: send %u refused", ch->name, i);
        ch->ring(r.poster);
        ch->close(r.poster);
        r.poster = NULL;
        static cn_channel_frames got;
        CHECK(readable(r.observer, 2000), "%s: nothing to read after 6 frames and a hang-up", ch->name);
        read_frames(r.observer, CN_CHANNEL_BATCH, &got);
        CHECK(got.count == 6 && got.closed, "%s: one read of 6 frames and a hang-up gave %u frames, closed %d", ch->name,
              got.count, got.closed);
        for (unsigned i = 0; i < got.count; i++)
            CHECK(got.len[i] == frame_of(i, frame), "%s: frame %u read with length %u", ch->name, i, got.len[i]);
    }
    close_pair(&r);
    pair q = { 0 };
    CHECK(open_pair(&q) == 0, "%s: no connection made", ch->name);
    if (q.observer) { /* the reader goes: its poster sees it (readable) and its sends fail */
        forget(q.observer);
        ch->close(q.observer);
        q.observer = NULL;
        CHECK(readable(q.poster, 2000), "%s: the poster's end not readable when the observer left", ch->name);
        unsigned char frame[4] = { 1, 2, 3, 4 };
        CHECK(ch->send(q.poster, frame, 4) == -1, "%s: a send to a connection gone was not an error", ch->name);
    }
    close_pair(&q);
}

/* A poster in another process: the kernel's pid, then its frames, then its exit as a hang-up. */
/* The groups a connection gives are the kernel's: this process's gid and supplementary groups
 * in-process; as root, a child in more groups than are kept gives the first of them, said cut. */
static void groups(void) {
    pair p = { 0 };
    CHECK(open_pair(&p) == 0, "%s: no connection made", ch->name);
    if (p.observer) {
        gid_t mine[CN_CHANNEL_GROUPS];
        int n = getgroups(CN_CHANNEL_GROUPS, mine);
        const cn_channel_groups *g = &p.at_observer.groups;
        CHECK(n >= 0 && g->n == 1u + (unsigned)n && !g->cut && g->gid[0] == getegid() && p.at_poster.groups.gid[0] == getegid(),
              "%s: this process's groups: %u given for %d, cut %d", ch->name, g->n, n, g->cut);
        for (int i = 0; n > 0 && i < n && (unsigned)i + 1 < g->n; i++)
            CHECK(g->gid[i + 1] == mine[i], "%s: group %d is %u, not %u", ch->name, i, (unsigned)g->gid[i + 1], (unsigned)mine[i]);
    }
    close_pair(&p);
    if (geteuid() != 0) return; /* setgroups needs root */
    char token[33];
    new_token(token);
    cn_channel *l = ch->listen(token);
    CHECK(l != NULL, "%s: listen failed", ch->name);
    if (!l) return;
    enum { MANY = CN_CHANNEL_GROUPS + 8 };
    pid_t child = fork();
    if (child == 0) {
        gid_t many[MANY];
        for (int i = 0; i < MANY; i++) many[i] = (gid_t)(5000 + i);
        if (setgroups(MANY, many) != 0) _exit(1);
        cn_channel_peer peer;
        cn_channel *c = ch->connect(token, flags, &peer);
        _exit(c ? 0 : 2); /* the connection is made: the kernel keeps the groups it had then */
    }
    cn_channel_peer peer = { 0 };
    cn_channel *c = readable(l, 5000) ? ch->accept(l, &peer) : NULL;
    CHECK(c && peer.pid == child, "%s: the child's connection", ch->name);
    if (c) {
        int kept = peer.groups.n == CN_CHANNEL_GROUPS && peer.groups.cut;
        for (unsigned i = 1; kept && i < CN_CHANNEL_GROUPS; i++) kept = peer.groups.gid[i] == (gid_t)(5000 + i - 1);
        CHECK(kept, "%s: a child in %d groups: %u kept, cut %d, the first %u", ch->name, (int)MANY, peer.groups.n,
              peer.groups.cut, (unsigned)peer.groups.gid[1]);
    }
    int status = 0;
    waitpid(child, &status, 0); /* before the close: a connect may say something first (the ring's setup) */
    if (c) ch->close(c);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: the child failed (status %d)", ch->name, status);
    ch->close(l);
}

static void other_process(void) {
    char token[33];
    new_token(token);
    cn_channel *l = ch->listen(token);
    CHECK(l != NULL, "%s: listen failed", ch->name);
    if (!l) return;
    pid_t child = fork();
    if (child == 0) {
        cn_channel_peer peer;
        cn_channel *c = ch->connect(token, flags, &peer);
        unsigned char frame[CN_FAST_FRAME_MAX];
        for (unsigned i = 0; c && i < 50; i++)
            if (ch->send(c, frame, frame_of(i, frame)) != 1) _exit(2);
        if (c) ch->ring(c);
        _exit(c && peer.pid == getppid() ? 0 : 1);
    }
    cn_channel_peer peer = { 0 };
    cn_channel *c = readable(l, 5000) ? ch->accept(l, &peer) : NULL;
    CHECK(c && peer.pid == child && peer.uid == geteuid(), "%s: the other process's connection (pid %d, not %d)", ch->name,
          (int)peer.pid, (int)child);
    if (c) {
        CHECK(read_checked(c, 0, 50) == 50, "%s: the other process's 50 frames", ch->name);
        static cn_channel_frames got;
        got.closed = 0;
        while (!got.closed && readable(c, 5000)) read_frames(c, CN_CHANNEL_BATCH, &got);
        CHECK(got.closed, "%s: the other process's exit not read as a hang-up", ch->name);
        forget(c);
        ch->close(c);
    }
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: the other process failed (status %d)", ch->name, status);
    ch->close(l);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    int channels = 0;
    for (const cn_channel_ops *const *c = cn_channels; *c; c++, channels++) {
        ch = *c;
        for (flags = 0; flags <= CN_CHANNEL_FRAMES_ONLY; flags++) {
            addresses();
            peers_and_order();
            buffers_in_turn();
            groups();
            oversized();
            full();
            hang_ups();
            other_process();
            printf("channel %s%s: the generic suite ran\n", ch->name, flags ? " (frames only)" : "");
        }
    }
    CHECK(channels >= 2 && cn_channels[0] == &cn_channel_ring && cn_channels[1] == &cn_channel_seqpacket,
          "the table of channels is not ring, then seqpacket");
    return check_result("test_channels");
}
