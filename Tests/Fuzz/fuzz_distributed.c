/*
 * fuzz_distributed.c: libFuzzer over the Distributed Post's reader (transport/bus/bus_distributed.c
 * through CNotify_protocol_parse_distributed; docs/PROTOCOL.md "Distributed notifications"), which
 * reads what any client on the bus may send. Every input is read as a receiver reads it; what is
 * taken must keep the bounds the contract promises (a name and object within CNOTIFY_NAME_MAX, a
 * userInfo that is a dictionary within the depth and weight bounds, known options) and must build
 * back into a message that reads the same. Built and run by .ci/fuzz under ASan+UBSan; its seeds
 * are Tests/Fuzz/corpus/distributed/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../../Shims/CNotify/transport/bus/bus.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    char name[CNOTIFY_NAME_MAX + 1], object[CNOTIFY_NAME_MAX + 1];
    CNotify_plist *info = NULL;
    uint32_t options = 0;
    if (CNotify_protocol_parse_distributed((const char *)data, (int)size, name, object, &info, &options) != NOTIFY_STATUS_OK) {
        if (info) abort(); /* a refusal hands nothing out */
        return 0;
    }
    if (!name[0] || strlen(name) > CNOTIFY_NAME_MAX || strlen(object) > CNOTIFY_NAME_MAX) abort();
    if (options & ~CNOTIFY_DISTRIBUTED_OPTIONS_KNOWN) abort();
    if (info && (CNotify_plist_type_of(info) != CNOTIFY_PLIST_DICTIONARY || cn_plist_depth(info) > CNOTIFY_PLIST_MAX_DEPTH
                 || cn_plist_weight(info) > CNOTIFY_PLIST_MAX_BYTES))
        abort();
    /* Built again and read again: the same name, object and options. */
    char *bytes = NULL;
    int len = 0;
    if (CNotify_protocol_build_distributed(name, object[0] ? object : NULL, info, 1, 1, options, &bytes, &len) != NOTIFY_STATUS_OK)
        abort();
    char name2[CNOTIFY_NAME_MAX + 1], object2[CNOTIFY_NAME_MAX + 1];
    CNotify_plist *info2 = NULL;
    uint32_t options2 = 0;
    if (CNotify_protocol_parse_distributed(bytes, len, name2, object2, &info2, &options2) != NOTIFY_STATUS_OK) abort();
    if (strcmp(name, name2) || strcmp(object, object2) || options != options2 || !info != !info2) abort();
    CNotify_protocol_free(bytes);
    CNotify_plist_free(info);
    CNotify_plist_free(info2);
    return 0;
}
