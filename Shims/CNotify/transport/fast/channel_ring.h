/*
 * transport/fast/channel_ring.h: the ring channel's own header, for its two files alone (as
 * libdbus's dbus-transport-protected.h is for its transports): the layout of a ring
 * (docs/PROTOCOL.md "The ring"), a connection's record, and what channel_ring_setup.c gives
 * channel_ring.c. Nothing else includes it.
 */
#ifndef CNOTIFY_CHANNEL_RING_H
#define CNOTIFY_CHANNEL_RING_H

#include <stdatomic.h>
#include <fcntl.h>
#include "channel.h"

#define RING_HEADER 4096u
#define RING_DATA 32768u                 /* a power of two: positions are taken modulo it */
#define RING_BYTES (RING_HEADER + RING_DATA)
#define RING_VERSION 1u
#define FRAME_LIMIT 65536                /* what send takes (channel.h) */
#define SOCKET_EVERY 64                  /* a poster looks whether its reader hung up every this many sends, and first */
#define RING_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

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

/* ---- channel_ring_setup.c (rings_lock inside) ---- */
/* The bell of `uid` at the other end, made on its first use (NULL: none could be made); dropped
 * once per take. */
bell *cn_ring_bell_take(uid_t uid);
void cn_ring_bell_drop(bell *b);
/* A poster's mapping held for a waiter, by its number (NULL: gone); dropped once per hold. */
mapping *cn_ring_hold(uint64_t id);
void cn_ring_mapping_drop(mapping *m);
/* A record's length field, and how many of a frame of `len` bytes it stores. */
size_t cn_ring_record_head(size_t len, unsigned char out[4]);
/* The poster's side of a new connection: the ring made, sealed and mapped, the bell of `uid`
 * taken, the setup sent on the socket. 0, or -1 and errno (what was taken stays in `r`, for
 * its close). */
int cn_ring_make(ring *r, uid_t uid);
/* The reader's side: the connection's first message, when it came (ring.state then SETUP_RING,
 * out->rewatch set; SETUP_PLAIN; or SETUP_BROKEN). */
void cn_ring_take_setup(ring *r, cn_channel_frames *out);

#endif
