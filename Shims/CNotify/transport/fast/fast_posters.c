/*
 * fast_posters.c: an endpoint's connections from posters, and its records of posters (docs/PROTOCOL.md
 * "Fast path", "Accepting"). A connection is listed from its accept; a record (one per poster's
 * unique name, made by its Sync or its proof) takes the connection over once it is proved, and
 * lives until the poster leaves the bus. A record keeps the poster's Sync tokens that came by the
 * bus and were not matched yet, oldest first (CN_FAST_SYNCS_KEPT): a barrier (its HELLO, a SYNC
 * frame) passes whether its Sync came before it was read, with later ones or not. Loop thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include "fast.h"

void cn_endpoint_init(cn_fast_endpoint *e) {
    memset(e, 0, sizeof *e);
    cn_announce_init(e);
}

/* Lists `p` (a new connection or record): 0, or -1 when out of memory (not listed). */
int cn_poster_list(cn_fast_endpoint *e, cn_fast_poster *p) {
    if (e->nposters == e->capposters) {
        size_t cap = e->capposters ? 2 * e->capposters : 16;
        cn_fast_poster **list = realloc(e->posters, cap * sizeof *list);
        if (!list) return -1;
        e->posters = list;
        e->capposters = cap;
    }
    e->posters[e->nposters++] = p;
    return 0;
}

int cn_poster_unverified(const cn_fast_poster *p) { return p->io.ch && p->state <= CN_P_CRED; }

void cn_poster_close_fd(cn_fast *f, cn_fast_poster *p) {
    if (!p->io.ch) return;
    f->endpoint.closes++;
    if (cn_poster_unverified(p)) f->endpoint.unverified--;
    cn_fast_file_close(f, &p->io); /* out of the set whether polled or not: harmless */
    p->polled = 0;
    cn_poster_lane_reset(p); /* a connection that replaces it is judged afresh */
}

void cn_poster_lane_reset(cn_fast_poster *p) {
    p->lane.name[0] = '\0';
    p->lane.read = NULL;
}

void cn_poster_forget_reads(cn_fast_poster *p) {
    cn_map_clear(&p->read_upto, NULL);
    cn_poster_lane_reset(p);
}

static void poster_free(cn_fast *f, cn_fast_poster *p) {
    cn_poster_close_fd(f, p);
    free(p->held);
    cn_poster_forget_reads(p);
    free(p);
}

static void unlist(cn_fast_endpoint *e, cn_fast_poster *p) {
    for (size_t i = 0; i < e->nposters; i++)
        if (e->posters[i] == p) { e->posters[i] = e->posters[--e->nposters]; return; }
}

void cn_poster_drop(cn_fast *f, cn_fast_poster *p) {
    cn_fast_endpoint *e = &f->endpoint;
    if (p->unique[0] && cn_map_get(&e->by_sender, p->unique) == p) cn_map_remove(&e->by_sender, p->unique);
    unlist(e, p);
    poster_free(f, p);
}

/* A connection ends (hang-up, a malformed frame, a failed check): the record stays while it is
 * the bus connection's (its bus copies still come, and must be recognised), else it goes. */
void cn_poster_close(cn_fast *f, cn_fast_poster *p) {
    cn_poster_close_fd(f, p);
    free(p->held); /* only a malformed frame ends a connection with frames held or unread */
    p->held = NULL;
    p->state = CN_P_CLOSED;
    if (!p->unique[0] || cn_map_get(&f->endpoint.by_sender, p->unique) != p) cn_poster_drop(f, p);
}

void cn_endpoint_free(cn_fast *f) {
    cn_fast_endpoint *e = &f->endpoint;
    while (e->nposters) cn_poster_drop(f, e->posters[e->nposters - 1]);
    free(e->posters);
    cn_map_clear(&e->by_sender, NULL);
    cn_announce_free(f);
}

/* ---- barriers: the Sync tokens of a poster ---- */

void cn_poster_sync_came(cn_fast_poster *r, uint64_t token) {
    for (unsigned i = 0; i < r->nsyncs; i++)
        if (r->syncs[i] == token) return;
    if (r->nsyncs == CN_FAST_SYNCS_KEPT) { /* the oldest goes: a barrier long abandoned */
        memmove(r->syncs, r->syncs + 1, (CN_FAST_SYNCS_KEPT - 1) * sizeof *r->syncs);
        r->nsyncs--;
    }
    r->syncs[r->nsyncs++] = token;
}

int cn_poster_sync_known(const cn_fast_poster *r, uint64_t token) {
    for (unsigned i = 0; i < r->nsyncs; i++)
        if (r->syncs[i] == token) return 1;
    return 0;
}

/* A barrier with `token` is passed: its Sync and every older one are used up. 1 if it had come. */
int cn_poster_sync_pass(cn_fast_poster *r, uint64_t token) {
    for (unsigned i = 0; i < r->nsyncs; i++)
        if (r->syncs[i] == token) {
            memmove(r->syncs, r->syncs + i + 1, (r->nsyncs - i - 1) * sizeof *r->syncs);
            r->nsyncs -= i + 1;
            return 1;
        }
    return 0;
}

void cn_endpoint_offer_direct(cn_fast *f) {
    if (!f->direct_wanted) return;
    f->direct_wanted = 0;
    cn_fast_endpoint *e = &f->endpoint;
    for (size_t i = 0; i < e->nposters && f->ndirect < CN_FAST_DIRECT_MAX; i++) {
        cn_fast_poster *p = e->posters[i];
        if (p->state == CN_P_READY && p->polled && p->io.ch) cn_fast_direct(f, &p->io);
    }
}

void cn_poster_set_reading(cn_fast *f, cn_fast_poster *p, int reading) {
    /* Not reading: frames wait in the socket (the kernel bounds them); hang-ups still come. */
    if (!p->polled) return;
    cn_fast_rewatch(f, &p->io, reading ? EPOLLIN : 0);
}

cn_fast_poster *cn_poster_record(cn_fast *f, const char *unique) {
    cn_fast_endpoint *e = &f->endpoint;
    cn_fast_poster *p = cn_map_get(&e->by_sender, unique);
    if (p) return p;
    /* Bounded: a connection's record lives until its bus connection leaves. */
    if (e->by_sender.count >= 2 * CN_FAST_POSTERS_MAX || strlen(unique) >= sizeof p->unique) return NULL;
    p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->state = CN_P_CLOSED; /* no connection (io.ch NULL) until one proves to be this poster's */
    snprintf(p->unique, sizeof p->unique, "%s", unique);
    if (cn_map_put(&e->by_sender, p->unique, p) != 0) { free(p); return NULL; }
    if (cn_poster_list(e, p) != 0) {
        cn_map_remove(&e->by_sender, p->unique);
        free(p);
        return NULL;
    }
    return p;
}
