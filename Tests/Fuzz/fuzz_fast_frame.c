/*
 * fuzz_fast_frame.c: libFuzzer over the fast path's frame parser (transport/fast/fast_wire.c,
 * docs/PROTOCOL.md "Fast path", "Frames"), the one parser a peer that is not on the bus can reach.
 * Every input is parsed as a receiver parses it; what parses must be one of the three frames, with
 * the fields the contract promises, and must build back to the same bytes. Built and run by
 * .ci/fuzz under ASan+UBSan (clang -fsanitize=fuzzer,address,undefined).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../../Shims/CNotify/transport/fast/fast.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > CN_FAST_FRAME_MAX) return 0; /* the reader never hands more (MSG_TRUNC: refused) */
    unsigned char buf[CN_FAST_FRAME_MAX + 1];
    memcpy(buf, data, size);
    cn_fast_frame fr;
    if (cn_fast_parse(buf, size, &fr) != 0) return 0;
    unsigned char again[CN_FAST_FRAME_MAX + 1];
    size_t n = 0;
    switch (fr.type) {
    case CN_FAST_HELLO:
        if (!fr.origin || !fr.token || fr.unique_name[0] != ':' || strlen(fr.unique_name) > 255) abort();
        n = cn_fast_hello(fr.origin, fr.token, fr.unique_name, again, sizeof again);
        break;
    case CN_FAST_POST:
        if (!fr.seq || !fr.name[0] || strlen(fr.name) > CNOTIFY_NAME_MAX || !cn_utf8_valid(fr.name)) abort();
        n = cn_fast_post(fr.name, fr.seq, again, sizeof again);
        break;
    case CN_FAST_SYNC:
        if (!fr.token) abort();
        n = cn_fast_sync(fr.token, again, sizeof again);
        break;
    default:
        abort(); /* a type the contract does not have was accepted */
    }
    if (n != size || memcmp(again, data, size) != 0) abort(); /* one spelling per frame */
    return 0;
}
