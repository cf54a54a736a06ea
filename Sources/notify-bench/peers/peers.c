/*
 * peers.c: one small pub/sub client for every system `notify-bench peers` compares, so each is
 * measured with the same roles, the same message and the same clock. Built by notify-bench with
 * cc against each system's own C client library from Debian.
 *
 *   peers SYSTEM ADDRESS ROLE [ARG...]
 *
 * SYSTEM: darwin (this project's C core), libdbus (raw libdbus: the floor), sdbus (sd-bus from
 *         libsystemd), zmq (PUB/SUB over ipc://), redis (hiredis, pub/sub), nats (cnats),
 *         mqtt (libmosquitto, QoS 0), uds (a plain Unix stream socket, our own framing).
 * ADDRESS: the bus address, ipc:// path stem, Unix socket path, or host:port of the server.
 * ROLE:
 *   echo                 answers every "ping" with a "pong"; "ready" once subscribed; until stdin closes
 *   ping N WARMUP        WARMUP then N round trips; prints "rtt NS" per round trip
 *   sub [N]              "ready" once subscribed; counts "bench" messages until N arrived or 2 s of
 *                        silence after the first; prints "received K first_ns last_ns cpu_us=U";
 *                        with no N, prints "got NS" (CLOCK_MONOTONIC) for each message, until stdin closes
 *   pub N [SUBS]         waits for SUBS subscribers where the system can tell (zmq, uds), then
 *                        publishes N "bench" messages as fast as it may; prints "sent N cpu_us=U"
 *   stamp M GAP_MS SUBS  publishes M "bench" messages GAP_MS apart, printing "sent NS" before each
 * Every message is the topic and an 8-byte payload; a subscriber matches the topic exactly.
 */
#define _GNU_SOURCE
#include <darwin_notify.h>
#include <dbus/dbus.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <mosquitto.h>
#include <nats/nats.h>
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static long cpu_us(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec * 1000000L + ru.ru_utime.tv_usec + ru.ru_stime.tv_sec * 1000000L + ru.ru_stime.tv_usec;
}

static void fail(const char *what) {
    fprintf(stderr, "peers: %s\n", what);
    exit(1);
}

static int stdin_closed(void) {
    struct pollfd p = { .fd = 0, .events = POLLIN };
    if (poll(&p, 1, 0) <= 0) return 0;
    char buf[64];
    return read(0, buf, sizeof buf) <= 0;
}

/* ---- the interface each system implements ---- */
typedef struct system_ops {
    void (*open)(const char *address, int publisher);
    void (*subscribe)(const char *topic);           /* returns once the server has it, where it says */
    void (*publish)(const char *topic);
    /* The topic of the next message ("ping", "pong", "bench"), or NULL after timeout_ms. */
    const char *(*next)(int timeout_ms);
    void (*await_subscribers)(int count);           /* publishers of zmq, uds and darwin; others: nothing */
    void (*flush)(void);
    /* Systems that deliver by callback on their own thread (darwin): counts `n` "bench" messages
     * in the callback itself, as a C user handles a notification and as the Swift subscriber
     * counts in its closure; returns the count once n arrived or after 2 s with nothing new.
     * NULL elsewhere: the caller's thread reads them with next(). */
    long (*count)(long n, uint64_t *first, uint64_t *last);
} system_ops;

static const char payload[8] = "12345678";

/* ---- messages received by callbacks (darwin, mqtt): a count per topic, so none is ever
 * dropped by us, and the moment the last one came off the wire ---- */
static _Atomic long pending[3];
static _Atomic uint64_t last_arrival; /* CLOCK_MONOTONIC ns of the last message read, every system */
static const char *const topics[3] = { "ping", "pong", "bench" };
static int topic_index(const char *name) {
    for (int i = 0; i < 3; i++) if (!strcmp(name, topics[i])) return i;
    return -1;
}
static const char *topic_of(const char *name) { int i = topic_index(name); return i < 0 ? NULL : topics[i]; }
static void arrived(const char *name) {
    int i = topic_index(name);
    if (i < 0) return;
    last_arrival = now_ns();
    pending[i]++;
}
static const char *take_pending(void) {
    for (int i = 0; i < 3; i++) {
        long n = pending[i];
        while (n > 0 && !atomic_compare_exchange_weak(&pending[i], &n, n - 1)) {}
        if (n > 0) return topics[i];
    }
    return NULL;
}
/* For systems read in the caller's thread: stamps the arrival as the message is returned. */
static const char *stamped(const char *topic) { if (topic) last_arrival = now_ns(); return topic; }

