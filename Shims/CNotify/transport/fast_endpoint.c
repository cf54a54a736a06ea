/*
 * fast_endpoint.c: the observer's side of the fast path. Once the center observes something it
 * listens on an abstract Unix seqpacket socket named by a random token, announces the token and
 * the buckets it observes on the bus (Endpoint; again when they change, and to each poster that
 * asks with Query), and accepts posters' connections. A connection's frames are read only once
 * (1) its HELLO names a bus connection whose process and user, as the bus reports them, are those
 * the kernel gives for the socket (SO_PEERCRED), and (2) that bus connection's Sync with the
 * HELLO's token came by the bus: every bus post it sent before has then been handled, so no
 * frame overtakes one of them. Restricted names are checked against the kernel's uid.
 *
 * Each poster's copies come twice (the bus copy too, unless the poster opted out): per poster,
 * name and origin the highest number delivered is kept, and whichever copy comes second is
 * dropped (cn_endpoint_seen for the bus's). Loop thread only, but the subscription counts, which
 * subscribers change from any thread under endpoint.lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include "fast.h"

enum { P_HELLO, P_SYNC, P_READY, P_CLOSED };

struct cn_fast_poster {
    cn_fast_fd io;                      /* first: the epoll tag; fd -1 once closed */
    int state;
    pid_t pid;                          /* SO_PEERCRED: the kernel's word */
    uid_t uid;
    char unique[256];                   /* its bus connection, once verified (or from its Sync) */
    uint64_t origin, token;             /* from HELLO */
    uint64_t sync_token;                /* from its Sync on the bus; 0: none yet */
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

void cn_endpoint_init(cn_fast_endpoint *e) {
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->lock, NULL);
    e->listen.fd = -1;
    e->listen.kind = CN_FAST_FD_LISTEN;

}

static void poster_free(cn_fast *f, cn_fast_poster *p) {
    if (p->io.fd >= 0) {
        epoll_ctl(f->epoll_fd, EPOLL_CTL_DEL, p->io.fd, NULL);
        close(p->io.fd);
    }
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
    if (p->io.fd >= 0) {
        epoll_ctl(f->epoll_fd, EPOLL_CTL_DEL, p->io.fd, NULL);
        close(p->io.fd);
        p->io.fd = -1;
    }
    free(p->held); /* like frames left unread in the socket: their bus copies follow */
    p->held = NULL;
    p->state = P_CLOSED;
    if (!p->unique[0] || cn_map_get(&f->endpoint.by_sender, p->unique) != p) drop_poster(f, p);
}

void cn_endpoint_free(cn_fast *f) {
    cn_fast_endpoint *e = &f->endpoint;
    while (e->nposters) drop_poster(f, e->posters[e->nposters - 1]);
    free(e->posters);
    cn_map_clear(&e->by_sender, NULL);
    cn_map_clear(&e->namespaces, NULL);
    free(e->queries);
    if (e->listen.fd >= 0) close(e->listen.fd);
    pthread_mutex_destroy(&e->lock);
}

void cn_endpoint_subscribed(cn_fast *f, const char *key, cn_key_kind kind, int delta) {
    cn_fast_endpoint *e = &f->endpoint;
    if (kind == CN_KEY_DISTRIBUTED) return; /* distributed notifications stay on the bus */
    pthread_mutex_lock(&e->lock);
    if (kind == CN_KEY_NAMESPACE) {
        void **slot = cn_map_upsert(&e->namespaces, key);
        uintptr_t n = slot ? (uintptr_t)*slot : 0;
        if (slot && delta > 0) *slot = (void *)(n + 1);
        else if (slot && n > 1) *slot = (void *)(n - 1);
        else cn_map_remove(&e->namespaces, key); /* its last one (or out of memory: not announced) */
    } else {
        unsigned *count = &e->counts[cn_fast_bucket(key)];
        if (delta > 0) (*count)++;
        else if (*count > 0) (*count)--;
    }
    atomic_store(&e->announce_due, 1);
    pthread_mutex_unlock(&e->lock);
    cn_loop_wake(f->loop);
}

void cn_endpoint_reset_counts(cn_fast *f) {
    cn_fast_endpoint *e = &f->endpoint;
    pthread_mutex_lock(&e->lock);
    memset(e->counts, 0, sizeof e->counts);
    cn_map_clear(&e->namespaces, NULL);
    atomic_store(&e->announce_due, 1);
    pthread_mutex_unlock(&e->lock);
}

/* What an Endpoint announces, copied out under endpoint.lock (then sent with no lock held). */
typedef struct announcement {
    unsigned char bitmap[CN_FAST_BITMAP_BYTES];
    char names[CN_FAST_NAMESPACES_MAX][256];
    const char *namespaces[CN_FAST_NAMESPACES_MAX];
    size_t n;
} announcement;

