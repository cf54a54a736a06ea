/*
 * test_received.c: the sequence numbers of posts that come by the bus alone (received.c;
 * docs/PROTOCOL.md "Origins"): per origin and name only the number just seen again is a
 * duplicate (5, 3, 3, 5, 6: four taken); a jump forward counts the posts lost, at most 2^20 a jump
 * and 2^22 a sender; a jump back is a new numbering; posts with no origin are keyed by sender and
 * never duplicates; an origin's numbering is not another's; forget clears it. A poster with two
 * paths (the fast path's): at or below the highest taken is a duplicate, keyed by that poster. A
 * copy standing for posts its poster held back (its count) closes that much of a jump.
 */
#include <stdio.h>
#include <string.h>
#include "../center.h"
#include "../../base/tests/check.h"

static cn_post_verdict note(cn_received *r, const char *sender, uint64_t origin, const char *name, uint64_t seq, uint64_t *gaps) {
    cn_received_post post = { .name = name, .sender = sender, .origin = origin, .seq = seq, .has_seq = 1 };
    return cn_received_note(r, &post, gaps);
}

int main(void) {
    cn_received r = { 0 };
    uint64_t gaps = 0;
    /* The Origins example: 5, 3, 3, 5, 6 of one name from one origin. */
    const uint64_t seqs[] = { 5, 3, 3, 5, 6 };
    const cn_post_verdict want[] = { CN_POST_FRESH, CN_POST_FRESH, CN_POST_DUPLICATE, CN_POST_FRESH, CN_POST_FRESH };
    const uint64_t lost[] = { 0, 0, 0, 1 /* 3 -> 5: 4 is missing */, 0 };
    int taken = 0;
    for (int i = 0; i < 5; i++) {
        cn_post_verdict v = note(&r, ":1.1", 77, "a.b", seqs[i], &gaps);
        CHECK(v == want[i], "seq %llu: verdict %d", (unsigned long long)seqs[i], v);
        taken += v == CN_POST_FRESH;
        CHECK(gaps == lost[i], "seq %llu: %llu gaps", (unsigned long long)seqs[i], (unsigned long long)gaps);
    }
    CHECK(taken == 4, "%d taken", taken);
    /* A jump forward: the posts between are lost. */
    CHECK(note(&r, ":1.1", 77, "a.b", 10, &gaps) == CN_POST_FRESH && gaps == 3, "6 -> 10: %llu gaps", (unsigned long long)gaps);
    /* Another name, another origin: numberings apart. */
    CHECK(note(&r, ":1.1", 77, "a.c", 10, &gaps) == CN_POST_FRESH && gaps == 0, "another name");
    CHECK(note(&r, ":1.1", 78, "a.b", 10, &gaps) == CN_POST_FRESH && gaps == 0, "another origin");
    /* No origin: keyed by sender, a repeat is a poster that restarted, never a duplicate. */
    CHECK(note(&r, ":1.2", 0, "a.b", 1, &gaps) == CN_POST_FRESH, "no origin, 1");
    CHECK(note(&r, ":1.2", 0, "a.b", 1, &gaps) == CN_POST_FRESH && gaps == 0, "no origin, 1 again");
    /* A forged huge jump: at most 2^20 a jump, 2^22 a sender over all its jumps. */
    CHECK(note(&r, ":1.3", 5, "x", 1, &gaps) == CN_POST_FRESH, "x 1");
    CHECK(note(&r, ":1.3", 5, "x", UINT64_MAX, &gaps) == CN_POST_FRESH && gaps == CN_GAP_JUMP_MAX, "capped jump: %llu",
          (unsigned long long)gaps);
    uint64_t total = 0;
    for (int i = 0; i < 10; i++) {
        note(&r, ":1.3", 5, "x", 1, &gaps);
        total += gaps;
        note(&r, ":1.3", 5, "x", (1u << 20) + 2, &gaps);
        total += gaps;
    }
    CHECK(total + CN_GAP_JUMP_MAX <= CN_GAP_SENDER_MAX, "a sender added %llu", (unsigned long long)(total + CN_GAP_JUMP_MAX));
    /* Forget: the numbering starts over. */
    cn_received_forget(&r);
    CHECK(note(&r, ":1.1", 77, "a.b", 10, &gaps) == CN_POST_FRESH && gaps == 0, "after forget, 10 is fresh");
    CHECK(note(&r, ":1.1", 77, "a.b", 10, &gaps) == CN_POST_DUPLICATE, "and 10 again a duplicate");
    /* Two paths (a poster the fast path proved: PROTOCOL.md "Fast path", 4): the same 5, 3, 3, 5,
     * 6 takes two, as each copy comes twice and either first. */
    cn_received two = { 0 };
    int taken_two = 0;
    for (int i = 0; i < 5; i++) {
        cn_received_post post = { .name = "a.b", .sender = ":1.9", .origin = 77, .seq = seqs[i], .has_seq = 1, .two_paths = 1 };
        taken_two += cn_received_note(&two, &post, &gaps) == CN_POST_FRESH;
    }
    CHECK(taken_two == 2, "two paths: %d taken of 5, 3, 3, 5, 6", taken_two);
    /* Keyed by the proved sender: another sender naming that origin (a stranger, by the bus alone)
     * hides nothing of it, and is judged by its own numbers. */
    CHECK(note(&two, ":1.66", 77, "a.b", 1000, &gaps) == CN_POST_FRESH, "a stranger's post with that origin");
    cn_received_post next = { .name = "a.b", .sender = ":1.9", .origin = 77, .seq = 7, .has_seq = 1, .two_paths = 1 };
    CHECK(cn_received_note(&two, &next, &gaps) == CN_POST_FRESH && gaps == 0, "the poster's 7 after a stranger's 1000");
    CHECK(cn_received_note(&two, &next, &gaps) == CN_POST_DUPLICATE, "and its second copy");
    /* A new origin of that poster is a new numbering. */
    next.origin = 78;
    next.seq = 1;
    CHECK(cn_received_note(&two, &next, &gaps) == CN_POST_FRESH, "a new origin's 1");
    cn_received_forget(&two);
    /* A copy that stands for posts its poster held back (PROTOCOL.md "Bus copies, coalesced"):
     * 1, then 57 standing for 56 (55 held and itself): no gap; standing for 50: 5 lost; a count
     * larger than the jump hides no more than the jump, and is no duplicate. */
    cn_received c = { 0 };
    cn_received_post first = { .name = "c.d", .sender = ":1.5", .origin = 9, .seq = 1, .has_seq = 1 };
    cn_received_post held = { .name = "c.d", .sender = ":1.5", .origin = 9, .seq = 57, .has_seq = 1, .coalesced = 55 };
    CHECK(cn_received_note(&c, &first, &gaps) == CN_POST_FRESH && gaps == 0, "1");
    CHECK(cn_received_note(&c, &held, &gaps) == CN_POST_FRESH && gaps == 0, "57 standing for 56: %llu gaps", (unsigned long long)gaps);
    held.seq = 107;
    held.coalesced = 44;
    CHECK(cn_received_note(&c, &held, &gaps) == CN_POST_FRESH && gaps == 5, "107 standing for 45: %llu gaps", (unsigned long long)gaps);
    held.seq = 108;
    held.coalesced = 1000;
    CHECK(cn_received_note(&c, &held, &gaps) == CN_POST_FRESH && gaps == 0, "108 standing for 1001: %llu gaps", (unsigned long long)gaps);
    held.seq = 108;
    CHECK(cn_received_note(&c, &held, &gaps) == CN_POST_DUPLICATE, "108 again");
    cn_received_forget(&c);
    /* The last key's slot is kept (a poster's next post of a name skips the map): it follows
     * a switch of key and back, and is never used once the map was emptied (under ASan a stale
     * slot is a use after free; without ASan, 11 could read as the same post again). */
    cn_received k = { 0 };
    CHECK(note(&k, ":1.7", 3, "k.a", 10, &gaps) == CN_POST_FRESH, "k.a 10");
    CHECK(note(&k, ":1.7", 3, "k.b", 10, &gaps) == CN_POST_FRESH, "k.b 10");
    CHECK(note(&k, ":1.7", 3, "k.a", 10, &gaps) == CN_POST_DUPLICATE, "k.a 10 again, after k.b");
    CHECK(note(&k, ":1.7", 3, "k.a", 11, &gaps) == CN_POST_FRESH && gaps == 0, "k.a 11");
    CHECK(note(&k, ":1.7", 3, "k.a", 11, &gaps) == CN_POST_DUPLICATE, "k.a 11 again, kept");
    cn_received_forget(&k);
    CHECK(note(&k, ":1.7", 3, "k.a", 11, &gaps) == CN_POST_FRESH && gaps == 0, "k.a 11 after forget: a new numbering");
    /* Emptied at its bound: the kept key is one of the keys that go. */
    for (unsigned i = 0; i <= CN_MAP_BOUND; i++) {
        char name[32];
        snprintf(name, sizeof name, "fill.%u", i);
        note(&k, ":1.8", 4, name, 1, &gaps);
    }
    CHECK(note(&k, ":1.8", 4, "fill.0", 1, &gaps) == CN_POST_FRESH, "fill.0 1 after the map was emptied at its bound");
    CHECK(note(&k, ":1.8", 4, "fill.0", 1, &gaps) == CN_POST_DUPLICATE, "and 1 again");
    cn_received_forget(&k);
    /* A post with no number, or no sender: fresh, never counted. */
    cn_received_post bare = { .name = "a.b", .sender = NULL, .origin = 77, .seq = 10, .has_seq = 1 };
    CHECK(cn_received_note(&r, &bare, &gaps) == CN_POST_FRESH && gaps == 0, "no sender");
    cn_received_forget(&r);
    return check_result("test_received");
}
