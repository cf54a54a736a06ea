/*
 * test_bus_distributed.c: the Distributed Post (bus_distributed.c; docs/PROTOCOL.md "Distributed
 * notifications") through the contract's functions: a userInfo of every type, nested, built and
 * read back equal; no object and no userInfo; then every truncation of a good message, and every
 * single-byte change of it, read without a crash (each refused or read whole), and a userInfo
 * past the bounds refused when built.
 */
#include <string.h>
#include "../bus.h"
#include "../../../base/tests/check.h"

static CNotify_plist *sample(void) {
    CNotify_plist *d = CNotify_plist_dictionary(), *inner = CNotify_plist_array();
    CNotify_plist_append(inner, CNotify_plist_integer(-7));
    CNotify_plist_append(inner, CNotify_plist_bool(1));
    CNotify_plist_set(d, "s", CNotify_plist_string("é"));
    CNotify_plist_set(d, "i", CNotify_plist_integer(INT64_MIN));
    CNotify_plist_set(d, "r", CNotify_plist_real(2.5));
    CNotify_plist_set(d, "t", CNotify_plist_date(1.0e9));
    CNotify_plist_set(d, "b", CNotify_plist_data("\0\1\2", 3));
    CNotify_plist_set(d, "a", inner);
    return d;
}

static int same(const CNotify_plist *x, const CNotify_plist *y) {
    if (CNotify_plist_type_of(x) != CNotify_plist_type_of(y)) return 0;
    switch (CNotify_plist_type_of(x)) {
    case CNOTIFY_PLIST_STRING: {
        const char *a, *b;
        CNotify_plist_get_string(x, &a), CNotify_plist_get_string(y, &b);
        return strcmp(a, b) == 0;
    }
    case CNOTIFY_PLIST_INTEGER: {
        int64_t a, b;
        CNotify_plist_get_integer(x, &a), CNotify_plist_get_integer(y, &b);
        return a == b;
    }
    case CNOTIFY_PLIST_REAL: case CNOTIFY_PLIST_DATE: {
        double a, b;
        if (CNotify_plist_type_of(x) == CNOTIFY_PLIST_REAL) CNotify_plist_get_real(x, &a), CNotify_plist_get_real(y, &b);
        else CNotify_plist_get_date(x, &a), CNotify_plist_get_date(y, &b);
        return a == b;
    }
    case CNOTIFY_PLIST_BOOL: {
        int a, b;
        CNotify_plist_get_bool(x, &a), CNotify_plist_get_bool(y, &b);
        return a == b;
    }
    case CNOTIFY_PLIST_DATA: {
        const void *a, *b;
        size_t la, lb;
        CNotify_plist_get_data(x, &a, &la), CNotify_plist_get_data(y, &b, &lb);
        return la == lb && memcmp(a, b, la) == 0;
    }
    case CNOTIFY_PLIST_ARRAY: case CNOTIFY_PLIST_DICTIONARY: {
        size_t n = CNotify_plist_count(x);
        if (n != CNotify_plist_count(y)) return 0;
        for (size_t i = 0; i < n; i++) {
            if (CNotify_plist_type_of(x) == CNOTIFY_PLIST_DICTIONARY) {
                const char *key = CNotify_plist_key(x, i);
                if (!same(CNotify_plist_item(x, i), CNotify_plist_lookup(y, key))) return 0;
            } else if (!same(CNotify_plist_item(x, i), CNotify_plist_item(y, i))) {
                return 0;
            }
        }
        return 1;
    }
    default:
        return 1;
    }
}

int main(void) {
    char name[CNOTIFY_NAME_MAX + 1], object[CNOTIFY_NAME_MAX + 1];
    CNotify_plist *info = sample(), *got = NULL;
    uint32_t options = 0;
    char *bytes = NULL;
    int len = 0;
    CHECK(CNotify_protocol_build_distributed("com.example.changed", "obj", info, 3, 9, CNOTIFY_DISTRIBUTED_DELIVER_IMMEDIATELY,
                                             &bytes, &len) == NOTIFY_STATUS_OK && len > 0, "build: %s", CNotify_last_error());
    CHECK(CNotify_protocol_parse_distributed(bytes, len, name, object, &got, &options) == NOTIFY_STATUS_OK,
          "parse: %s", CNotify_last_error());
    CHECK(strcmp(name, "com.example.changed") == 0 && strcmp(object, "obj") == 0, "name '%s' object '%s'", name, object);
    CHECK(options == CNOTIFY_DISTRIBUTED_DELIVER_IMMEDIATELY, "options %u", options);
    CHECK(got && same(info, got), "the userInfo differs");
    CNotify_plist_free(got);

    /* Every truncation refused; every one-byte change read without a crash (and freed). */
    int refused = 0;
    for (int n = 0; n < len; n++) {
        got = NULL;
        refused += CNotify_protocol_parse_distributed(bytes, n, name, object, &got, &options) == NOTIFY_STATUS_INVALID_REQUEST;
        CNotify_plist_free(got);
    }
    CHECK(refused == len, "%d of %d truncations refused", refused, len);
    char *copy = malloc((size_t)len);
    for (int at = 0; at < len; at++) {
        for (int delta = 1; delta < 256; delta += 37) {
            memcpy(copy, bytes, (size_t)len);
            copy[at] = (char)(copy[at] + delta);
            got = NULL;
            uint32_t st = CNotify_protocol_parse_distributed(copy, len, name, object, &got, &options);
            CHECK(st == NOTIFY_STATUS_OK || st == NOTIFY_STATUS_INVALID_REQUEST, "byte %d: status %u", at, st);
            CNotify_plist_free(got);
        }
    }
    free(copy);
    CNotify_protocol_free(bytes);
    CNotify_plist_free(info);

    /* None: no object, no userInfo. */
    CHECK(CNotify_protocol_build_distributed("a.b", NULL, NULL, 1, 1, 0, &bytes, &len) == NOTIFY_STATUS_OK, "build bare");
    got = (CNotify_plist *)1;
    CHECK(CNotify_protocol_parse_distributed(bytes, len, name, object, &got, &options) == NOTIFY_STATUS_OK && object[0] == 0
              && got == NULL && options == 0, "a bare post read back wrong");
    CNotify_protocol_free(bytes);

    /* Refused when built: not a dictionary, a bad name. Past the weight bound: refused by set. */
    CNotify_plist *array = CNotify_plist_array();
    CHECK(CNotify_protocol_build_distributed("a.b", NULL, array, 1, 1, 0, &bytes, &len) == NOTIFY_STATUS_INVALID_REQUEST,
          "an array as userInfo built");
    CNotify_plist_free(array);
    CHECK(CNotify_protocol_build_distributed("", NULL, NULL, 1, 1, 0, &bytes, &len) == NOTIFY_STATUS_INVALID_NAME, "empty name");
    CNotify_plist *big = CNotify_plist_dictionary();
    static char blob[CNOTIFY_PLIST_MAX_BYTES];
    CNotify_plist *data = CNotify_plist_data(blob, sizeof blob);
    uint32_t st = data ? CNotify_plist_set(big, "k", data) : NOTIFY_STATUS_FAILED;
    CHECK(st != NOTIFY_STATUS_OK, "a userInfo past the bound was made");
    if (st != NOTIFY_STATUS_OK) CNotify_plist_free(data); /* set leaves it to the caller on failure */
    CNotify_plist_free(big);
    CHECK(CNotify_protocol_parse_distributed("garbage", 7, name, object, &got, &options) == NOTIFY_STATUS_INVALID_REQUEST,
          "garbage read");
    return check_result("test_bus_distributed");
}
