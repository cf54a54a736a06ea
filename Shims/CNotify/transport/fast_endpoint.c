/*
 * fast_endpoint.c: the observer's connections from posters (docs/PROTOCOL.md "Fast path",
 * "Accepting"). A connection's frames are read only once it has proved who it is: (1) its HELLO
 * names a bus connection, (2) that bus connection sent us, by the bus, the Sync with the HELLO's
 * token (the bus vouches for the sender, and only the poster that wrote the HELLO knows the token),
 * and (3) the bus reports for that connection the process and user the kernel gives for the socket
 * (SO_PEERCRED), asked without waiting (cn_bus_fast_ask_credentials). Until then a connection
 * costs a slot and no bus call: at most CN_FAST_UNVERIFIED_MAX of them, CN_FAST_UNVERIFIED_PER_UID
 * of one uid, each for at most CN_FAST_PROOF_MS. Restricted names are checked against the
 * kernel's uid.
 *
 * Order: every bus post the poster made before a barrier (its HELLO, a SYNC frame) has been handled
 * once that barrier's Sync came by the bus. The Syncs of a poster are kept in the order they came
 * (CN_FAST_SYNCS_KEPT), so a barrier passes whether its Sync came before or after it was read,
 * with later Syncs or not. When the poster leaves the bus every bus message it sent has been
 * handled: its connection is then read to the end, barriers or not, and so is the connection a
 * reconnecting poster leaves for a new one. No frame a poster wrote is dropped unread.
 *
 * Each poster's copies come twice (the bus copy too, unless the poster opted out): per poster,
 * name and origin the highest number delivered is kept, and whichever copy comes second is
 * dropped (cn_endpoint_seen for the bus's). Loop thread only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include "fast.h"

/* P_HELLO: accepted, its HELLO not read. P_PROOF: HELLO read, its Sync awaited. P_CRED: the bus's
 * credentials asked. P_SYNC: verified, a barrier's Sync awaited. P_READY: read. */
enum { P_HELLO, P_PROOF, P_CRED, P_SYNC, P_READY, P_CLOSED };

struct cn_fast_poster {
    cn_fast_fd io;                      /* first: the epoll tag; fd -1 once closed */
    int state;
    int polled;                         /* in the epoll set (out of it after a hang-up while not reading) */
    int departed;                       /* its bus connection left: every barrier has passed */
    pid_t pid;                          /* SO_PEERCRED: the kernel's word */
    uid_t uid;
    uint64_t accepted_at;               /* ms; an unverified connection's clock */
    uint64_t request;                   /* P_CRED: the credentials request */
    char claim[256];                    /* unverified: the unique name its HELLO claims */
    char unique[256];                   /* its bus connection, once verified (or from its Sync) */
    uint64_t origin, token;             /* from HELLO; token: then the barrier awaited (P_SYNC) */
    uint64_t syncs[CN_FAST_SYNCS_KEPT]; /* Sync tokens that came by the bus, oldest first, unmatched */
    unsigned nsyncs;
    cn_map highest;                     /* name -> highest number delivered by either path */
    struct held_frames *held;           /* read with a SYNC before them, waiting for its Sync; NULL: none */
};

/* Frames are read CN_FAST_BATCH at a time (one recvmmsg). A SYNC among them whose Sync has not
 * come by the bus yet stops delivery: the frames after it are held here until it comes. */
enum { CN_FAST_BATCH = 32 };
typedef struct held_frames {
    unsigned count, next;
    uint16_t len[CN_FAST_BATCH];
    unsigned char data[CN_FAST_BATCH][CN_FAST_FRAME_MAX];
} held_frames;
static int deliver_held(cn_fast *f, cn_fast_poster *p);
static void read_poster(cn_fast *f, cn_fast_poster *p, uint32_t events);

void cn_endpoint_init(cn_fast_endpoint *e) {
    memset(e, 0, sizeof *e);
    cn_announce_init(e);
}