static void add_namespace(const char *key, void *value, void *arg) {
    (void)value;
    announcement *a = arg;
    if (a->n < CN_FAST_NAMESPACES_MAX) {
        snprintf(a->names[a->n], sizeof a->names[a->n], "%s", key); /* at most 255 bytes: validated */
        a->namespaces[a->n] = a->names[a->n];
    }
    a->n++;
}

/* The buckets and namespaces under endpoint.lock; returns whether anything is observed. Each
 * namespace is announced by name (a poster sends its posts directly); past CN_FAST_NAMESPACES_MAX
 * of them, every bucket is announced instead. */
static int announcement_locked(cn_fast_endpoint *e, announcement *out) {
    assert(cn_mutex_is_held(&e->lock));
    memset(out->bitmap, 0, CN_FAST_BITMAP_BYTES);
    out->n = 0;
    int any = e->namespaces.count > 0;
    for (unsigned b = 0; b <= CN_BUCKET_MASK; b++)
        if (e->counts[b]) { out->bitmap[b >> 3] |= (unsigned char)(1u << (b & 7)); any = 1; }
    cn_map_each(&e->namespaces, add_namespace, out);
    if (out->n > CN_FAST_NAMESPACES_MAX) {
        memset(out->bitmap, 0xff, CN_FAST_BITMAP_BYTES);
        out->n = 0;
    }
    return any;
}

static int start_listening(cn_fast *f) {
    cn_fast_endpoint *e = &f->endpoint;
    if (cn_fast_token_new(e->token) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_un sa;
    socklen_t len;
    cn_fast_address(e->token, &sa, &len);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &e->listen };
    if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, 128) != 0
        || epoll_ctl(f->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        close(fd);
        return -1;
    }
    e->listen.fd = fd;
    return 0;
}

void cn_endpoint_announce_soon(cn_fast *f) { atomic_store(&f->endpoint.announce_due, 1); }

void cn_endpoint_prepare(cn_fast *f) {
    cn_fast_endpoint *e = &f->endpoint;
    /* Off and not listening: the buckets wait (switching it on announces them). */
    if (e->listen.fd < 0 && !atomic_load(&f->enabled)) return;
    int due = atomic_exchange(&e->announce_due, 0);
    if (!due && !e->nqueries && !e->broadcast_answer) return; /* most rounds: nothing changed, nobody asked */
    announcement a;
    pthread_mutex_lock(&e->lock);
    int any = announcement_locked(e, &a);
    pthread_mutex_unlock(&e->lock);
    if (e->listen.fd < 0) {
        if (!any) return;
        if (start_listening(f) != 0) { /* no fast path for this center yet: the bus has it all */
            atomic_store(&e->announce_due, 1); /* tried again at the next round */
            return;
        }
        due = 1;
    }
    if (due && cn_bus_fast_announce(f->bus_impl, e->token, a.bitmap, a.namespaces, a.n, NULL) != NOTIFY_STATUS_OK)
        atomic_store(&e->announce_due, 1); /* once reconnected */
    if (e->broadcast_answer) { /* more queries than we keep: one broadcast answers them all */
        cn_bus_fast_announce(f->bus_impl, e->token, a.bitmap, a.namespaces, a.n, NULL);
        e->broadcast_answer = 0;
    } else {
        for (size_t i = 0; i < e->nqueries; i++)
            cn_bus_fast_announce(f->bus_impl, e->token, a.bitmap, a.namespaces, a.n, e->queries[i]);
    }
    for (size_t i = 0; i < e->nqueries; i++) free(e->queries[i]);
    e->nqueries = 0;
}

void cn_endpoint_query(cn_fast *f, const char *sender) {
    cn_fast_endpoint *e = &f->endpoint;
    if (e->nqueries >= CN_FAST_QUERIES_MAX) { e->broadcast_answer = 1; return; }
    if (e->nqueries == e->capqueries) {
        size_t cap = e->capqueries ? 2 * e->capqueries : 16;
        char **q = realloc(e->queries, cap * sizeof *q);
        if (!q) { e->broadcast_answer = 1; return; }
        e->queries = q;
        e->capqueries = cap;
    }
    char *copy = strdup(sender);
    if (!copy) { e->broadcast_answer = 1; return; }
    e->queries[e->nqueries++] = copy;
}

