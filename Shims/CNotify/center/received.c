/*
 * received.c: the sequence numbers of received posts (loop thread), and the one rule of which
 * copy of a post is a duplicate. Posts are numbered per origin and name (PROTOCOL.md "Origins";
 * per sender and name for a poster that sends no origin): a jump means some were lost on the way
 * to us (a gap). Which copy is not delivered:
 *  - a post by the bus alone: the number just seen again from its origin (the same post a second
 *    time); a lower one is a new numbering. The origin is the poster's word, so a stranger who
 *    sends another's origin can hide one post, never a run of them.
 *  - a post of a poster that reaches us by two paths (the transport says so: two_paths, a poster
 *    the kernel and the bus proved, PROTOCOL.md "Fast path", 4): a number at or below the highest
 *    taken of that name from that poster and origin, whichever path brought it, since its copies
 *    come twice and either may come first. Keyed by the proved sender, never by the origin alone.
 * A copy that stands for posts its poster held back (PROTOCOL.md "Bus copies, coalesced": its
 * count) closes that much of a jump: coalesced, not lost. The last key's slot is kept: the same
 * poster's next post of the same name (a fan-out's usual case) skips the map.
 */
#include <string.h>
#include "center.h"

/* What one sender may still add to `gaps`, kept in the same map under "sender\n" (no name is
 * empty): every sender starts with CN_GAP_SENDER_MAX, so whatever numbers it sends, on however
 * many names, it adds no more than that (until the map is cleared at its bound, which takes
 * CN_MAP_BOUND new keys). Keyed by the sender the transport vouches for, never by the origin,
 * which is the poster's word. */
static uint64_t take_gap_budget(cn_received *r, const char *sender, uint64_t lost) {
    char key[256 + 2];
    size_t ls = strlen(sender);
    if (ls + 2 > sizeof key) return 0;
    memcpy(key, sender, ls);
    key[ls] = '\n';
    key[ls + 1] = '\0';
    void **slot = cn_map_upsert(&r->last_seq, key);
    if (!slot) return 0;
    uint64_t spent = (uintptr_t)*slot;
    uint64_t left = spent >= CN_GAP_SENDER_MAX ? 0 : CN_GAP_SENDER_MAX - spent;
    uint64_t take = lost < left ? lost : left;
    *slot = (void *)(uintptr_t)(spent + take);
    return take;
}

/* 16 lowercase hex digits, by hand: this runs for every post (a sender's name starts with ':',
 * so an origin's key never meets a sender's). */
static const char *hex64(uint64_t v, char out[17]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--, v >>= 4) out[i] = digits[v & 0xf];
    out[16] = '\0';
    return out;
}

/* The key of a post's numbering, built by hand (this runs for every post): "origin\nname" (16 hex
 * digits), "sender\nname" with no origin, "originsender\tname" for two paths (a sender starts with
 * ':', so no key is another's). 0, or -1 when too long. */
static int key_of(const cn_received_post *post, char *key, size_t cap) {
    char origin[17];
    size_t at = 0;
    const char *who = post->sender;
    char separator = '\n';
    if (post->origin && post->two_paths) { /* "originsender\tname" */
        memcpy(key, hex64(post->origin, origin), 16);
        at = 16;
        separator = '\t';
    } else if (post->origin) { /* "origin\nname" */
        who = hex64(post->origin, origin);
    }
    size_t lw = strlen(who), ln = strlen(post->name);
    if (at + lw + ln + 2 > cap) return -1;
    memcpy(key + at, who, lw);
    key[at + lw] = separator;
    memcpy(key + at + lw + 1, post->name, ln + 1);
    return 0;
}

/* The map emptied, and the slot kept from it. */
static void clear(cn_received *r) {
    cn_map_clear(&r->last_seq, NULL);
    r->last_key[0] = '\0';
    r->last_slot = NULL;
}

/* The slot of `key`: the one kept when it is the last key noted, else from the map (then kept). */
CN_HOT static void **slot_of(cn_received *r, const char *key) {
    if (r->last_slot && strcmp(r->last_key, key) == 0) return r->last_slot;
    if (r->last_seq.count > CN_MAP_BOUND) clear(r);
    void **slot = cn_map_upsert(&r->last_seq, key);
    size_t len = strlen(key);
    if (slot && len < sizeof r->last_key) {
        memcpy(r->last_key, key, len + 1);
        r->last_slot = slot;
    }
    return slot;
}

CN_HOT cn_post_verdict cn_received_note(cn_received *r, const cn_received_post *post, uint64_t *gaps) {
    *gaps = 0;
    if (!post->has_seq || !post->sender) return CN_POST_FRESH;
    char key[CNOTIFY_NAME_MAX + 256 + 16 + 2];
    if (key_of(post, key, sizeof key) != 0) return CN_POST_FRESH;
    void **slot = slot_of(r, key);
    if (!slot) return CN_POST_FRESH;
    uint64_t last = (uintptr_t)*slot, seq = post->seq;
    /* Two paths: at or below the highest taken is a copy taken already. */
    if (post->two_paths && post->origin && last && seq <= last) return CN_POST_DUPLICATE;
    /* The same number again from an origin: the same post (an origin is random per center, and
     * its numbers only go up). Without an origin a repeat is only a poster that restarted. */
    if (post->origin && last && seq == last) return CN_POST_DUPLICATE;
    *slot = (void *)(uintptr_t)seq;
    /* A jump forward by more than one is that many lost, up to a bound per jump and per sender:
     * the number is the sender's word, and a forged 2^64-1, or 1 and 2^20+2 alternating, must
     * not count without end. A jump back is a new numbering (a restart), not a loss. */
    if (last && seq > last && seq - last - 1 > post->coalesced) { /* not seq > last + 1: last may be 2^64-1 */
        /* Those the poster held back and this copy stands for (its count) were not lost. */
        uint64_t lost = seq - last - 1 - post->coalesced;
        if (lost > CN_GAP_JUMP_MAX) lost = CN_GAP_JUMP_MAX;
        *gaps = take_gap_budget(r, post->sender, lost);
    }
    return CN_POST_FRESH;
}

void cn_received_forget(cn_received *r) { clear(r); }