/* ---- darwin: this project's C core (a CNotify center, C callbacks) ---- */
static CNotify_center *dn;
static int echo_in_callback; /* the echo answers from the callback, as a C user would */
static long dn_target;       /* the subscriber's count, in the callback (dn_count), or 0 */
static long dn_received;     /* under dn_lock, as the two stamps */
static uint64_t dn_first, dn_last;
static pthread_mutex_t dn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dn_cond = PTHREAD_COND_INITIALIZER;
static void dn_cb(CNotify_center *c, void *o, const char *name, const void *a, const void *b) {
    (void)o; (void)a; (void)b;
    if (echo_in_callback && !strcmp(name, "ping")) { CNotify_center_post(c, "pong"); return; }
    if (dn_target && !strcmp(name, "bench")) {
        uint64_t now = now_ns();
        pthread_mutex_lock(&dn_lock); /* uncontended: the main thread waits on the cond */
        if (!dn_received++) dn_first = now;
        dn_last = now;
        if (dn_received == dn_target) pthread_cond_signal(&dn_cond);
        pthread_mutex_unlock(&dn_lock);
        return;
    }
    arrived(name);
    pthread_mutex_lock(&dn_lock);
    pthread_cond_signal(&dn_cond);
    pthread_mutex_unlock(&dn_lock);
}
static void dn_open(const char *address, int publisher) {
    (void)publisher;
    uint32_t status = 0;
    if (!(dn = CNotify_center_create(address, &status))) fail(CNotify_last_error());
}
static void dn_subscribe(const char *topic) {
    if (CNotify_center_add_observer(dn, NULL, dn_cb, topic) != 0) fail(CNotify_last_error());
}
static void dn_publish(const char *topic) {
    if (CNotify_center_post(dn, topic) != 0) fail(CNotify_last_error());
}
static const char *dn_next(int timeout_ms) {
    pthread_mutex_lock(&dn_lock);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) { dl.tv_sec++; dl.tv_nsec -= 1000000000L; }
    const char *t;
    while (!(t = take_pending()) && pthread_cond_timedwait(&dn_cond, &dn_lock, &dl) == 0) {}
    pthread_mutex_unlock(&dn_lock);
    return t;
}
static void dn_flush(void) { CNotify_center_flush(dn, 5000); }
static long dn_count(long n, uint64_t *first, uint64_t *last) {
    pthread_mutex_lock(&dn_lock);
    dn_target = n;
    while (dn_received < n) {
        long before = dn_received;
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += before ? 2 : 30;
        if (pthread_cond_timedwait(&dn_cond, &dn_lock, &dl) != 0 && dn_received == before)
            break; /* 2 s (30 before the first) with nothing new: the rest was lost */
    }
    long got = dn_received;
    *first = dn_first;
    *last = dn_last;
    pthread_mutex_unlock(&dn_lock);
    return got;
}
/* The fast path connects after a center's first post (docs/PROTOCOL.md "Fast path", Connecting):
 * a post of a name nobody observes, then until it posts directly to `count` observers (at most
 * 5 s), as zmq's publisher waits for its subscriptions: steady state, not discovery, is measured. */
static void dn_await_subscribers(int count) {
    if (CNotify_center_post(dn, "peers.warmup") != 0) fail(CNotify_last_error());
    for (int i = 0; i < 500; i++) {
        CNotify_fast_path_stats st;
        CNotify_center_get_fast_path_stats(dn, &st);
        if (st.peers >= (uint64_t)count) return;
        usleep(10000); /* polling a counter, in a benchmark's set-up */
    }
}

