/*
 * test_names.c: the names policy (names.c): UTF-8 as D-Bus takes it, a name's bounds, `self.`,
 * `user.uid.N` (a number past the uid range is nobody's), namespaces (elements, digits, length).
 */
#include <string.h>
#include "../base.h"
#include "check.h"

int main(void) {
    /* UTF-8: well formed, shortest form, no surrogate, nothing past U+10FFFF. */
    CHECK(cn_utf8_valid("com.example.é"), "é refused");
    CHECK(cn_utf8_valid("\xf0\x9f\x98\x80"), "U+1F600 refused");
    CHECK(!cn_utf8_valid("\xc0\xaf"), "an overlong '/' accepted");
    CHECK(!cn_utf8_valid("\xed\xa0\x80"), "a surrogate accepted");
    CHECK(!cn_utf8_valid("\xf4\x90\x80\x80"), "U+110000 accepted");
    CHECK(!cn_utf8_valid("\xe2\x82"), "a truncated sequence accepted");
    CHECK(!cn_utf8_valid("\xff"), "0xff accepted");
    CHECK(!cn_utf8_valid("\x80"), "a lone continuation accepted");

    /* A name: 1 to CNOTIFY_NAME_MAX bytes of UTF-8; NULL is INVALID_NAME, as Libnotify. */
    char name[CNOTIFY_NAME_MAX + 2];
    memset(name, 'a', sizeof name - 1);
    name[CNOTIFY_NAME_MAX] = 0;
    CHECK(CNotify_validate_name(name) == NOTIFY_STATUS_OK, "the longest name refused");
    name[CNOTIFY_NAME_MAX] = 'a';
    name[CNOTIFY_NAME_MAX + 1] = 0;
    CHECK(CNotify_validate_name(name) == NOTIFY_STATUS_INVALID_NAME, "a name one byte too long accepted");
    CHECK(CNotify_validate_name("") == NOTIFY_STATUS_INVALID_NAME, "an empty name accepted");
    CHECK(CNotify_validate_name(NULL) == NOTIFY_STATUS_INVALID_NAME, "NULL not INVALID_NAME");
    CHECK(CNotify_validate_name("a\xff") == NOTIFY_STATUS_INVALID_NAME, "bad UTF-8 accepted");
    CHECK(CNotify_validate_name("anything goes: spaces, / and *") == NOTIFY_STATUS_OK, "a free-form name refused");

    /* self. */
    CHECK(cn_is_self_name("self.x") && !cn_is_self_name("self") && !cn_is_self_name("selfish.x"), "self. names");
    CHECK(cn_is_self_namespace("self") && cn_is_self_namespace("self.a") && !cn_is_self_namespace("selfish"), "self namespaces");

    /* user.uid.N: N's digits; none is root; past the uid range, nobody's. */
    uid_t uid = 42;
    CHECK(cn_restricted_uid("user.uid.1000.x", &uid) == 1 && uid == 1000, "user.uid.1000.x");
    CHECK(cn_restricted_uid("user.uid.", &uid) == 1 && uid == 0, "user.uid. is root's");
    CHECK(cn_restricted_uid("user.uid.4294967295", &uid) == -1, "(uid_t)-1 is a uid");
    CHECK(cn_restricted_uid("user.uid.18446744073709617150", &uid) == -1, "a huge number wrapped onto a uid");
    CHECK(cn_restricted_uid("user.uidx", &uid) == 0 && cn_restricted_uid("com.user.uid.1", &uid) == 0, "not restricted");
    uint32_t out = 7;
    CHECK(CNotify_name_restricted_uid("user.uid.7", &out) == 1 && out == 7, "the public form");
    CHECK(CNotify_name_restricted_uid(NULL, &out) == 0, "NULL restricted");

    /* Namespaces. */
    const char *good[] = { "com", "com.example", "a-b.c_d", "user.uid.1000", "A.B9" };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECK(cn_validate_namespace(good[i]) == NOTIFY_STATUS_OK, "'%s' refused", good[i]);
    const char *bad[] = { "", ".", "com.", ".com", "com..example", "9com", "com.ex ample", "com/x", "com.é" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(cn_validate_namespace(bad[i]) == NOTIFY_STATUS_INVALID_NAME, "'%s' accepted", bad[i]);
    CHECK(cn_validate_namespace(NULL) == NOTIFY_STATUS_NULL_INPUT, "NULL namespace");
    char ns[258];
    memset(ns, 'a', 255);
    ns[255] = 0;
    CHECK(cn_validate_namespace(ns) == NOTIFY_STATUS_OK, "255 bytes refused");
    ns[255] = 'a';
    ns[256] = 0;
    CHECK(cn_validate_namespace(ns) == NOTIFY_STATUS_INVALID_NAME, "256 bytes accepted");
    return check_result("test_names");
}