static int unverified(const cn_fast_poster *p) { return p->io.fd >= 0 && p->state <= P_CRED; }

static void close_fd(cn_fast *f, cn_fast_poster *p) {
    if (p->io.fd < 0) return;
    if (unverified(p)) f->endpoint.unverified--;
    if (p->polled) epoll_ctl(f->epoll_fd, EPOLL_CTL_DEL, p->io.fd, NULL);
    close(p->io.fd);
    p->io.fd = -1;
    p->polled = 0;
}

static void poster_free(cn_fast *f, cn_fast_poster *p) {
    close_fd(f, p);
    free(p->held);
    cn_map_clear(&p->highest, NULL);
    free(p);
}

static void unlist(cn_fast_endpoint *e, cn_fast_poster *p) {
    for (size_t i = 0; i < e->nposters; i++)
        if (e->posters[i] == p) { e->posters[i] = e->posters[--e->nposters]; return; }
}

static void drop_poster(cn_fast *f, cn_fast_poster *p) {
    cn_fast_endpoint *e = &f->endpoint;
    if (p->unique[0] && cn_map_get(&e->by_sender, p->unique) == p) cn_map_remove(&e->by_sender, p->unique);
    unlist(e, p);
    poster_free(f, p);
}

/* A connection ends (hang-up, a malformed frame, a failed check): the record stays while it is
 * the bus connection's (its bus copies still come, and must be recognised), else it goes. */
static void close_connection(cn_fast *f, cn_fast_poster *p) {
    close_fd(f, p);
    free(p->held); /* only a malformed frame ends a connection with frames held or unread */
    p->held = NULL;
    p->state = P_CLOSED;
    if (!p->unique[0] || cn_map_get(&f->endpoint.by_sender, p->unique) != p) drop_poster(f, p);
}

void cn_endpoint_free(cn_fast *f) {
    cn_fast_endpoint *e = &f->endpoint;
    while (e->nposters) drop_poster(f, e->posters[e->nposters - 1]);
    free(e->posters);
    cn_map_clear(&e->by_sender, NULL);
    cn_announce_free(e);
}

/* ---- barriers: the Sync tokens of a poster ---- */

static void sync_came(cn_fast_poster *r, uint64_t token) {
    for (unsigned i = 0; i < r->nsyncs; i++)
        if (r->syncs[i] == token) return;
    if (r->nsyncs == CN_FAST_SYNCS_KEPT) { /* the oldest goes: a barrier long abandoned */
        memmove(r->syncs, r->syncs + 1, (CN_FAST_SYNCS_KEPT - 1) * sizeof *r->syncs);
        r->nsyncs--;
    }
    r->syncs[r->nsyncs++] = token;
}

static int sync_known(const cn_fast_poster *r, uint64_t token) {
    for (unsigned i = 0; i < r->nsyncs; i++)
        if (r->syncs[i] == token) return 1;
    return 0;
}

/* A barrier with `token` is passed: its Sync and every older one are used up. 1 if it had come. */
static int sync_pass(cn_fast_poster *r, uint64_t token) {
    for (unsigned i = 0; i < r->nsyncs; i++)
        if (r->syncs[i] == token) {
            memmove(r->syncs, r->syncs + i + 1, (r->nsyncs - i - 1) * sizeof *r->syncs);
            r->nsyncs -= i + 1;
            return 1;
        }
    return 0;
}

static void set_reading(cn_fast *f, cn_fast_poster *p, int reading) {
    /* Not reading: frames wait in the socket (the kernel bounds them); hang-ups still come. */
    if (!p->polled) return;
    struct epoll_event ev = { .events = reading ? EPOLLIN : 0, .data.ptr = &p->io };
    epoll_ctl(f->epoll_fd, EPOLL_CTL_MOD, p->io.fd, &ev);
}