/* ---- libdbus: the raw floor, the same signal shape as DarwinNotify (docs/PROTOCOL.md) ---- */
static DBusConnection *ld;
static dbus_uint64_t ld_seq;
static void bucket_of(const char *name, char out[32]) {
    uint32_t h = 2166136261u;
    for (const char *p = name; *p; p++) { h ^= (unsigned char)*p; h *= 16777619u; }
    snprintf(out, 32, "org.darwinnotify.Notify.H%03x", h & 0xfffu);
}
static void ld_open(const char *address, int publisher) {
    (void)publisher;
    DBusError err;
    dbus_error_init(&err);
    ld = dbus_connection_open_private(address, &err);
    if (!ld || !dbus_bus_register(ld, &err)) fail(err.message ? err.message : "libdbus connect");
    dbus_connection_set_exit_on_disconnect(ld, FALSE);
}
static void ld_subscribe(const char *topic) {
    char rule[256], iface[32];
    bucket_of(topic, iface);
    snprintf(rule, sizeof rule, "type='signal',path='/org/darwinnotify',interface='%s',member='Post',arg0='%s'", iface, topic);
    DBusError err;
    dbus_error_init(&err);
    dbus_bus_add_match(ld, rule, &err);
    if (dbus_error_is_set(&err)) fail(err.message);
}
static void ld_publish(const char *topic) {
    char iface[32];
    bucket_of(topic, iface);
    DBusMessage *m = dbus_message_new_signal("/org/darwinnotify", iface, "Post");
    ld_seq++;
    dbus_message_append_args(m, DBUS_TYPE_STRING, &topic, DBUS_TYPE_UINT64, &ld_seq, DBUS_TYPE_INVALID);
    dbus_connection_send(ld, m, NULL);
    dbus_message_unref(m);
    dbus_connection_flush(ld);
}
static const char *ld_next(int timeout_ms) {
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
    for (;;) {
        DBusMessage *m;
        while ((m = dbus_connection_pop_message(ld))) {
            const char *name = NULL, *t = NULL;
            if (dbus_message_has_member(m, "Post") && dbus_message_get_args(m, NULL, DBUS_TYPE_STRING, &name, DBUS_TYPE_INVALID))
                t = topic_of(name);
            dbus_message_unref(m);
            if (t) return stamped(t);
        }
        int64_t left = (int64_t)(deadline - now_ns()) / 1000000;
        if (left <= 0 || !dbus_connection_read_write(ld, (int)left)) return NULL;
    }
}
static void ld_flush(void) { dbus_connection_flush(ld); }

/* ---- sdbus: the same signals through sd-bus ---- */
static sd_bus *sb;
static uint64_t sb_seq;
static const char *sb_last;
static int sb_handler(sd_bus_message *m, void *data, sd_bus_error *e) {
    (void)data; (void)e;
    const char *name = NULL;
    if (sd_bus_message_read(m, "s", &name) >= 0 && name) sb_last = topic_of(name);
    return 0;
}
static void sb_open(const char *address, int publisher) {
    (void)publisher;
    if (sd_bus_new(&sb) < 0 || sd_bus_set_address(sb, address) < 0 || sd_bus_set_bus_client(sb, 1) < 0 || sd_bus_start(sb) < 0)
        fail("sd-bus connect");
}
static void sb_subscribe(const char *topic) {
    char rule[256], iface[32];
    bucket_of(topic, iface);
    snprintf(rule, sizeof rule, "type='signal',path='/org/darwinnotify',interface='%s',member='Post',arg0='%s'", iface, topic);
    if (sd_bus_add_match(sb, NULL, rule, sb_handler, NULL) < 0) fail("sd-bus AddMatch");
}
static void sb_publish(const char *topic) {
    char iface[32];
    bucket_of(topic, iface);
    sb_seq++;
    if (sd_bus_emit_signal(sb, "/org/darwinnotify", iface, "Post", "st", topic, sb_seq) < 0) fail("sd-bus emit");
    sd_bus_flush(sb);
}
static const char *sb_next(int timeout_ms) {
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
    for (;;) {
        sb_last = NULL;
        int r = sd_bus_process(sb, NULL);
        if (r < 0) return NULL;
        if (sb_last) return stamped(sb_last);
        if (r > 0) continue;
        uint64_t now = now_ns();
        if (now >= deadline) return NULL;
        sd_bus_wait(sb, (deadline - now) / 1000);
    }
}
static void sb_flush(void) { sd_bus_flush(sb); }

