/*
 * channels.c: the table of the fast path's channels (channel.h), as libdbus's open_funcs[] is of
 * its transports. The fast path uses the first; the generic suite (tests/test_channels.c) runs on
 * each. A new channel is one file beside channel_seqpacket.c and one line here.
 */
#include <stddef.h>
#include "channel.h"

const cn_channel_ops *const cn_channels[] = {
    &cn_channel_ring,
    &cn_channel_seqpacket,
    NULL,
};