/* A connection that may be read again: the held frames, then the socket (to its end once it hung
 * up and left the epoll set, or once its poster left the bus). */
static void resume(cn_fast *f, cn_fast_poster *p) {
    p->state = P_READY;
    set_reading(f, p, 1);
    if (!deliver_held(f, p) || p->io.fd < 0) return;
    if (!p->polled || p->departed) read_poster(f, p, 0);
}

static cn_fast_poster *record_for(cn_fast *f, const char *unique) {
    cn_fast_endpoint *e = &f->endpoint;
    cn_fast_poster *p = cn_map_get(&e->by_sender, unique);
    if (p) return p;
    /* Bounded: a connection's record lives until its bus connection leaves. */
    if (e->by_sender.count >= 2 * CN_FAST_POSTERS_MAX || strlen(unique) >= sizeof p->unique) return NULL;
    p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->io.fd = -1;
    p->io.kind = CN_FAST_FD_POSTER;
    p->state = P_CLOSED;
    snprintf(p->unique, sizeof p->unique, "%s", unique);
    if (e->nposters == e->capposters) {
        size_t cap = e->capposters ? 2 * e->capposters : 16;
        cn_fast_poster **list = realloc(e->posters, cap * sizeof *list);
        if (!list) { free(p); return NULL; }
        e->posters = list;
        e->capposters = cap;
    }
    if (cn_map_put(&e->by_sender, p->unique, p) != 0) { free(p); return NULL; }
    e->posters[e->nposters++] = p;
    return p;
}

/* ---- proving who a connection is ---- */

/* Its HELLO's Sync came from the claimed connection: ask the bus who that is (no waiting). */
static void ask_credentials(cn_fast *f, cn_fast_poster *p) {
    p->request = ++f->endpoint.next_request;
    p->state = P_CRED;
    atomic_fetch_add(&f->credential_asks, 1);
    if (cn_bus_fast_ask_credentials(f->bus_impl, p->claim, p->request) != NOTIFY_STATUS_OK) {
        atomic_fetch_add(&f->refused, 1);
        close_connection(f, p);
    }
}

/* Connection `p` proved to be the poster `r` is the record of: the record takes it over. A
 * connection the record had (the poster connected again) is read to its end first: every Sync it
 * awaits came before this one. */
static void adopt(cn_fast *f, cn_fast_poster *p, cn_fast_poster *r) {
    if (r->io.fd >= 0) {
        int departed = r->departed;
        r->departed = 1;
        resume(f, r);
        r->departed = departed;
        if (r->io.fd >= 0) close_fd(f, r);
    }
    free(r->held);
    r->held = NULL;
    sync_pass(r, p->token);
    f->endpoint.unverified--;
    r->io.fd = p->io.fd;
    r->polled = p->polled;
    r->pid = p->pid;
    r->uid = p->uid;
    r->origin = p->origin;
    r->token = p->token;
    p->io.fd = -1;
    p->polled = 0;
    unlist(&f->endpoint, p);
    poster_free(f, p);
    if (r->polled) {
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &r->io };
        epoll_ctl(f->epoll_fd, EPOLL_CTL_MOD, r->io.fd, &ev);
    }
    resume(f, r);
}

void cn_endpoint_credentials(cn_fast *f, uint64_t request, int ok, pid_t pid, uid_t uid) {
    cn_fast_endpoint *e = &f->endpoint;
    cn_fast_poster *p = NULL;
    for (size_t i = 0; i < e->nposters && !p; i++)
        if (e->posters[i]->state == P_CRED && e->posters[i]->request == request) p = e->posters[i];
    if (!p) return; /* closed meanwhile, or adopted when its poster left */
    cn_fast_poster *r = cn_map_get(&e->by_sender, p->claim);
    if (!ok || pid != p->pid || uid != p->uid || !r || !sync_known(r, p->token)) {
        atomic_fetch_add(&f->refused, 1); /* another process's name: an impostor */
        close_connection(f, p);
        return;
    }
    adopt(f, p, r);
}