/* ---- zmq: PUB/SUB over ipc:// (XPUB, so a publisher can wait for its subscribers) ---- */
static void *zctx, *zpub, *zsub;
static char zaddr_pub[256], zaddr_back[256];
static int z_is_pub;
static void z_open(const char *address, int publisher) {
    zctx = zmq_ctx_new();
    z_is_pub = publisher;
    /* Two channels: ADDRESS-a carries pub → sub ("bench", "ping"), ADDRESS-b the echo's "pong". */
    snprintf(zaddr_pub, sizeof zaddr_pub, "ipc://%s-a", address);
    snprintf(zaddr_back, sizeof zaddr_back, "ipc://%s-b", address);
}
static void z_make_pub(int back) {
    if (zpub) return;
    zpub = zmq_socket(zctx, ZMQ_XPUB);
    int hwm = 0; /* no high-water mark: never drop (ZeroMQ's lossless setting for PUB) */
    zmq_setsockopt(zpub, ZMQ_SNDHWM, &hwm, sizeof hwm);
    int verbose = 1; /* every subscriber's subscription, not only the first of each topic */
    zmq_setsockopt(zpub, ZMQ_XPUB_VERBOSE, &verbose, sizeof verbose);
    if (zmq_bind(zpub, back ? zaddr_back : zaddr_pub) != 0) fail(zmq_strerror(errno));
}
static void z_subscribe(const char *topic) {
    int back = !strcmp(topic, "pong");
    if (!zsub) {
        zsub = zmq_socket(zctx, ZMQ_SUB);
        int hwm = 0;
        zmq_setsockopt(zsub, ZMQ_RCVHWM, &hwm, sizeof hwm);
        if (zmq_connect(zsub, back ? zaddr_back : zaddr_pub) != 0) fail(zmq_strerror(errno));
    }
    zmq_setsockopt(zsub, ZMQ_SUBSCRIBE, topic, strlen(topic));
}
static void z_publish(const char *topic) {
    z_make_pub(!strcmp(topic, "pong"));
    zmq_send(zpub, topic, strlen(topic), ZMQ_SNDMORE);
    zmq_send(zpub, payload, sizeof payload, 0);
}
static const char *z_next(int timeout_ms) {
    zmq_pollitem_t item = { zsub, 0, ZMQ_POLLIN, 0 };
    if (zmq_poll(&item, 1, timeout_ms) <= 0) return NULL;
    char topic[16] = { 0 }, body[16];
    int n = zmq_recv(zsub, topic, sizeof topic - 1, 0);
    zmq_recv(zsub, body, sizeof body, 0);
    return n > 0 ? stamped(topic_of(topic)) : NULL;
}
static void z_await_subscribers(int count) {
    z_make_pub(0);
    for (int seen = 0; seen < count;) { /* each subscription arrives as a message on the XPUB */
        char buf[64];
        if (zmq_recv(zpub, buf, sizeof buf, 0) > 0 && buf[0] == 1) seen++;
    }
}
static void z_flush(void) {}

/* ---- redis: pub/sub through redis-server (Unix socket) ---- */
static redisContext *rpub, *rsub;
static void r_open(const char *address, int publisher) {
    (void)publisher;
    rpub = redisConnectUnix(address);
    rsub = redisConnectUnix(address);
    if (!rpub || rpub->err || !rsub || rsub->err) fail("redis connect");
}
static void r_subscribe(const char *topic) {
    redisReply *r = redisCommand(rsub, "SUBSCRIBE %s", topic); /* the reply confirms it */
    if (!r) fail("redis SUBSCRIBE");
    freeReplyObject(r);
}
/* Pipelined (Redis's documented way to go fast): replies are read 256 at a time, and at flush. */
static int r_outstanding;
static void r_read_replies(int keep) {
    while (r_outstanding > keep) {
        redisReply *r;
        if (redisGetReply(rpub, (void **)&r) != REDIS_OK) fail("redis PUBLISH");
        freeReplyObject(r);
        r_outstanding--;
    }
}
static void r_publish(const char *topic) {
    redisAppendCommand(rpub, "PUBLISH %s %b", topic, payload, sizeof payload);
    r_outstanding++;
    int done = 0;
    if (!strcmp(topic, "bench") && r_outstanding < 256) {
        if (redisBufferWrite(rpub, &done) != REDIS_OK) fail("redis write"); /* sent now, replies later */
        return;
    }
    r_read_replies(0);
}
static const char *r_next(int timeout_ms) {
    redisReply *r = NULL;
    if (redisGetReplyFromReader(rsub, (void **)&r) != REDIS_OK) return NULL;
    if (!r) {
        struct pollfd p = { .fd = rsub->fd, .events = POLLIN };
        if (poll(&p, 1, timeout_ms) <= 0) return NULL;
        if (redisBufferRead(rsub) != REDIS_OK || redisGetReplyFromReader(rsub, (void **)&r) != REDIS_OK || !r) return NULL;
    }
    const char *t = NULL;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[1]->str) t = topic_of(r->element[1]->str);
    freeReplyObject(r);
    return stamped(t);
}
static void r_flush(void) { r_read_replies(0); }

