/*
 * test_fast_grace.c: a new connection's grace for its first read (fast_peers.c, docs/DESIGN.md "A
 * connection's first read"): a uid whose peer let a grace run out unread gets none for
 * CN_FAST_GRACE_DENIED_MS, counted from when it ran out; its entry is refreshed, not doubled; past
 * CN_FAST_GRACE_UIDS such uids, the entry that ends first makes way; the peer itself has none
 * again (grace_spent); an empty table refuses no uid, root's (0) included. A connection that
 * ends within its grace spends it only if posters waited for it and it was never seen reading.
 */
#include <stdlib.h>
#include <string.h>
#include "../fast.h"
#include "../../../base/tests/check.h"

static void spend(cn_fast *f, uid_t uid, uint64_t now) {
    cn_fast_peer peer;
    memset(&peer, 0, sizeof peer);
    peer.uid = uid;
    cn_mutex_lock(&f->peers.lock);
    cn_peer_grace_spent_locked(f, &peer, now);
    cn_mutex_unlock(&f->peers.lock);
    CHECK(peer.grace_spent == 1, "uid %u: the peer keeps its grace after letting one run out", (unsigned)uid);
}

static int allowed(cn_fast *f, uid_t uid, uint64_t now) {
    cn_mutex_lock(&f->peers.lock);
    int a = cn_peers_grace_allowed_locked(&f->peers, uid, now);
    cn_mutex_unlock(&f->peers.lock);
    return a;
}

int main(void) {
    cn_fast *f = calloc(1, sizeof *f);
    if (!f) abort();
    cn_peers_init(&f->peers);
    const uint64_t t = 1000000;
    CHECK(allowed(f, 0, t) && allowed(f, 1000, t), "an empty table refuses a uid");

    spend(f, 1000, t);
    CHECK(!allowed(f, 1000, t) && !allowed(f, 1000, t + CN_FAST_GRACE_DENIED_MS - 1), "uid 1000 given a grace within the minute");
    CHECK(allowed(f, 1000, t + CN_FAST_GRACE_DENIED_MS), "uid 1000 refused a grace after the minute");
    CHECK(allowed(f, 1001, t) && allowed(f, 0, t), "another uid refused for uid 1000's peer");

    /* Again later: its own entry moves on, no second one (all the others stay free). */
    spend(f, 1000, t + 10);
    CHECK(!allowed(f, 1000, t + CN_FAST_GRACE_DENIED_MS + 5), "uid 1000's entry not refreshed");
    unsigned used = 0;
    for (size_t i = 0; i < CN_FAST_GRACE_UIDS; i++) used += f->peers.graceless[i].until > t;
    CHECK(used == 1, "uid 1000 holds %u entries", used);

    /* A full table: the uid whose entry ends first makes way for a new one. */
    for (uid_t u = 2000; u < 2000 + CN_FAST_GRACE_UIDS - 1; u++) spend(f, u, t + 100 + u);
    for (uid_t u = 2000; u < 2000 + CN_FAST_GRACE_UIDS - 1; u++) CHECK(!allowed(f, u, t + 5000), "uid %u forgotten too soon", (unsigned)u);
    CHECK(!allowed(f, 1000, t + 5000), "uid 1000 forgotten before the table was full");
    spend(f, 3000, t + 6000);
    CHECK(!allowed(f, 3000, t + 6000) && allowed(f, 1000, t + 6000), "uid 1000 (first to end) did not make way for uid 3000");
    for (uid_t u = 2000; u < 2000 + CN_FAST_GRACE_UIDS - 1; u++) CHECK(!allowed(f, u, t + 6000), "uid %u made way, not uid 1000", (unsigned)u);

    /* A connection that ends within its grace: spent if posters waited for it (its endpoint
     * closed it just before the grace ran out), not if nobody did (it read its one post and left),
     * nor once it was seen reading. No channel: nothing to close. */
    struct { int pressed, reads, spent; } cases[] = { { 1, 0, 1 }, { 0, 0, 0 }, { 1, 1, 0 } };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cn_fast_peer peer;
        memset(&peer, 0, sizeof peer);
        peer.uid = 4000 + (uid_t)i;
        peer.grace_until = cn_now_ms() + CN_FAST_GRACE_MS;
        peer.reads = (unsigned char)cases[i].reads;
        if (cases[i].pressed) {
            peer.pressed_since = cn_now_ms();
            atomic_fetch_add(&f->peers.pressed, 1);
        }
        cn_mutex_lock(&f->peers.lock);
        cn_peer_disconnect_locked(f, &peer, 0);
        cn_mutex_unlock(&f->peers.lock);
        CHECK(peer.grace_spent == cases[i].spent && allowed(f, peer.uid, cn_now_ms()) == !cases[i].spent,
              "ended within its grace (waited for %d, seen reading %d): spent %d", cases[i].pressed, cases[i].reads, peer.grace_spent);
        CHECK(peer.grace_until == 0 && atomic_load(&f->peers.pressed) == 0, "a closed connection kept its grace or its pressure");
    }

    cn_mutex_destroy(&f->peers.lock);
    free(f);
    return check_result("test_fast_grace");
}