/* Reads the one frame of a P_HELLO connection: 1 when it was a HELLO (now P_PROOF), 0 for nothing
 * yet, -1 when the connection was closed. */
static int read_hello(cn_fast *f, cn_fast_poster *p) {
    unsigned char buf[CN_FAST_FRAME_MAX + 1];
    ssize_t n = recv(p->io.fd, buf, CN_FAST_FRAME_MAX, MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    cn_fast_frame fr;
    if (n <= 0 || n > CN_FAST_FRAME_MAX || cn_fast_parse(buf, (size_t)n, &fr) != 0 || fr.type != CN_FAST_HELLO) {
        if (n > 0) atomic_fetch_add(&f->refused, 1);
        close_connection(f, p);
        return -1;
    }
    snprintf(p->claim, sizeof p->claim, "%s", fr.unique_name);
    p->origin = fr.origin;
    p->token = fr.token;
    p->state = P_PROOF;
    set_reading(f, p, 0);
    cn_fast_poster *r = cn_map_get(&f->endpoint.by_sender, p->claim);
    if (r && sync_known(r, p->token)) ask_credentials(f, p); /* its Sync came first */
    return 1;
}

void cn_endpoint_sync(cn_fast *f, const char *sender, uint64_t token) {
    cn_fast_endpoint *e = &f->endpoint;
    cn_fast_poster *r = record_for(f, sender);
    if (!r) return;
    sync_came(r, token);
    if (r->io.fd >= 0 && r->state == P_SYNC && r->token == token) {
        sync_pass(r, token);
        resume(f, r); /* the frames after the SYNC come after what the bus brought before */
    }
    for (size_t i = 0; i < e->nposters; i++) { /* a connection whose HELLO this proves */
        cn_fast_poster *p = e->posters[i];
        if (p->state == P_PROOF && p->io.fd >= 0 && p->token == token && strcmp(p->claim, sender) == 0) {
            ask_credentials(f, p);
            return;
        }
    }
}

/* ---- accepting ---- */

static void accept_posters(cn_fast *f) {
    cn_fast_endpoint *e = &f->endpoint;
    size_t live = 0;
    for (size_t k = 0; k < e->nposters; k++) live += e->posters[k]->io.fd >= 0;
    uid_t own = geteuid();
    size_t other_share = f->fd_cap / CN_FAST_OTHER_UID_SHARE ? f->fd_cap / CN_FAST_OTHER_UID_SHARE : 1;
    for (int i = 0; i < 64; i++) {
        int fd = accept4(e->listen.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        struct ucred cred;
        socklen_t len = sizeof cred;
        cn_fast_poster *p = NULL;
        int room = live < f->fd_cap && e->unverified < CN_FAST_UNVERIFIED_MAX && e->nposters < 4 * CN_FAST_POSTERS_MAX
                   && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0;
        if (room) { /* that uid's share: unverified ones, and all it holds unless it is ours or root's */
            size_t of_uid = 0, unverified_of_uid = 0;
            for (size_t k = 0; k < e->nposters; k++) {
                cn_fast_poster *q = e->posters[k];
                if (q->io.fd < 0 || q->uid != cred.uid) continue;
                of_uid++;
                unverified_of_uid += unverified(q);
            }
            room = unverified_of_uid < CN_FAST_UNVERIFIED_PER_UID
                   && (cred.uid == own || cred.uid == 0 || of_uid < other_share);
        }
        if (room && (p = calloc(1, sizeof *p))) {
            p->io.fd = fd;
            p->io.kind = CN_FAST_FD_POSTER;
            p->state = P_HELLO;
            p->pid = cred.pid;
            p->uid = cred.uid;
            p->accepted_at = cn_now_ms();
            struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &p->io };
            if (e->nposters == e->capposters) {
                size_t cap = e->capposters ? 2 * e->capposters : 16;
                cn_fast_poster **list = realloc(e->posters, cap * sizeof *list);
                if (list) { e->posters = list; e->capposters = cap; }
            }
            if (e->nposters < e->capposters && epoll_ctl(f->epoll_fd, EPOLL_CTL_ADD, fd, &ev) == 0) {
                p->polled = 1;
                e->posters[e->nposters++] = p;
                e->unverified++;
                live++;
                if (!e->next_deadline || p->accepted_at + CN_FAST_PROOF_MS < e->next_deadline)
                    e->next_deadline = p->accepted_at + CN_FAST_PROOF_MS;
                continue;
            }
            free(p);
        }
        atomic_fetch_add(&f->unverified_closed, 1);
        close(fd); /* past a cap: that poster's posts come by the bus */
    }
}

/* Unverified connections past CN_FAST_PROOF_MS are closed; the next deadline into *timeout_ms. */
void cn_endpoint_prepare(cn_fast *f, int *timeout_ms) {
    cn_fast_endpoint *e = &f->endpoint;
    cn_announce_prepare(f, timeout_ms);
    if (!e->unverified || !e->next_deadline) return;
    uint64_t now = cn_now_ms();
    if (now < e->next_deadline) {
        cn_loop_timeout_until(timeout_ms, e->next_deadline, now);
        return;
    }
    e->next_deadline = 0;
    for (size_t i = 0; i < e->nposters;) {
        cn_fast_poster *p = e->posters[i];
        if (unverified(p) && now >= p->accepted_at + CN_FAST_PROOF_MS) {
            atomic_fetch_add(&f->unverified_closed, 1);
            close_connection(f, p); /* unverified: no record of a bus connection, so it goes */
            continue;
        }
        if (unverified(p) && (!e->next_deadline || p->accepted_at + CN_FAST_PROOF_MS < e->next_deadline))
            e->next_deadline = p->accepted_at + CN_FAST_PROOF_MS;
        i++;
    }
    if (e->next_deadline) cn_loop_timeout_until(timeout_ms, e->next_deadline, now);
}

/* ---- frames ---- */

/* 1 if a copy of `name` numbered `seq` or later came from this poster already; changes nothing. */
static int delivered_already(cn_fast_poster *p, const char *name, uint64_t seq) {
    void *highest = cn_map_get(&p->highest, name);
    return highest && (uint64_t)(uintptr_t)highest >= seq;
}

/* The highest number delivered of `name` from this poster: 1 if `seq` is not past it. */
static int seen_before(cn_fast_poster *p, const char *name, uint64_t seq) {
    if (p->highest.count > CN_MAP_BOUND) cn_map_clear(&p->highest, NULL); /* bounded */
    void **slot = cn_map_upsert(&p->highest, name);
    if (!slot) return 0;
    if ((uint64_t)(uintptr_t)*slot >= seq) return 1;
    *slot = (void *)(uintptr_t)seq;
    return 0;
}

static void post_frame(cn_fast *f, cn_fast_poster *p, const cn_fast_frame *fr) {
    uid_t owner;
    int restricted = cn_is_self_name(fr->name) ? -1 : cn_restricted_uid(fr->name, &owner);
    if (restricted < 0 || (restricted > 0 && p->uid != owner && p->uid != 0)) {
        f->up.post_rejected(f->up.ctx); /* the kernel's uid is not N: a forgery */
        return;
    }
    if (seen_before(p, fr->name, fr->seq)) {
        atomic_fetch_add(&f->duplicates, 1);
        return;
    }
    atomic_fetch_add(&f->fast_delivered, 1);
    cn_received_post up = { fr->name, p->unique, p->origin, fr->seq, 1 };
    f->up.post_arrived(f->up.ctx, &up);
}

/* One frame of a connection past its HELLO: 1 to go on, 0 when it closed (fd -1) or waits for the
 * Sync of a SYNC it just read (P_SYNC). */
static int take_frame(cn_fast *f, cn_fast_poster *p, unsigned char *buf, size_t n) {
    cn_fast_frame fr;
    if (n > CN_FAST_FRAME_MAX || cn_fast_parse(buf, n, &fr) != 0) {
        atomic_fetch_add(&f->refused, 1);
        close_connection(f, p);
        return 0;
    }
    if (fr.type == CN_FAST_SYNC) { /* a barrier again: its posts in between went by the bus alone */
        p->token = fr.token;
        if (p->departed || sync_pass(p, fr.token)) return 1;
        p->state = P_SYNC;
        set_reading(f, p, 0);
        return 0;
    }
    if (fr.type != CN_FAST_POST) {
        atomic_fetch_add(&f->refused, 1);
        close_connection(f, p);
        return 0;
    }
    post_frame(f, p, &fr);
    return 1;
}

/* The frames a SYNC held back, once its Sync came: 1 when none is left. */
static int deliver_held(cn_fast *f, cn_fast_poster *p) {
    while (p->held && p->held->next < p->held->count) {
        unsigned k = p->held->next++;
        if (!take_frame(f, p, p->held->data[k], p->held->len[k])) return 0; /* closed (held freed), or another SYNC */
    }
    free(p->held);
    p->held = NULL;
    return 1;
}

static void hold(cn_fast_poster *p, unsigned char (*bufs)[CN_FAST_FRAME_MAX + 1], const struct mmsghdr *msgs,
                 unsigned from, unsigned to) {
    if (from >= to) return;
    held_frames *h = calloc(1, sizeof *h);
    if (!h) return; /* out of memory: like frames lost with a connection; their bus copies follow */
    for (unsigned i = from; i < to; i++) {
        h->len[h->count] = (uint16_t)msgs[i].msg_len; /* each checked <= CN_FAST_FRAME_MAX by its reader */
        memcpy(h->data[h->count++], bufs[i], msgs[i].msg_len);
    }
    p->held = h;
}

/* A connection that hung up while it is not read: out of the epoll set (a hang-up is reported
 * at every round), its frames kept in the socket for when it may be read. */
static void unpoll(cn_fast *f, cn_fast_poster *p) {
    if (!p->polled) return;
    epoll_ctl(f->epoll_fd, EPOLL_CTL_DEL, p->io.fd, NULL);
    p->polled = 0;
}

static void read_poster(cn_fast *f, cn_fast_poster *p, uint32_t events) {
    if (p->state == P_HELLO) { /* one frame: who it claims to be */
        int got = read_hello(f, p);
        if (got == 0 && (events & (EPOLLHUP | EPOLLERR))) close_connection(f, p);
        return;
    }
    if (p->state != P_READY) { /* not reading until its Sync (or credentials) */
        if (events & (EPOLLHUP | EPOLLERR)) unpoll(f, p);
        return;
    }
    if (!deliver_held(f, p)) return;
    unsigned char bufs[CN_FAST_BATCH][CN_FAST_FRAME_MAX + 1];
    struct iovec iov[CN_FAST_BATCH];
    struct mmsghdr msgs[CN_FAST_BATCH];
    /* From the loop, 8 batches, then the other sources' turn; draining before a bus post (events
     * 0), all there are. */
    for (int round = 0; round < 8 || events == 0; round++) {
        for (unsigned i = 0; i < CN_FAST_BATCH; i++) {
            iov[i] = (struct iovec){ bufs[i], CN_FAST_FRAME_MAX };
            msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
        }
        int got = recvmmsg(p->io.fd, msgs, CN_FAST_BATCH, MSG_DONTWAIT | MSG_TRUNC, NULL);
        if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (events & (EPOLLHUP | EPOLLERR)) close_connection(f, p);
            return;
        }
        if (got <= 0) {
            close_connection(f, p);
            return;
        }
        for (int i = 0; i < got; i++) {
            if (msgs[i].msg_len == 0) { /* the poster hung up */
                close_connection(f, p);
                return;
            }
            if (!take_frame(f, p, bufs[i], msgs[i].msg_len)) {
                if (p->io.fd >= 0) hold(p, bufs, msgs, (unsigned)i + 1, (unsigned)got); /* waiting for a Sync */
                return;
            }
            if (p->departed) atomic_fetch_add(&f->drained, 1);
        }
        if (got < CN_FAST_BATCH) return; /* the socket is empty (a drain has all there was) */
    }
}

