/*
 * transport/fast/channel.h: the contract of a fast-path channel (docs/DESIGN.md "Fast path: a
 * control plane over channels"). A channel carries the fast path's frames between a poster and an
 * observer on this host, and says who the kernel gives as the process at the other end. It keeps
 * each frame's bounds and the order of the frames of one connection; it knows nothing of what a
 * frame means, of the bus, of proofs, barriers or duplicates: that is the control plane (the
 * fast_*.c files). Every call is non-blocking but await_room, which waits at most the time given.
 *
 * One table of channels (channels.c), the first of which the fast path uses; one generic test
 * suite that every channel of the table passes (tests/test_channels.c). The seqpacket socket
 * (channel_seqpacket.c) is the first channel; the ring (channel_ring.c) the second: a seqpacket
 * connection whose frames go through memory shared by its two ends, and whose reader is woken by
 * a bell that one ring wakes every reader of a user with. A channel's files call only base/, the
 * system and a channel they are built on (the ring on the seqpacket socket, through its table of
 * operations): they are the fast path's floor.
 */
#ifndef CNOTIFY_CHANNEL_H
#define CNOTIFY_CHANNEL_H

#include <stdint.h>
#include <sys/types.h>
#include "../../base/base.h"

/* The longest frame a channel carries (a POST of the longest name: docs/PROTOCOL.md "Fast path"). */
#define CN_FAST_FRAME_MAX (24 + CNOTIFY_NAME_MAX)

/* A connection (or a listener) of some channel: each channel's own record begins with this. */
typedef struct cn_channel {
    int fd;   /* what the control plane polls: readable when a frame, a connection or a hang-up waits */
    /* -1, or a descriptor the reader polls for input edge-triggered (EPOLLET) and never reads or
     * writes: each edge says frames were sent (a reader reads until a read gives fewer than it
     * asked for, then waits for the next edge). While it is set, `fd` is polled for hang-ups
     * only. A read sets it (cn_channel_frames.rewatch), never anything else. */
    int bell;
} cn_channel;

/* The groups of the process at the other end, as the kernel gave them when the connection was
 * made: its gid first, then its supplementary groups (SO_PEERGROUPS), at most CN_CHANNEL_GROUPS
 * in all. `cut`: it is in more than are kept, or the kernel did not say which (judged by those
 * kept, it may be refused what one of the others would allow; never allowed more). */
enum { CN_CHANNEL_GROUPS = 32 };
typedef struct cn_channel_groups {
    unsigned n;
    int cut;
    gid_t gid[CN_CHANNEL_GROUPS];
} cn_channel_groups;

/* Who the kernel says is at the other end, as it was when the connection was made. */
typedef struct cn_channel_peer {
    pid_t pid;
    uid_t uid;
    gid_t gid;
    cn_channel_groups groups; /* gid first */
} cn_channel_peer;

/* Frames read in one call, in order. A frame longer than CN_FAST_FRAME_MAX (no sender of ours
 * writes one: another's) has len CN_FAST_FRAME_MAX + 1 and its first bytes only: never cut to look
 * whole. Each frame has one byte of room after it (a parser ends text there). */
enum { CN_CHANNEL_BATCH = 32 };
typedef struct cn_channel_frames {
    unsigned count;
    int closed;                         /* after these, the other end hung up (or the connection failed) */
    int rewatch;                        /* this read set the connection's bell: poll it from now on */
    uint16_t len[CN_CHANNEL_BATCH];
    unsigned char data[CN_CHANNEL_BATCH][CN_FAST_FRAME_MAX + 2];
} cn_channel_frames;

enum { CN_CHANNEL_FRAMES_ONLY = 1 };

/* What a waiter for room keeps of a connection (channel.h's waiter): for a socket, its number;
 * for a ring, its number among the rings alive (never reused). */
typedef struct cn_channel_waiter {
    int fd;
    uint64_t id;
} cn_channel_waiter;

typedef struct cn_channel_ops {
    const char *name;
    /* 1: its listener reads rings besides frames (docs/PROTOCOL.md "The ring"), which an endpoint
     * on it announces (the Endpoint's features). */
    int reads_rings;
    /* The printable name of the address `token` names (for tools; docs/PROTOCOL.md), into `out`
     * of `len` bytes: 0, or -1 when it does not fit. */
    int (*address)(const char *token, char *out, size_t len);
    /* The observer's side. Listens at the address `token` names (32 lowercase hex digits); NULL
     * and errno when it cannot (EADDRINUSE: someone listens there). */
    cn_channel *(*listen)(const char *token);
    /* A connection waiting on `listener`, and who made it; NULL when none waits (or it failed). */
    cn_channel *(*accept)(cn_channel *listener, cn_channel_peer *peer);
    /* The poster's side: a connection to whoever listens at `token`, and who that is; NULL and errno.
     * CN_CHANNEL_FRAMES_ONLY: the listener reads the seqpacket channel's frames alone (it did not
     * announce that it reads more: docs/PROTOCOL.md "Signals"); a channel then sends only those. */
    cn_channel *(*connect)(const char *token, unsigned flags, cn_channel_peer *peer);
    /* One frame (any length up to 64 KiB, so that a test can write what a stranger would): 1 sent,
     * 0 no room for it now (nothing sent), -1 the connection is gone. The reader may not be woken
     * for it before `ring`. */
    int (*send)(cn_channel *c, const unsigned char *frame, size_t len);
    /* Wakes the reader of `c` for every frame sent on it so far (after a post's sends: one ring
     * wakes all the connections that share a bell). Never blocks. A channel whose send wakes
     * its reader does nothing here. */
    void (*ring)(cn_channel *c);
    /* Up to `max` (at most CN_CHANNEL_BATCH) frames: count 0 with closed 0 when none waits. Once
     * closed is reported, the connection has nothing more to read. */
    void (*read)(cn_channel *c, unsigned max, cn_channel_frames *out);
    /* 1 when what was sent and not read yet fills more than half of what the connection holds. */
    int (*pressed)(cn_channel *c);
    /* 0 when the other end has read every frame sent on `c`; 1 when some wait unread; -1 unknown. */
    int (*unread)(cn_channel *c);
    /* 1 when the other end has read at least one frame sent on `c` (a poster's HELLO: the reader is
     * there and reads its connections); 0 when not, or when the channel cannot tell. */
    int (*consumed)(cn_channel *c);
    /* What await_room waits on for connection `c`, copied out (under the caller's lock): it stays
     * safe to wait on with no lock held, after the connection was closed too. */
    void (*waiter)(cn_channel *c, cn_channel_waiter *out);
    /* Waits, at most timeout_ms, until each of the `n` connections has room again (a quarter full
     * or less) or is gone: 1, else 0 at the time limit. One closed meanwhile may end it early. */
    int (*await_room)(const cn_channel_waiter *w, size_t n, int timeout_ms);
    /* Closes a connection or a listener and frees it (the other end reads what was sent, then
     * closed). */
    void (*close)(cn_channel *c);
} cn_channel_ops;

/* The table of channels, NULL-terminated: the fast path uses the first. */
extern const cn_channel_ops *const cn_channels[];
extern const cn_channel_ops cn_channel_seqpacket;
extern const cn_channel_ops cn_channel_ring;

#endif
