/*
 * fuzz_names.c: libFuzzer over the names policy (base/names.c): every name and namespace a
 * caller or a peer hands in. What is taken as a name is 1 to CNOTIFY_NAME_MAX bytes of UTF-8;
 * what is taken as a namespace is dot-separated elements of [A-Za-z0-9_-], none empty, the first
 * not starting with a digit, at most 255 bytes; user.uid.N never wraps onto a uid. Built and run
 * by .ci/fuzz under ASan+UBSan; its seeds are Tests/Fuzz/corpus/names/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../../Shims/CNotify/base/base.h"

static int namespace_by_hand(const char *s) {
    size_t len = strlen(s);
    if (len == 0 || len > 255 || (s[0] >= '0' && s[0] <= '9')) return 0;
    size_t element = 0;
    for (size_t i = 0; i <= len; i++) {
        char c = s[i];
        if (c == '.' || c == 0) {
            if (element == 0) return 0;
            element = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-') {
            element++;
        } else {
            return 0;
        }
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    size_t len = strlen(s);
    if (CNotify_validate_name(s) == NOTIFY_STATUS_OK && (len == 0 || len > CNOTIFY_NAME_MAX || !cn_utf8_valid(s))) abort();
    int ns = cn_validate_namespace(s) == NOTIFY_STATUS_OK;
    if (ns != namespace_by_hand(s)) abort();
    uid_t uid = 0;
    int r = cn_restricted_uid(s, &uid);
    if (r == 1 && uid == (uid_t)-1) abort();
    if ((r != 0) != (strncmp(s, "user.uid.", 9) == 0)) abort();
    free(s);
    return 0;
}