/* ---- nats: cnats, synchronous subscriptions ---- */
static natsConnection *nc;
static natsSubscription *nsubs[4];
static int nsub_count;
static void n_open(const char *address, int publisher) {
    (void)publisher;
    char url[300];
    snprintf(url, sizeof url, "nats://%s", address);
    natsOptions *opts = NULL;
    /* SendAsap: write each publish at once instead of batching it in the flusher thread (the
     * library's documented setting for latency over throughput). */
    if (natsOptions_Create(&opts) != NATS_OK || natsOptions_SetURL(opts, url) != NATS_OK ||
        natsOptions_SetSendAsap(opts, true) != NATS_OK || natsConnection_Connect(&nc, opts) != NATS_OK)
        fail("nats connect");
    natsOptions_Destroy(opts);
}
static void n_subscribe(const char *topic) {
    if (natsConnection_SubscribeSync(&nsubs[nsub_count++], nc, topic) != NATS_OK) fail("nats subscribe");
    natsSubscription_SetPendingLimits(nsubs[nsub_count - 1], -1, -1); /* no slow-consumer drops */
    natsConnection_Flush(nc); /* the server has the subscription */
}
static void n_publish(const char *topic) {
    if (natsConnection_Publish(nc, topic, payload, sizeof payload) != NATS_OK) fail("nats publish");
}
static const char *n_next(int timeout_ms) {
    natsMsg *m = NULL;
    /* One subscription per role in practice; the first that has a message. */
    for (int i = 0; i < nsub_count; i++) {
        if (natsSubscription_NextMsg(&m, nsubs[i], i == nsub_count - 1 ? timeout_ms : 0) == NATS_OK && m) {
            const char *t = topic_of(natsMsg_GetSubject(m));
            natsMsg_Destroy(m);
            return stamped(t);
        }
    }
    return NULL;
}
static void n_flush(void) { natsConnection_Flush(nc); }

/* ---- mqtt: libmosquitto, QoS 0 ---- */
static struct mosquitto *mq;
static int mq_subscribed;
static void mq_on_message(struct mosquitto *m, void *o, const struct mosquitto_message *msg) {
    (void)m; (void)o;
    arrived(msg->topic);
}
static void mq_on_subscribe(struct mosquitto *m, void *o, int mid, int n, const int *q) { (void)m; (void)o; (void)mid; (void)n; (void)q; mq_subscribed++; }
static void mq_open(const char *address, int publisher) {
    (void)publisher;
    mosquitto_lib_init();
    mq = mosquitto_new(NULL, true, NULL);
    mosquitto_message_callback_set(mq, mq_on_message);
    mosquitto_subscribe_callback_set(mq, mq_on_subscribe);
    char host[256];
    snprintf(host, sizeof host, "%s", address);
    char *colon = strrchr(host, ':');
    if (!colon) fail("mqtt address is host:port");
    *colon = '\0';
    if (mosquitto_connect(mq, host, atoi(colon + 1), 60) != MOSQ_ERR_SUCCESS) fail("mqtt connect");
}
static void mq_subscribe(const char *topic) {
    int before = mq_subscribed;
    mosquitto_subscribe(mq, NULL, topic, 0);
    while (mq_subscribed == before) mosquitto_loop(mq, 100, 1); /* until SUBACK */
}
static void mq_publish(const char *topic) {
    mosquitto_publish(mq, NULL, topic, sizeof payload, payload, 0, false);
    mosquitto_loop_write(mq, 1);
}
static const char *mq_next(int timeout_ms) {
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
    const char *t;
    while (!(t = take_pending())) {
        uint64_t now = now_ns();
        if (now >= deadline) return NULL;
        mosquitto_loop(mq, (int)((deadline - now) / 1000000) + 1, 1);
    }
    return t;
}
static void mq_flush(void) {
    while (mosquitto_want_write(mq)) mosquitto_loop_write(mq, 1);
}

