/*
 * test_plist.c: property lists (plist.c), the userInfo's tree: each type built and read back, a
 * getter of the wrong type refused, a key set twice replaced, many keys found (the hash index),
 * the depth and weight bounds enforced on the way in (a refused value stays the caller's), a value
 * added twice or a container filled after it was added refused, copies equal and independent.
 */
#include <math.h>
#include <string.h>
#include "../base.h"
#include "check.h"

int main(void) {
    CNotify_plist *s = CNotify_plist_string("é"), *i = CNotify_plist_integer(INT64_MIN), *r = CNotify_plist_real(-0.5),
                  *b = CNotify_plist_bool(7), *d = CNotify_plist_data("\0\1", 2), *t = CNotify_plist_date(1.5);
    const char *text = NULL;
    int64_t iv = 0;
    double rv = 0;
    int bv = 0;
    const void *bytes = NULL;
    size_t len = 0;
    CHECK(CNotify_plist_get_string(s, &text) == NOTIFY_STATUS_OK && strcmp(text, "é") == 0, "string");
    CHECK(CNotify_plist_get_integer(i, &iv) == NOTIFY_STATUS_OK && iv == INT64_MIN, "integer");
    CHECK(CNotify_plist_get_real(r, &rv) == NOTIFY_STATUS_OK && rv == -0.5, "real");
    CHECK(CNotify_plist_get_bool(b, &bv) == NOTIFY_STATUS_OK && bv == 1, "bool is 0 or 1");
    CHECK(CNotify_plist_get_data(d, &bytes, &len) == NOTIFY_STATUS_OK && len == 2 && memcmp(bytes, "\0\1", 2) == 0, "data");
    CHECK(CNotify_plist_get_date(t, &rv) == NOTIFY_STATUS_OK && rv == 1.5, "date");
    CHECK(CNotify_plist_get_integer(s, &iv) == NOTIFY_STATUS_INVALID_REQUEST, "a string read as an integer");
    CHECK(CNotify_plist_get_date(r, &rv) == NOTIFY_STATUS_INVALID_REQUEST, "a real read as a date");
    CHECK(CNotify_plist_real(NAN) == NULL && CNotify_plist_real(INFINITY) == NULL, "a real that is not finite made");
    CHECK(CNotify_plist_string("a\xff") == NULL, "a string not UTF-8 made");
    CHECK(CNotify_plist_type_of(NULL) == CNOTIFY_PLIST_NONE, "the type of NULL");

    /* A dictionary: keys in the order set, a key set twice replaced, many keys found. */
    CNotify_plist *dict = CNotify_plist_dictionary();
    CHECK(CNotify_plist_set(dict, "s", s) == NOTIFY_STATUS_OK && CNotify_plist_set(dict, "i", i) == NOTIFY_STATUS_OK, "set");
    CHECK(CNotify_plist_set(dict, "s", r) == NOTIFY_STATUS_OK && CNotify_plist_count(dict) == 2, "a key set twice");
    CHECK(CNotify_plist_type_of(CNotify_plist_lookup(dict, "s")) == CNOTIFY_PLIST_REAL, "the second value of a key");
    CHECK(strcmp(CNotify_plist_key(dict, 0), "s") == 0 && strcmp(CNotify_plist_key(dict, 1), "i") == 0, "key order");
    char key[16];
    for (int k = 0; k < 1000; k++) {
        snprintf(key, sizeof key, "k%d", k);
        CHECK(CNotify_plist_set(dict, key, CNotify_plist_integer(k)) == NOTIFY_STATUS_OK, "set %s", key);
    }
    int lost = 0;
    for (int k = 0; k < 1000; k++) {
        snprintf(key, sizeof key, "k%d", k);
        int64_t v = -1;
        lost += CNotify_plist_get_integer(CNotify_plist_lookup(dict, key), &v) != NOTIFY_STATUS_OK || v != k;
    }
    CHECK(lost == 0 && CNotify_plist_lookup(dict, "absent") == NULL, "%d keys lost", lost);

    /* Added twice, or filled after being added: refused. */
    CNotify_plist *array = CNotify_plist_array();
    CHECK(CNotify_plist_append(array, b) == NOTIFY_STATUS_OK, "append");
    CHECK(CNotify_plist_append(array, b) == NOTIFY_STATUS_INVALID_REQUEST, "a value added twice");
    CHECK(CNotify_plist_append(array, array) == NOTIFY_STATUS_INVALID_REQUEST, "an array inside itself");
    CHECK(CNotify_plist_set(dict, "a", array) == NOTIFY_STATUS_OK, "an array into the dictionary");
    CHECK(CNotify_plist_append(array, d) == NOTIFY_STATUS_INVALID_REQUEST, "a container filled after it was added");
    CNotify_plist *copy = CNotify_plist_copy(dict);
    CHECK(copy && CNotify_plist_count(copy) == CNotify_plist_count(dict), "a copy");
    CNotify_plist_free(copy);
    CNotify_plist_free(dict);
    CNotify_plist_free(d); /* refused above: still ours */
    CNotify_plist_free(t);

    /* Depth: CNOTIFY_PLIST_MAX_DEPTH containers nest; one more is refused and stays the caller's. */
    CNotify_plist *inner = CNotify_plist_array();
    for (int level = 1; level < CNOTIFY_PLIST_MAX_DEPTH; level++) {
        CNotify_plist *outer = CNotify_plist_array();
        CHECK(CNotify_plist_append(outer, inner) == NOTIFY_STATUS_OK, "level %d", level);
        inner = outer;
    }
    CHECK(cn_plist_depth(inner) == CNOTIFY_PLIST_MAX_DEPTH, "depth %zu", cn_plist_depth(inner));
    CNotify_plist *too_deep = CNotify_plist_array();
    CHECK(CNotify_plist_append(too_deep, inner) == NOTIFY_STATUS_INVALID_REQUEST, "one level too deep");
    CNotify_plist_free(too_deep);
    CNotify_plist_free(inner);

    /* Weight: what fits fits, one byte more does not. */
    static char blob[CNOTIFY_PLIST_MAX_BYTES];
    CNotify_plist *heavy = CNotify_plist_dictionary();
    size_t room = CNOTIFY_PLIST_MAX_BYTES - 8 /* the dictionary */ - 8 /* the value */ - 1 /* the key */;
    CNotify_plist *fits = CNotify_plist_data(blob, room);
    CHECK(fits && CNotify_plist_set(heavy, "k", fits) == NOTIFY_STATUS_OK, "the heaviest userInfo refused (%zu)",
          fits ? cn_plist_weight(heavy) : 0);
    CNotify_plist *more = CNotify_plist_bool(0);
    CHECK(CNotify_plist_set(heavy, "x", more) == NOTIFY_STATUS_INVALID_REQUEST, "past the weight bound");
    CNotify_plist_free(more);
    CNotify_plist_free(heavy);
    return check_result("test_plist");
}