void cn_endpoint_handle(cn_fast *f, cn_fast_fd *io, uint32_t events) {
    if (io->kind == CN_FAST_FD_LISTEN) accept_posters(f);
    else read_poster(f, (cn_fast_poster *)io, events);
}

int cn_endpoint_seen(cn_fast *f, const cn_received_post *post) {
    if (!post->has_seq || !post->sender) return 0;
    cn_fast_poster *p = cn_map_get(&f->endpoint.by_sender, post->sender);
    if (!p) return 0;
    /* The usual case by far: its direct copy came first. Dropped with no system call. */
    if (p->origin && post->origin == p->origin && delivered_already(p, post->name, post->seq)) return 1;
    /* A poster writes a post's direct copy before its bus copy: every frame it sent before this
     * bus post is in the socket by now. Delivered first, they keep the poster's order even when
     * a connection ended with frames unread (a poster that gave up on a full socket). */
    if (p->state == P_READY && p->io.fd >= 0) read_poster(f, p, 0);
    p = cn_map_get(&f->endpoint.by_sender, post->sender); /* a malformed frame may have ended it */
    if (!p) return 0;
    if (!p->origin) p->origin = post->origin; /* a record its Sync made: the bus copies name it */
    if (post->origin != p->origin) return 0;
    return seen_before(p, post->name, post->seq);
}

