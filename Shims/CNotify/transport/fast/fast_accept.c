/*
 * fast_accept.c: an endpoint's accepted connections until they are proved, and posters' departures
 * (docs/PROTOCOL.md "Fast path", "Accepting", "Bounds"). A connection's frames are read only once
 * it has proved who it is: (1) its HELLO names a bus connection, (2) that bus connection sent us,
 * by the bus, the Sync with the HELLO's token (the bus vouches for the sender, and only the poster
 * that wrote the HELLO knows the token), and (3) the bus reports for that connection the process
 * and user the kernel gives for the socket (SO_PEERCRED), asked without waiting
 * (cn_bus_fast_ask_credentials). Until then a connection costs a slot and no bus call: at most
 * CN_FAST_UNVERIFIED_MAX of them, CN_FAST_UNVERIFIED_PER_UID of one uid, each for at most
 * CN_FAST_PROOF_MS; another uid than ours and root's holds at most 1/CN_FAST_OTHER_UID_SHARE of
 * the connections.
 *
 * When a poster leaves the bus every bus message it sent has been handled: its connection is read
 * to the end, barriers or not (an unproved one too, when its HELLO and its Sync had both come),
 * and so is the connection a reconnecting poster leaves for a new one. No frame a poster wrote is
 * dropped unread. Loop thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include "fast.h"

/* Its HELLO's Sync came from the claimed connection: ask the bus who that is (no waiting). */
static void ask_credentials(cn_fast *f, cn_fast_poster *p) {
    p->request = ++f->endpoint.next_request;
    p->state = CN_P_CRED;
    atomic_fetch_add(&f->credential_asks, 1);
    if (cn_bus_fast_ask_credentials(f->bus_impl, p->claim, p->request) != NOTIFY_STATUS_OK) {
        atomic_fetch_add(&f->refused, 1);
        cn_poster_close(f, p);
    }
}

/* Connection `p` proved to be the poster `r` is the record of: the record takes it over. A
 * connection the record had (the poster connected again) is read to its end first: every Sync it
 * awaits came before this one. */
static void adopt(cn_fast *f, cn_fast_poster *p, cn_fast_poster *r) {
    if (r->io.ch) {
        int departed = r->departed;
        r->departed = 1;
        cn_endpoint_resume(f, r);
        r->departed = departed;
        if (r->io.ch) cn_poster_close_fd(f, r);
    }
    free(r->held);
    r->held = NULL;
    cn_poster_sync_pass(r, p->token);
    f->endpoint.unverified--;
    r->io.ch = p->io.ch;
    r->io.ready = p->io.ready;
    r->io.events = p->io.events; /* never direct: not proved until now */
    r->polled = p->polled;
    r->pid = p->pid;
    r->uid = p->uid; /* the kernel's word for this connection: what its frames are judged by */
    r->groups = p->groups;
    cn_poster_lane_reset(r); /* its guard's answers were for the connection before */
    if (r->origin != p->origin) cn_poster_forget_reads(r); /* a new numbering */
    r->origin = p->origin;
    r->token = p->token;
    p->io.ch = NULL;
    p->polled = 0;
    cn_poster_drop(f, p); /* unverified: listed, no record */
    if (r->polled) cn_fast_rewatch(f, &r->io, EPOLLIN); /* the record's now */
    cn_endpoint_resume(f, r);
}

void cn_endpoint_credentials(cn_fast *f, uint64_t request, int ok, pid_t pid, uid_t uid) {
    cn_fast_endpoint *e = &f->endpoint;
    cn_fast_poster *p = NULL;
    for (size_t i = 0; i < e->nposters && !p; i++)
        if (e->posters[i]->state == CN_P_CRED && e->posters[i]->request == request) p = e->posters[i];
    if (!p) return; /* closed meanwhile, or adopted when its poster left */
    cn_fast_poster *r = cn_map_get(&e->by_sender, p->claim);
    if (!ok || pid != p->pid || uid != p->uid || !r || !cn_poster_sync_known(r, p->token)) {
        atomic_fetch_add(&f->refused, 1); /* another process's name: an impostor */
        cn_poster_close(f, p);
        return;
    }
    adopt(f, p, r);
}

