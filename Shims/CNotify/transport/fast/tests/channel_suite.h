/*
 * channel_suite.h: how the generic suite (test_channels.c) uses a channel, as the control plane
 * does: the channel under test, a connection's bell polled once a read set it, a listener with a
 * connection and its accepted end, and frames numbered so a read can be checked against them.
 * Included by that one test only.
 */
#ifndef CN_TEST_CHANNEL_SUITE_H
#define CN_TEST_CHANNEL_SUITE_H
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <unistd.h>
#include "../channel.h"
#include "../../../base/tests/check.h"

static const cn_channel_ops *ch; /* the channel under test */
static unsigned flags;           /* its connections' (CN_CHANNEL_FRAMES_ONLY: the frames alone) */

static void new_token(char out[33]) {
    unsigned char raw[16];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) abort();
    for (int i = 0; i < 16; i++) sprintf(out + 2 * i, "%02x", raw[i]);
}

/* What the suite keeps of a connection with a bell (channel.h): an epoll set holding the bell
 * edge-triggered and the connection's fd for hang-ups, and whether its last read was full (then
 * more may wait, and no edge will say so). */
typedef struct watched {
    cn_channel *c;
    int ep, more;
} watched;
static watched watching[16] = { [0 ... 15] = { NULL, -1, 0 } };

static watched *watched_of(cn_channel *c) {
    for (int i = 0; i < 16; i++)
        if (watching[i].c == c) return &watching[i];
    return NULL;
}

/* Before `c` is closed: its epoll set closed, its entry free. */
static void forget(cn_channel *c) {
    watched *w = c ? watched_of(c) : NULL;
    if (!w) return;
    if (w->ep >= 0) close(w->ep);
    *w = (watched){ NULL, -1, 0 };
}

/* A read, as the control plane reads: a bell set by it is polled from then on. */
static void read_frames(cn_channel *c, unsigned max, cn_channel_frames *out) {
    ch->read(c, max, out);
    watched *w = watched_of(c);
    if (out->rewatch) {
        CHECK(c->bell >= 0 && !w, "%s: a read said to watch a bell it did not set (%d)", ch->name, c->bell);
        w = watched_of(NULL);
        if (!w) abort();
        w->c = c;
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event bell = { .events = EPOLLIN | EPOLLET }, hup = { .events = 0 };
        CHECK(epoll_ctl(w->ep, EPOLL_CTL_ADD, c->bell, &bell) == 0 && epoll_ctl(w->ep, EPOLL_CTL_ADD, c->fd, &hup) == 0,
              "%s: the bell or the connection could not be polled: %s", ch->name, strerror(errno));
    }
    if (w) w->more = out->count == max && max > 0;
}

/* Whether `c` has something to read within `ms`: polled readable, or its bell rung since. */
static int readable(cn_channel *c, int ms) {
    watched *w = watched_of(c);
    if (w) {
        struct epoll_event ev;
        return w->more || epoll_wait(w->ep, &ev, 1, ms) == 1;
    }
    struct pollfd p = { .fd = c->fd, .events = POLLIN };
    return poll(&p, 1, ms) == 1;
}

/* A listener, a connection to it and its accepted end. */
typedef struct pair {
    char token[33];
    cn_channel *listener, *poster, *observer;
    cn_channel_peer at_poster, at_observer;
} pair;

static int open_pair(pair *p) {
    new_token(p->token);
    p->listener = ch->listen(p->token);
    p->poster = p->listener ? ch->connect(p->token, flags, &p->at_poster) : NULL;
    p->observer = p->poster && readable(p->listener, 2000) ? ch->accept(p->listener, &p->at_observer) : NULL;
    return p->observer ? 0 : -1;
}

static void close_pair(pair *p) {
    forget(p->observer);
    if (p->observer) ch->close(p->observer);
    if (p->poster) ch->close(p->poster);
    if (p->listener) ch->close(p->listener);
}

static size_t frame_of(unsigned i, unsigned char *out) {
    size_t len = (i * 37u) % CN_FAST_FRAME_MAX + 1;
    for (size_t k = 0; k < len; k++) out[k] = (unsigned char)(i + k);
    return len;
}

/* Reads until `want` frames came (reads of 1, 7, then 32 at most), checking each against frame_of. */
static unsigned read_checked(cn_channel *c, unsigned first, unsigned want) {
    static cn_channel_frames got;
    static const unsigned sizes[] = { 1, 7, CN_CHANNEL_BATCH };
    unsigned seen = 0, turn = 0;
    unsigned char expect[CN_FAST_FRAME_MAX];
    while (seen < want && readable(c, 2000)) {
        read_frames(c, sizes[turn++ % 3], &got);
        /* A ring's first read may be its setup alone, the frames not written yet: its bell says. */
        if (got.count == 0 && !got.rewatch) break;
        for (unsigned i = 0; i < got.count; i++, seen++) {
            size_t len = frame_of(first + seen, expect);
            if (got.len[i] != len || memcmp(got.data[i], expect, len) != 0) return seen;
        }
    }
    return seen;
}

#endif
