/*
 * fast_wire.c: the fast path's contract on the wire (docs/PROTOCOL.md "Fast path"): endpoint
 * tokens (the channel makes an address of one: channel_seqpacket.c) and the frames a poster sends.
 * Pure functions: no descriptor, no lock.
 */
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include "fast.h"

int cn_fast_token_new(char out[CN_FAST_TOKEN_LEN + 1]) {
    unsigned char raw[CN_FAST_TOKEN_LEN / 2];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) return -1;
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof raw; i++) {
        out[2 * i] = digits[raw[i] >> 4];
        out[2 * i + 1] = digits[raw[i] & 0xf];
    }
    out[CN_FAST_TOKEN_LEN] = '\0';
    return 0;
}

/* Exactly 32 lowercase hex digits: an announced token can name no other socket than one of ours
 * (no path, no other abstract name), whatever a peer puts in its announcement. */
int cn_fast_token_valid(const char *token) {
    size_t i = 0;
    for (; token[i]; i++) {
        char c = token[i];
        if (i >= CN_FAST_TOKEN_LEN || !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 0;
    }
    return i == CN_FAST_TOKEN_LEN;
}

unsigned cn_fast_bucket(const char *name) { return cn_fnv1a32(name) & CN_BUCKET_MASK; }

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
CN_HOT static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Every frame: u8 type, u8 version, u16 zero, u32 length of the text, two u64, the text (no NUL),
 * little-endian. HELLO: origin, token, the poster's unique name. POST: seq, zero, the name.
 * SYNC: token, zero, no text (a barrier again, after a post the socket had no room for). */
#define HEADER 24

static size_t frame(int type, uint64_t a, uint64_t b, const char *text, unsigned char *out, size_t cap) {
    size_t len = strlen(text);
    if (HEADER + len > cap) return 0;
    out[0] = (unsigned char)type;
    out[1] = CN_FAST_WIRE_VERSION;
    out[2] = out[3] = 0;
    put_u32(out + 4, (uint32_t)len);
    put_u64(out + 8, a);
    put_u64(out + 16, b);
    memcpy(out + HEADER, text, len);
    return HEADER + len;
}

size_t cn_fast_hello(uint64_t origin, uint64_t token, const char *unique_name, unsigned char *out, size_t cap) {
    return frame(CN_FAST_HELLO, origin, token, unique_name, out, cap);
}

size_t cn_fast_sync(uint64_t token, unsigned char *out, size_t cap) { return frame(CN_FAST_SYNC, token, 0, "", out, cap); }

size_t cn_fast_post(const char *name, uint64_t seq, unsigned char *out, size_t cap) {
    return frame(CN_FAST_POST, seq, 0, name, out, cap);
}

/* `buf` has room for one byte past `len`: the text is NUL-terminated in place. */
CN_HOT int cn_fast_parse(unsigned char *buf, size_t len, cn_fast_frame *out) {
    if (len < HEADER || buf[1] != CN_FAST_WIRE_VERSION || buf[2] || buf[3]) return -1;
    uint32_t tlen = get_u32(buf + 4);
    if (tlen != len - HEADER) return -1;
    char *text = (char *)buf + HEADER;
    text[tlen] = '\0';
    if (memchr(text, '\0', tlen)) return -1; /* a NUL inside: not one string */
    memset(out, 0, sizeof *out);
    out->type = buf[0];
    switch (buf[0]) {
    case CN_FAST_HELLO:
        /* A unique name: ':' and at most 255 bytes (D-Bus). */
        if (tlen < 2 || tlen > 255 || text[0] != ':') return -1;
        out->origin = get_u64(buf + 8);
        out->token = get_u64(buf + 16);
        out->unique_name = text;
        return out->origin && out->token ? 0 : -1;
    case CN_FAST_SYNC:
        if (tlen != 0 || get_u64(buf + 16)) return -1;
        out->token = get_u64(buf + 8);
        return out->token ? 0 : -1;
    case CN_FAST_POST:
        if (tlen == 0 || tlen > CNOTIFY_NAME_MAX || get_u64(buf + 16) || !cn_utf8_valid(text)) return -1;
        out->seq = get_u64(buf + 8);
        out->name = text;
        return out->seq ? 0 : -1;
    default:
        return -1;
    }
}

/* ---- the contract for tools and other implementations (darwin_notify.h) ---- */

uint32_t CNotify_protocol_fast_address(const char *token, char *out, size_t len) {
    cn_clear_error();
    if (!token || !out) { cn_set_error("token or buffer is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    if (!cn_fast_token_valid(token)) { cn_set_error("a token is 32 lowercase hex digits"); return NOTIFY_STATUS_INVALID_REQUEST; }
    if (cn_channels[0]->address(token, out, len) != 0) { /* the fast path's channel (channels.c) */
        cn_set_error("the buffer is too small");
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    return NOTIFY_STATUS_OK;
}

/* A frame the exports built (`n` bytes, 0: no room), read back as a receiver reads it. */
static uint32_t as_received(const unsigned char *out, size_t n, size_t *out_len, const char *refusal) {
    cn_fast_frame check;
    unsigned char copy[CN_FAST_FRAME_MAX + 1];
    if (!n || n > CN_FAST_FRAME_MAX || (memcpy(copy, out, n), cn_fast_parse(copy, n, &check) != 0)) {
        cn_set_error("%s", refusal);
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    *out_len = n;
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_protocol_fast_hello(uint64_t origin, uint64_t token, const char *unique_name, unsigned char *out,
                                     size_t cap, size_t *out_len) {
    cn_clear_error();
    if (!unique_name || !out || !out_len) { cn_set_error("an argument is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    return as_received(out, cn_fast_hello(origin, token, unique_name, out, cap), out_len,
                       "not a HELLO a receiver accepts (origin and token non-zero, a unique name, room in the buffer)");
}

uint32_t CNotify_protocol_fast_post(const char *name, uint64_t seq, unsigned char *out, size_t cap, size_t *out_len) {
    cn_clear_error();
    if (!name || !out || !out_len) { cn_set_error("an argument is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    return as_received(out, cn_fast_post(name, seq, out, cap), out_len,
                       "not a POST a receiver accepts (a name of 1 to 512 bytes of UTF-8, a sequence, room in the buffer)");
}