/* ---- uds: a plain Unix stream socket and our own framing (8-byte topic, 8-byte payload).
 * The publisher listens at ADDRESS; each subscriber connects and says one byte (its
 * subscription). An echo answers on the connection its ping came from, so "pong" needs no
 * listener of its own. ---- */
static int u_listen = -1, u_peers[256], u_npeers, u_conn = -1;
static char u_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static char u_buf[65536];
static size_t u_have;
static void u_open(const char *address, int publisher) {
    (void)publisher;
    if (strlen(address) >= sizeof u_path) fail("uds path too long");
    memcpy(u_path, address, strlen(address) + 1);
}
static void u_make_listener(void) {
    if (u_listen >= 0) return;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    memcpy(sa.sun_path, u_path, sizeof u_path);
    unlink(u_path);
    u_listen = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (bind(u_listen, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(u_listen, 512) != 0) fail("uds listen");
}
static void u_subscribe(const char *topic) {
    if (!strcmp(topic, "pong")) { u_make_listener(); return; } /* the echo answers on our connection */
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    memcpy(sa.sun_path, u_path, sizeof u_path);
    for (int i = 0; u_conn < 0; i++) { /* the publisher may not listen yet */
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) { u_conn = fd; break; }
        close(fd);
        if (i == 6000) fail("uds connect");
        usleep(5000);
    }
    char hello = 1;
    if (write(u_conn, &hello, 1) != 1) fail("uds hello");
}
static void u_accept_pending(int wait_ms) {
    struct pollfd p = { .fd = u_listen, .events = POLLIN };
    while (poll(&p, 1, wait_ms) > 0 && u_npeers < 256) {
        int fd = accept4(u_listen, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) break;
        char hello;
        if (read(fd, &hello, 1) == 1) u_peers[u_npeers++] = fd;
        wait_ms = 0;
    }
}
static void write_all(int fd, const char *buf, size_t len) {
    for (size_t off = 0; off < len;) { /* blocking: a slow reader slows us, loses nothing */
        ssize_t w = write(fd, buf + off, len - off);
        if (w <= 0) return;
        off += (size_t)w;
    }
}
static void u_publish(const char *topic) {
    char frame[16] = { 0 };
    snprintf(frame, 8, "%s", topic);
    memcpy(frame + 8, payload, 8);
    if (!strcmp(topic, "pong")) { write_all(u_conn, frame, sizeof frame); return; }
    u_make_listener();
    u_accept_pending(0);
    for (int i = 0; i < u_npeers; i++) write_all(u_peers[i], frame, sizeof frame);
}
static const char *u_next(int timeout_ms) {
    static char topic[8];
    int fd = u_conn >= 0 ? u_conn : u_npeers ? u_peers[0] : -1;
    for (;;) {
        if (u_have >= 16) {
            memcpy(topic, u_buf, 8);
            memmove(u_buf, u_buf + 16, u_have - 16);
            u_have -= 16;
            return stamped(topic_of(topic));
        }
        if (fd < 0) { u_accept_pending(timeout_ms); return NULL; }
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, timeout_ms) <= 0) return NULL;
        ssize_t r = read(fd, u_buf + u_have, sizeof u_buf - u_have);
        if (r <= 0) return NULL;
        u_have += (size_t)r;
    }
}
static void u_await_subscribers(int count) {
    u_make_listener();
    while (u_npeers < count) u_accept_pending(1000);
}
static void u_flush(void) {}

static void nothing(int count) { (void)count; }

static const struct { const char *name; system_ops ops; } systems[] = {
    { "darwin", { dn_open, dn_subscribe, dn_publish, dn_next, dn_await_subscribers, dn_flush, dn_count } },
    { "libdbus", { ld_open, ld_subscribe, ld_publish, ld_next, nothing, ld_flush, NULL } },
    { "sdbus", { sb_open, sb_subscribe, sb_publish, sb_next, nothing, sb_flush, NULL } },
    { "zmq", { z_open, z_subscribe, z_publish, z_next, z_await_subscribers, z_flush, NULL } },
    { "redis", { r_open, r_subscribe, r_publish, r_next, nothing, r_flush, NULL } },
    { "nats", { n_open, n_subscribe, n_publish, n_next, nothing, n_flush, NULL } },
    { "mqtt", { mq_open, mq_subscribe, mq_publish, mq_next, nothing, mq_flush, NULL } },
    { "uds", { u_open, u_subscribe, u_publish, u_next, u_await_subscribers, u_flush, NULL } },
};