/* Reads the one frame of a CN_P_HELLO connection: 1 when it was a HELLO (now CN_P_PROOF), 0 for nothing
 * yet, -1 when the connection was closed. */
static int read_hello(cn_fast *f, cn_fast_poster *p) {
    cn_channel_frames got;
    f->chan->read(p->io.ch, 1, &got);
    if (got.rewatch) cn_fast_bell_set(f, &p->io); /* its first message set up a ring (channel.h) */
    if (got.count == 0 && !got.closed) return 0;
    cn_fast_frame fr;
    if (got.count == 0 || got.len[0] > CN_FAST_FRAME_MAX || cn_fast_parse(got.data[0], got.len[0], &fr) != 0
        || fr.type != CN_FAST_HELLO) {
        if (got.count) atomic_fetch_add(&f->refused, 1);
        cn_poster_close(f, p);
        return -1;
    }
    snprintf(p->claim, sizeof p->claim, "%s", fr.unique_name);
    p->origin = fr.origin;
    p->token = fr.token;
    p->state = CN_P_PROOF;
    cn_poster_set_reading(f, p, 0);
    cn_fast_poster *r = cn_map_get(&f->endpoint.by_sender, p->claim);
    if (r && cn_poster_sync_known(r, p->token) && !cn_test_late_proofs()) ask_credentials(f, p); /* its Sync came first */
    return 1;
}

void cn_endpoint_sync(cn_fast *f, const char *sender, uint64_t token) {
    cn_fast_endpoint *e = &f->endpoint;
    cn_fast_poster *r = cn_poster_record(f, sender);
    if (!r) return;
    cn_poster_sync_came(r, token);
    if (r->io.ch && r->state == CN_P_SYNC && r->token == token) {
        cn_poster_sync_pass(r, token);
        cn_endpoint_resume(f, r); /* the frames after the SYNC come after what the bus brought before */
    }
    for (size_t i = 0; i < e->nposters; i++) { /* a connection whose HELLO this proves */
        cn_fast_poster *p = e->posters[i];
        if (p->state == CN_P_PROOF && p->io.ch && p->token == token && strcmp(p->claim, sender) == 0) {
            if (!cn_test_late_proofs()) ask_credentials(f, p);
            return;
        }
    }
}

/* ---- accepting ---- */

/* Whether a connection of `uid` has room: under the cap of descriptors (fd_cap: each connection
 * holds one, and one more once its ring's bell came; a new one may take two), the caps of
 * unverified ones (CN_FAST_UNVERIFIED_MAX, CN_FAST_UNVERIFIED_PER_UID of one uid), and of another
 * uid's share of connections. */
static int room_for(cn_fast *f, uid_t uid) {
    cn_fast_endpoint *e = &f->endpoint;
    size_t live = 0, of_uid = 0, unverified_of_uid = 0;
    for (size_t k = 0; k < e->nposters; k++) {
        cn_fast_poster *q = e->posters[k];
        if (!q->io.ch) continue;
        live += 1 + (q->io.ch->bell >= 0); /* descriptors: a ring's bell is one more */
        if (q->uid != uid) continue;
        of_uid++;
        unverified_of_uid += cn_poster_unverified(q);
    }
    size_t other_share = f->fd_cap / CN_FAST_OTHER_UID_SHARE ? f->fd_cap / CN_FAST_OTHER_UID_SHARE : 1;
    return live + 2 <= f->fd_cap && e->unverified < CN_FAST_UNVERIFIED_MAX && e->nposters < 4 * CN_FAST_POSTERS_MAX
           && unverified_of_uid < CN_FAST_UNVERIFIED_PER_UID && (uid == geteuid() || uid == 0 || of_uid < other_share);
}

static int poster_ready(cn_fast *f, cn_fast_file *io, uint32_t events);

