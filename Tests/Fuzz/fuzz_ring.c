/*
 * fuzz_ring.c: libFuzzer over the ring channel's reader (transport/fast/channel_ring.c,
 * docs/PROTOCOL.md "The ring"): what a poster of any user writes into the memory it shares with
 * an endpoint. Each input is a ring as a hostile poster leaves it: the tail the reader starts at,
 * the head it publishes, and the data's bytes. The endpoint takes a good setup (this fuzzer's
 * memfd and an eventfd, over a real connection) and reads the connection until it is told of no
 * more; what it reads must be exactly what a reader written from the page reads (the reference
 * below): the same frames, and the connection ended exactly when the page says a ring lies. ASan
 * watches that it reads no byte outside the ring. Built and run by .ci/fuzz.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include "../../Shims/CNotify/transport/fast/channel.h"

#define HEADER 4096u
#define DATA 32768u
#define BYTES (HEADER + DATA)

static cn_channel *listener;
static char token[33];
static int memfd = -1;
static unsigned char *map;

static void once(void) {
    if (listener) return;
    unsigned char raw[16];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) abort();
    for (int i = 0; i < 16; i++) {
        token[2 * i] = "0123456789abcdef"[raw[i] >> 4];
        token[2 * i + 1] = "0123456789abcdef"[raw[i] & 15];
    }
    token[32] = '\0';
    listener = cn_channel_ring.listen(token);
    memfd = memfd_create("fuzz-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (!listener || memfd < 0 || ftruncate(memfd, BYTES) != 0
        || fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        abort();
    map = mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (map == MAP_FAILED) abort();
}

static int send_setup(int sock, int bell) {
    unsigned char body[16];
    size_t n = 0;
    if (CNotify_protocol_fast_ring_setup(body, sizeof body, &n) != 0 || n != 16) abort();
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(2 * sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = { body, 16 };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf };
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
    int fds[2] = { memfd, bell };
    memcpy(CMSG_DATA(cm), fds, sizeof fds);
    return sendmsg(sock, &msg, MSG_NOSIGNAL) == 16 ? 0 : -1;
}

/* The reader of docs/PROTOCOL.md "The ring", written from the page: the frames from `pos` to
 * `head` (their stored lengths and offsets), and whether the ring lies. */
typedef struct expected {
    unsigned count;
    uint32_t len[1100];
    uint64_t at[1100];
    int lies;
} expected;

static void reference(uint64_t pos, uint64_t head, expected *e) {
    e->count = 0;
    e->lies = head < pos || head - pos > DATA;
    while (!e->lies && head != pos) {
        if (head - pos < 4) { e->lies = 1; break; }
        uint32_t len = 0;
        for (int i = 0; i < 4; i++) len |= (uint32_t)map[HEADER + ((pos + (uint64_t)i) % DATA)] << (8 * i);
        uint32_t stored = len > CN_FAST_FRAME_MAX ? CN_FAST_FRAME_MAX + 1 : len;
        if (len == 0 || len > 65536 || head - pos - 4 < stored) { e->lies = 1; break; }
        e->len[e->count] = stored;
        e->at[e->count++] = pos + 4;
        pos += 4 + stored;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    once();
    if (size < 5) return 0;
    /* [u16 tail's low bits][u16 distance][u8 flags][the data's bytes] */
    uint64_t tail = (uint64_t)data[0] | (uint64_t)data[1] << 8, distance = (uint64_t)data[2] | (uint64_t)data[3] << 8;
    uint8_t flags = data[4];
    if (flags & 2) tail |= 0xffffffffffff0000ULL; /* near the end of the numbers: the head wraps past 2^64 */
    uint64_t head = flags & 1 ? tail - distance - 1 : tail + distance;
    memset(map, 0, BYTES);
    size_t n = size - 5 < DATA ? size - 5 : DATA;
    memcpy(map + HEADER, data + 5, n);
    __atomic_store_n((uint64_t *)(map + 64), tail, __ATOMIC_RELEASE);
    __atomic_store_n((uint64_t *)map, head, __ATOMIC_RELEASE);
    expected e;
    reference(tail, head, &e);

    cn_channel_peer peer;
    cn_channel *raw = cn_channel_seqpacket.connect(token, 0, &peer);
    int bell = eventfd(0, EFD_CLOEXEC);
    if (!raw || bell < 0 || send_setup(raw->fd, bell) != 0) abort();
    close(bell);
    struct pollfd p = { .fd = listener->fd, .events = POLLIN };
    cn_channel *obs = poll(&p, 1, 5000) == 1 ? cn_channel_ring.accept(listener, &peer) : NULL;
    if (!obs) abort();
    static cn_channel_frames got;
    unsigned seen = 0;
    int closed = 0, reads = 0;
    do {
        cn_channel_ring.read(obs, CN_CHANNEL_BATCH, &got);
        if (reads++ == 0 && !got.rewatch) abort(); /* the good setup refused */
        for (unsigned i = 0; i < got.count; i++, seen++) {
            if (seen >= e.count || got.len[i] != e.len[seen]) abort(); /* a frame the page does not have */
            for (uint32_t k = 0; k < got.len[i]; k++)
                if (got.data[i][k] != map[HEADER + ((e.at[seen] + k) % DATA)]) abort();
        }
        closed = got.closed;
    } while (!closed && got.count == CN_CHANNEL_BATCH);
    if (seen != e.count || closed != e.lies) abort(); /* frames missed, or a lie taken (or an honest ring refused) */
    /* The tail it published is past every frame it read, and its own (only the reader writes it). */
    if (!e.lies && __atomic_load_n((uint64_t *)(map + 64), __ATOMIC_ACQUIRE) != head) abort();
    cn_channel_ring.close(obs);
    cn_channel_seqpacket.close(raw);
    return 0;
}