/* ---- the roles, the same for every system ---- */

static int role_echo(const system_ops *s) {
    echo_in_callback = 1;
    s->subscribe("ping");
    printf("ready\n");
    fflush(stdout);
    while (!stdin_closed()) {
        const char *t = s->next(100);
        if (t && !strcmp(t, "ping")) s->publish("pong");
    }
    return 0;
}

static int role_ping(const system_ops *s, int n, int warmup) {
    s->subscribe("pong");
    s->await_subscribers(1); /* the echo's subscription to "ping" (zmq, uds) */
    for (int i = 0; i < warmup + n; i++) {
        uint64_t t0 = now_ns();
        const char *t = NULL;
        /* A lost ping (a subscription not yet in place) is sent again: only answered trips count. */
        for (int tries = 0; !(t && !strcmp(t, "pong")); tries++) {
            if (tries == 50) fail("no pong after 50 pings");
            if (!t) { t0 = now_ns(); s->publish("ping"); }
            t = s->next(200);
        }
        if (i >= warmup) printf("rtt %llu\n", (unsigned long long)(last_arrival - t0));
    }
    return 0;
}

static int role_sub(const system_ops *s, long n) {
    s->subscribe("bench");
    printf("ready\n");
    fflush(stdout);
    if (n <= 0) { /* fan-out: a time stamp per message */
        while (!stdin_closed()) {
            const char *t = s->next(100);
            if (t && !strcmp(t, "bench")) { printf("got %llu\n", (unsigned long long)last_arrival); fflush(stdout); }
        }
        return 0;
    }
    long received = 0;
    uint64_t first = 0, last = 0;
    long cpu0 = cpu_us();
    if (s->count) received = s->count(n, &first, &last);
    while (!s->count && received < n) {
        const char *t = s->next(received ? 2000 : 30000);
        if (!t) break; /* 2 s of silence: the rest was lost */
        if (strcmp(t, "bench")) continue;
        last = last_arrival;
        if (!received++) first = last;
    }
    printf("received %ld %llu %llu cpu_us=%ld\n", received, (unsigned long long)first, (unsigned long long)last, cpu_us() - cpu0);
    return 0;
}

static int role_pub(const system_ops *s, long n, int subs) {
    s->await_subscribers(subs);
    long cpu0 = cpu_us();
    for (long i = 0; i < n; i++) s->publish("bench");
    s->flush();
    printf("sent %ld cpu_us=%ld\n", n, cpu_us() - cpu0);
    fflush(stdout);
    /* Stay until told: a broker-less system (zmq, uds) must not close before the data is read. */
    while (!stdin_closed()) usleep(10000);
    return 0;
}

static int role_stamp(const system_ops *s, int m, int gap_ms, int subs) {
    s->await_subscribers(subs);
    for (int i = 0; i < m; i++) {
        usleep((useconds_t)gap_ms * 1000); /* spacing of the load, not synchronisation */
        printf("sent %llu\n", (unsigned long long)now_ns());
        fflush(stdout);
        s->publish("bench");
        s->flush();
    }
    while (!stdin_closed()) usleep(10000);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: peers SYSTEM ADDRESS echo|ping N W|sub [N]|pub N [SUBS]|stamp M GAP_MS SUBS\n"); return 64; }
    const system_ops *s = NULL;
    for (size_t i = 0; i < sizeof systems / sizeof systems[0]; i++)
        if (!strcmp(systems[i].name, argv[1])) s = &systems[i].ops;
    if (!s) { fprintf(stderr, "peers: unknown system %s\n", argv[1]); return 64; }
    const char *role = argv[3];
    int publisher = !strcmp(role, "pub") || !strcmp(role, "stamp");
    s->open(argv[2], publisher);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(role, "echo")) return role_echo(s);
    if (!strcmp(role, "ping") && argc >= 6) return role_ping(s, atoi(argv[4]), atoi(argv[5]));
    if (!strcmp(role, "sub")) return role_sub(s, argc >= 5 ? atol(argv[4]) : 0);
    if (!strcmp(role, "pub") && argc >= 5) return role_pub(s, atol(argv[4]), argc >= 6 ? atoi(argv[5]) : 0);
    if (!strcmp(role, "stamp") && argc >= 7) return role_stamp(s, atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
    fprintf(stderr, "peers: bad role or arguments\n");
    return 64;
}