static void set_reading(cn_fast *f, cn_fast_poster *p, int reading) {
    /* Not reading: frames wait in the socket (the kernel bounds them); hang-ups still come. */
    struct epoll_event ev = { .events = reading ? EPOLLIN : 0, .data.ptr = &p->io };
    epoll_ctl(f->epoll_fd, EPOLL_CTL_MOD, p->io.fd, &ev);
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

void cn_endpoint_sync(cn_fast *f, const char *sender, uint64_t token) {
    cn_fast_poster *p = record_for(f, sender);
    if (!p) return;
    p->sync_token = token;
    if (p->state == P_SYNC && p->token == token) {
        p->state = P_READY;
        set_reading(f, p, 1);
        deliver_held(f, p); /* the frames after the SYNC come after what the bus brought before */
    }
}

static void accept_posters(cn_fast *f) {
    cn_fast_endpoint *e = &f->endpoint;
    for (int i = 0; i < 64; i++) {
        int fd = accept4(e->listen.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        size_t live = 0;
        for (size_t k = 0; k < e->nposters; k++) live += e->posters[k]->io.fd >= 0;
        struct ucred cred;
        socklen_t len = sizeof cred;
        cn_fast_poster *p = NULL;
        if (live < f->fd_cap && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0
            && e->nposters < 4 * CN_FAST_POSTERS_MAX && (p = calloc(1, sizeof *p))) {
            p->io.fd = fd;
            p->io.kind = CN_FAST_FD_POSTER;
            p->state = P_HELLO;
            p->pid = cred.pid;
            p->uid = cred.uid;

            struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &p->io };
            if (e->nposters == e->capposters) {
                size_t cap = e->capposters ? 2 * e->capposters : 16;
                cn_fast_poster **list = realloc(e->posters, cap * sizeof *list);
                if (list) { e->posters = list; e->capposters = cap; }
            }
            if (e->nposters < e->capposters && epoll_ctl(f->epoll_fd, EPOLL_CTL_ADD, fd, &ev) == 0) {
                e->posters[e->nposters++] = p;
                continue;
            }
            free(p);
        }
        close(fd); /* past the cap: that poster's posts come by the bus */
    }
}

/* HELLO: who the poster is on the bus, checked against the kernel's word. */
static void hello(cn_fast *f, cn_fast_poster *p, const cn_fast_frame *fr) {
    pid_t pid;
    uid_t uid;
    if (!cn_bus_fast_credentials(f->bus_impl, fr->unique_name, &pid, &uid) || pid != p->pid || uid != p->uid) {
        atomic_fetch_add(&f->refused, 1); /* another process's name: an impostor, or it left */
        close_connection(f, p);
        return;
    }
    cn_fast_poster *r = record_for(f, fr->unique_name);
    if (!r) { /* out of room: that poster's posts come by the bus */
        close_connection(f, p);
        return;
    }
    if (r->io.fd >= 0) {
        /* The same poster connected again (a new barrier after a change of what it sends
         * directly): the old connection's unread frames have their bus copies behind them. */
        epoll_ctl(f->epoll_fd, EPOLL_CTL_DEL, r->io.fd, NULL);
        close(r->io.fd);
        r->io.fd = -1;
    }
    free(r->held);
    r->held = NULL;
    /* The record (made by its Sync, or its bus copies) takes the connection over. */
    r->io.fd = p->io.fd;
    r->pid = p->pid;
    r->uid = p->uid;
    r->origin = fr->origin;
    r->token = fr->token;
    p->io.fd = -1;
    unlist(&f->endpoint, p);
    poster_free(f, p);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &r->io };
    epoll_ctl(f->epoll_fd, EPOLL_CTL_MOD, r->io.fd, &ev);
    r->state = r->sync_token == r->token ? P_READY : P_SYNC;
    if (r->state == P_SYNC) set_reading(f, r, 0);
}

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
        if (p->sync_token == fr.token) return 1;
        p->state = P_SYNC;
        set_reading(f, p, 0);
        return 0;
    }
    if (fr.type != CN_FAST_POST) {
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

static void read_poster(cn_fast *f, cn_fast_poster *p, uint32_t events) {
    if (p->state == P_HELLO) { /* one frame: who it is */
        unsigned char buf[CN_FAST_FRAME_MAX + 1];
        ssize_t n = recv(p->io.fd, buf, CN_FAST_FRAME_MAX, MSG_DONTWAIT | MSG_TRUNC);
        cn_fast_frame fr;
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (events & (EPOLLHUP | EPOLLERR)) close_connection(f, p);
            return;
        }
        if (n <= 0 || n > CN_FAST_FRAME_MAX || cn_fast_parse(buf, (size_t)n, &fr) != 0 || fr.type != CN_FAST_HELLO) {
            if (n > 0) atomic_fetch_add(&f->refused, 1);
            close_connection(f, p);
            return;
        }
        hello(f, p, &fr); /* p may be gone: the record that took its connection is polled on its own */
        return;
    }
    if (p->state != P_READY) { /* not reading until its Sync: only a hang-up ends it */
        if (events & (EPOLLHUP | EPOLLERR)) close_connection(f, p);
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

void cn_endpoint_sender_gone(cn_fast *f, const char *unique) {
    cn_fast_poster *p = cn_map_get(&f->endpoint.by_sender, unique);
    if (p) drop_poster(f, p);
}

void cn_endpoint_disconnected(cn_fast *f) {
    /* What the bus vouched for held on that connection only: every poster again from its HELLO. */
    cn_fast_endpoint *e = &f->endpoint;
    while (e->nposters) drop_poster(f, e->posters[e->nposters - 1]);
    cn_map_clear(&e->by_sender, NULL);
    for (size_t i = 0; i < e->nqueries; i++) free(e->queries[i]);
    e->nqueries = 0;
    atomic_store(&e->announce_due, 1);
}