/* A connection accepted: listed and polled, its HELLO awaited; 0, or -1 (not kept). */
static int take_connection(cn_fast *f, cn_channel *ch, const cn_channel_peer *peer) {
    cn_fast_endpoint *e = &f->endpoint;
    cn_fast_poster *p = calloc(1, sizeof *p);
    if (!p) return -1;
    p->io = (cn_fast_file){ ch, poster_ready };
    p->state = CN_P_HELLO;
    p->pid = peer->pid;
    p->uid = peer->uid;
    p->groups = peer->groups;
    p->accepted_at = cn_now_ms();
    if (cn_fast_watch(f, &p->io, EPOLLIN) != 0) {
        free(p);
        return -1;
    }
    if (cn_poster_list(e, p) != 0) {
        cn_fast_unwatch(f, &p->io);
        free(p);
        return -1;
    }
    p->polled = 1;
    e->unverified++;
    if (!e->next_deadline || p->accepted_at + CN_FAST_PROOF_MS < e->next_deadline)
        e->next_deadline = p->accepted_at + CN_FAST_PROOF_MS;
    return 0;
}

int cn_endpoint_accept_ready(cn_fast *f, cn_fast_file *listen, uint32_t events) {
    (void)events;
    for (int i = 0; i < 64; i++) {
        cn_channel_peer peer;
        cn_channel *ch = f->chan->accept(listen->ch, &peer);
        if (!ch) return 1;
        if (room_for(f, peer.uid) && take_connection(f, ch, &peer) == 0) continue;
        atomic_fetch_add(&f->unverified_closed, 1);
        f->chan->close(ch); /* past a cap: that poster's posts come by the bus */
    }
    return 1;
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
        if (cn_poster_unverified(p) && now >= p->accepted_at + CN_FAST_PROOF_MS) {
            atomic_fetch_add(&f->unverified_closed, 1);
            cn_poster_close(f, p); /* unverified: no record of a bus connection, so it goes */
            continue;
        }
        if (cn_poster_unverified(p) && (!e->next_deadline || p->accepted_at + CN_FAST_PROOF_MS < e->next_deadline))
            e->next_deadline = p->accepted_at + CN_FAST_PROOF_MS;
        i++;
    }
    if (e->next_deadline) cn_loop_timeout_until(timeout_ms, e->next_deadline, now);
}

/* A poster's connection is ready: its HELLO, or its frames once proved. */
CN_HOT static int poster_ready(cn_fast *f, cn_fast_file *io, uint32_t events) {
    cn_fast_poster *p = (cn_fast_poster *)io;
    if (p->state == CN_P_READY && !(events & (EPOLLHUP | EPOLLERR))) { /* the usual call: frames */
        uint64_t closes = f->endpoint.closes;
        cn_endpoint_read(f, p, events);
        /* Only posts (or a Sync already come): the connection is as it was. */
        return f->endpoint.closes != closes || p->state != CN_P_READY;
    }
    if (p->state != CN_P_HELLO) {
        cn_endpoint_read(f, p, events);
        return 1;
    }
    /* One frame: who it claims to be. */
    if (read_hello(f, p) == 0 && (events & (EPOLLHUP | EPOLLERR))) cn_poster_close(f, p);
    return 1;
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
        if (p->state == CN_P_HELLO && p->io.ch) read_hello(f, p);
        if (e->nposters != before || !p->io.ch) continue; /* closed: the list changed at i */
        if ((p->state == CN_P_PROOF || p->state == CN_P_CRED) && strcmp(p->claim, unique) == 0 && cn_poster_sync_known(r, p->token)) {
            adopt(f, p, r); /* removes p from the list */
            continue;
        }
        i++;
    }
    if (r->io.ch) cn_endpoint_resume(f, r); /* CN_P_READY or CN_P_SYNC: a record's connection is verified */
    cn_poster_drop(f, r);
}

void cn_endpoint_disconnected(cn_fast *f) {
    /* What the bus vouched for held on that connection only: every poster again from its HELLO.
     * What a verified connection wrote that may be read is read first. */
    cn_fast_endpoint *e = &f->endpoint;
    for (size_t i = 0; i < e->nposters; i++)
        if (e->posters[i]->state == CN_P_READY && e->posters[i]->io.ch) cn_endpoint_read(f, e->posters[i], 0);
    while (e->nposters) cn_poster_drop(f, e->posters[e->nposters - 1]);
    cn_map_clear(&e->by_sender, NULL);
    e->unverified = 0;
    e->next_deadline = 0;
    cn_announce_disconnected(f);
}
