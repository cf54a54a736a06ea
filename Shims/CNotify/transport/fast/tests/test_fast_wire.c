/*
 * test_fast_wire.c: the fast path's frames (fast_wire.c; docs/PROTOCOL.md "Fast path", the
 * vectors there): each kind built as the contract spells it, read back, and every malformed
 * variation refused (a wrong version, padding, length, a NUL inside, empty or oversized text, a
 * zero origin, token or sequence, an unknown type, a HELLO name without ':', a POST not UTF-8).
 */
#include <string.h>
#include "../fast.h"
#include "../../../base/tests/check.h"

static const unsigned char hello_vector[] = "\x01\x01\x00\x00\x04\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00"
                                            "\x02\x00\x00\x00\x00\x00\x00\x00" ":1.5";
static const unsigned char post_vector[] = "\x02\x01\x00\x00\x03\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00"
                                           "\x00\x00\x00\x00\x00\x00\x00\x00" "a.b";
static const unsigned char sync_vector[] = "\x03\x01\x00\x00\x00\x00\x00\x00\x09\x00\x00\x00\x00\x00\x00\x00"
                                           "\x00\x00\x00\x00\x00\x00\x00\x00";

/* Parses a copy of `bytes` (with the byte of room parse needs). */
static int parse(const unsigned char *bytes, size_t len, cn_fast_frame *out, unsigned char *buf) {
    memcpy(buf, bytes, len);
    return cn_fast_parse(buf, len, out);
}

/* `vector` with byte `at` set to `value`: refused. */
static void refused_with(const unsigned char *vector, size_t len, size_t at, unsigned char value, const char *what) {
    unsigned char copy[CN_FAST_FRAME_MAX + 1], buf[CN_FAST_FRAME_MAX + 1];
    cn_fast_frame f;
    memcpy(copy, vector, len);
    copy[at] = value;
    CHECK(parse(copy, len, &f, buf) == -1, "%s accepted", what);
}

int main(void) {
    unsigned char out[CN_FAST_FRAME_MAX + 2], buf[CN_FAST_FRAME_MAX + 2]; /* room for a frame one byte too long, and parse's byte */
    cn_fast_frame f;

    /* Built as the vectors spell them. */
    size_t n = cn_fast_hello(1, 2, ":1.5", out, sizeof out);
    CHECK(n == sizeof hello_vector - 1 && memcmp(out, hello_vector, n) == 0, "HELLO differs from the vector");
    n = cn_fast_post("a.b", 7, out, sizeof out);
    CHECK(n == sizeof post_vector - 1 && memcmp(out, post_vector, n) == 0, "POST differs from the vector");
    n = cn_fast_sync(9, out, sizeof out);
    CHECK(n == sizeof sync_vector - 1 && memcmp(out, sync_vector, n) == 0, "SYNC differs from the vector");
    CHECK(cn_fast_post("a.b", 7, out, 26) == 0, "a frame past the room given was built");

    /* Read back. */
    CHECK(parse(hello_vector, sizeof hello_vector - 1, &f, buf) == 0 && f.type == CN_FAST_HELLO && f.origin == 1
              && f.token == 2 && strcmp(f.unique_name, ":1.5") == 0, "HELLO not read back");
    CHECK(parse(post_vector, sizeof post_vector - 1, &f, buf) == 0 && f.type == CN_FAST_POST && f.seq == 7
              && strcmp(f.name, "a.b") == 0, "POST not read back");
    CHECK(parse(sync_vector, sizeof sync_vector - 1, &f, buf) == 0 && f.type == CN_FAST_SYNC && f.token == 9,
          "SYNC not read back");

    /* The longest name a POST carries, and one byte more. */
    char name[CNOTIFY_NAME_MAX + 2];
    memset(name, 'n', sizeof name - 1);
    name[CNOTIFY_NAME_MAX] = 0;
    n = cn_fast_post(name, 1, out, sizeof out);
    CHECK(n == 24 + CNOTIFY_NAME_MAX && parse(out, n, &f, buf) == 0, "the longest name refused");
    name[CNOTIFY_NAME_MAX] = 'n';
    name[CNOTIFY_NAME_MAX + 1] = 0;
    /* The builder writes what fits (a poster checked the name before); a reader refuses it. */
    n = cn_fast_post(name, 1, out, sizeof out);
    CHECK(n == 25 + CNOTIFY_NAME_MAX && parse(out, n, &f, buf) == -1, "a name past the longest was read");

    /* Malformed: each byte of the header that must hold a value. */
    refused_with(post_vector, sizeof post_vector - 1, 0, 4, "an unknown type");
    refused_with(post_vector, sizeof post_vector - 1, 0, 0, "type 0");
    refused_with(post_vector, sizeof post_vector - 1, 1, 2, "another version");
    refused_with(post_vector, sizeof post_vector - 1, 2, 1, "padding not zero");
    refused_with(post_vector, sizeof post_vector - 1, 3, 1, "padding not zero");
    refused_with(post_vector, sizeof post_vector - 1, 4, 4, "a length past the frame");
    refused_with(post_vector, sizeof post_vector - 1, 4, 2, "a length short of the frame");
    refused_with(post_vector, sizeof post_vector - 1, 8, 0, "a POST numbered 0");
    refused_with(post_vector, sizeof post_vector - 1, 16, 1, "a POST's second field not zero");
    refused_with(post_vector, sizeof post_vector - 1, 25, 0, "a NUL inside the name");
    refused_with(post_vector, sizeof post_vector - 1, 25, 0xff, "a name not UTF-8");
    refused_with(hello_vector, sizeof hello_vector - 1, 8, 0, "a HELLO with origin 0");
    refused_with(hello_vector, sizeof hello_vector - 1, 16, 0, "a HELLO with token 0");
    refused_with(hello_vector, sizeof hello_vector - 1, 24, 'x', "a HELLO name without ':'");
    refused_with(sync_vector, sizeof sync_vector - 1, 8, 0, "a SYNC with token 0");
    refused_with(sync_vector, sizeof sync_vector - 1, 16, 1, "a SYNC's second field not zero");
    /* Short frames: every length below a header, and an empty POST name. */
    for (size_t len = 0; len < 24; len++) CHECK(parse(post_vector, len, &f, buf) == -1, "%zu bytes accepted", len);
    n = cn_fast_post("", 1, out, sizeof out);
    CHECK(n == 24 && parse(out, n, &f, buf) == -1, "an empty name accepted");
    n = cn_fast_hello(1, 2, ":", out, sizeof out);
    CHECK(parse(out, n, &f, buf) == -1, "a HELLO name of ':' alone accepted");

    /* Tokens: 32 lowercase hex digits. */
    char token[CN_FAST_TOKEN_LEN + 1];
    CHECK(cn_fast_token_new(token) == 0 && cn_fast_token_valid(token), "a new token is not valid");
    CHECK(!cn_fast_token_valid("0123456789ABCDEF0123456789abcdef"), "upper case accepted");
    CHECK(!cn_fast_token_valid("0123456789abcdef0123456789abcde"), "31 digits accepted");
    CHECK(!cn_fast_token_valid("0123456789abcdef0123456789abcdef0"), "33 digits accepted");
    CHECK(cn_fast_bucket("a.b") <= CN_BUCKET_MASK, "a bucket past the mask");
    return check_result("test_fast_wire");
}