/* Its bus connection left: every bus message it sent has been handled, so every barrier of its
 * connection has passed. What it wrote is read to the end, its unproved connection too (its HELLO
 * and its Sync prove it: the bus can no longer be asked), then the record goes. */
void cn_endpoint_sender_gone(cn_fast *f, const char *unique) {
    cn_fast_endpoint *e = &f->endpoint;
    cn_announce_forget(f, unique);
    cn_fast_poster *r = cn_map_get(&e->by_sender, unique);
    if (!r) return;
    r->departed = 1;
    for (size_t i = 0; r->nsyncs && i < e->nposters;) {
        cn_fast_poster *p = e->posters[i];
        size_t before = e->nposters;
        if (p->state == P_HELLO && p->io.fd >= 0) read_hello(f, p);
        if (e->nposters != before || p->io.fd < 0) continue; /* closed: the list changed at i */
        if ((p->state == P_PROOF || p->state == P_CRED) && strcmp(p->claim, unique) == 0 && sync_known(r, p->token)) {
            adopt(f, p, r); /* removes p from the list */
            continue;
        }
        i++;
    }
    if (r->io.fd >= 0) resume(f, r); /* P_READY or P_SYNC: a record's connection is verified */
    drop_poster(f, r);
}

void cn_endpoint_disconnected(cn_fast *f) {
    /* What the bus vouched for held on that connection only: every poster again from its HELLO.
     * What a verified connection wrote that may be read is read first. */
    cn_fast_endpoint *e = &f->endpoint;
    for (size_t i = 0; i < e->nposters; i++)
        if (e->posters[i]->state == P_READY && e->posters[i]->io.fd >= 0) read_poster(f, e->posters[i], 0);
    while (e->nposters) drop_poster(f, e->posters[e->nposters - 1]);
    cn_map_clear(&e->by_sender, NULL);
    e->unverified = 0;
    e->next_deadline = 0;
    cn_announce_disconnected(f);
}
