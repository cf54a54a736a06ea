/*
 * bus_wire.c: the Post signal of docs/PROTOCOL.md ("The signal"): built for sending, parsed on
 * receipt, and both offered to other implementations through CNotify_protocol_build_post and
 * CNotify_protocol_parse_post. Body: `s name`, `t sequence`, for a user.uid.N name `h credential`,
 * then `t origin`, then, for a copy that stands for several posts, `u count`; a receiver reads
 * what is there and ignores what it does not know.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bus.h"

/* The slow way, and the only one for a credential: libdbus rewrites the header's signature field
 * for each argument appended (measured here: 8-10 µs a post, most of a poster's time). */
static DBusMessage *build_new(const char *name, uint64_t seq, int credential_fd, uint64_t origin, uint32_t count) {
    char iface[CN_BUCKET_INTERFACE_LEN];
    cn_bucket_interface(name, iface);
    DBusMessage *m = dbus_message_new_signal(CN_PATH, iface, CN_MEMBER);
    dbus_uint64_t wire_seq = seq, wire_origin = origin;
    int ok;
    if (credential_fd < 0 && origin) /* the common post: one call */
        ok = m && dbus_message_append_args(m, DBUS_TYPE_STRING, &name, DBUS_TYPE_UINT64, &wire_seq, DBUS_TYPE_UINT64,
                                           &wire_origin, DBUS_TYPE_INVALID);
    else {
        ok = m && dbus_message_append_args(m, DBUS_TYPE_STRING, &name, DBUS_TYPE_UINT64, &wire_seq, DBUS_TYPE_INVALID);
        if (ok && credential_fd >= 0) ok = dbus_message_append_args(m, DBUS_TYPE_UNIX_FD, &credential_fd, DBUS_TYPE_INVALID);
        if (ok && origin) ok = dbus_message_append_args(m, DBUS_TYPE_UINT64, &wire_origin, DBUS_TYPE_INVALID);
    }
    dbus_uint32_t wire_count = count;
    if (ok && origin && count > 1) ok = dbus_message_append_args(m, DBUS_TYPE_UINT32, &wire_count, DBUS_TYPE_INVALID);
    if (!ok) {
        if (m) dbus_message_unref(m);
        cn_set_error("out of memory while building the post of %s", name);
        return NULL;
    }
    return m;
}

/* ---- the fast way: a copy of a template, its number changed in place ----
 *
 * A poster posts the same few names over and over; all that differs between two posts of a name
 * is the number. So each thread keeps the last few posts it built (name, origin) as templates,
 * and a post is a copy of one (about 0.15 µs) with its 8 bytes of number written over. libdbus
 * has no call to change an argument; but the string it hands out for the name points into the
 * message's body (documented: by reference, valid while the message lives), and the body's layout
 * is D-Bus's own (the spec's marshalling): the name's 4-byte length at offset 0, its bytes and a
 * NUL, then the number at the next multiple of 8, in the message's (native) byte order. Every
 * copy is read back through libdbus before it is used: a number that does not read back as
 * written (another libdbus, another layout) turns the fast way off for the process, and the post
 * is built the slow way. About 1 µs in all. */
enum { CN_TEMPLATES_PER_THREAD = 4 };
typedef struct wire_template {
    DBusMessage *m;
    uint64_t origin;
    char name[CNOTIFY_NAME_MAX + 1];
} wire_template;
typedef struct wire_templates {
    wire_template slot[CN_TEMPLATES_PER_THREAD];
    unsigned next;              /* round robin: the slot a new name takes */
} wire_templates;

static pthread_key_t templates_key;
static pthread_once_t templates_once = PTHREAD_ONCE_INIT;
static _Atomic int templates_broken; /* a read-back failed: this libdbus is not what we measured */
static _Atomic int templates_keyed;

static void templates_release(void *arg) { /* a thread's exit: the messages go with it */
    wire_templates *t = arg;
    for (unsigned i = 0; i < CN_TEMPLATES_PER_THREAD; i++)
        if (t->slot[i].m) dbus_message_unref(t->slot[i].m);
    free(t);
}
static void templates_key_make(void) {
    if (pthread_key_create(&templates_key, templates_release) == 0) atomic_store(&templates_keyed, 1);
}

static wire_template *template_for(const char *name, uint64_t origin) {
    pthread_once(&templates_once, templates_key_make);
    if (!atomic_load_explicit(&templates_keyed, memory_order_relaxed)) return NULL;
    wire_templates *t = pthread_getspecific(templates_key);
    if (!t) {
        if (!(t = calloc(1, sizeof *t)) || pthread_setspecific(templates_key, t) != 0) { free(t); return NULL; }
    }
    for (unsigned i = 0; i < CN_TEMPLATES_PER_THREAD; i++)
        if (t->slot[i].m && t->slot[i].origin == origin && strcmp(t->slot[i].name, name) == 0) return &t->slot[i];
    wire_template *s = &t->slot[t->next++ % CN_TEMPLATES_PER_THREAD];
    DBusMessage *m = build_new(name, 0, -1, origin, 1); /* number 0: no post has it, so a copy left unchanged shows */
    if (!m) return NULL;
    if (s->m) dbus_message_unref(s->m);
    s->m = m;
    s->origin = origin;
    snprintf(s->name, sizeof s->name, "%s", name);
    return s;
}

/* A copy of `tpl` numbered `seq`; NULL (nothing changed) if the number does not read back. */
static DBusMessage *copy_numbered(const wire_template *tpl, uint64_t seq) {
    DBusMessage *m = dbus_message_copy(tpl->m);
    if (!m) return NULL;
    DBusMessageIter it;
    const char *in_body = NULL;
    if (dbus_message_iter_init(m, &it) && dbus_message_iter_get_arg_type(&it) == DBUS_TYPE_STRING)
        dbus_message_iter_get_basic(&it, &in_body);
    size_t len = strlen(tpl->name);
    if (in_body && strcmp(in_body, tpl->name) == 0 && dbus_message_iter_next(&it)
        && dbus_message_iter_get_arg_type(&it) == DBUS_TYPE_UINT64) {
        dbus_uint64_t before, after, wire_seq = seq;
        dbus_message_iter_get_basic(&it, &before);
        if (before == 0) { /* the template's own number: the layout is the one described above */
            unsigned char *body = (unsigned char *)(uintptr_t)in_body - 4;
            memcpy(body + ((4 + len + 1 + 7) & ~(size_t)7), &wire_seq, sizeof wire_seq);
            dbus_message_iter_get_basic(&it, &after);
            if (after == wire_seq) return m;
        }
    }
    atomic_store(&templates_broken, 1);
    dbus_message_unref(m);
    return NULL;
}

DBusMessage *cn_wire_build(const char *name, uint64_t seq, int credential_fd, uint64_t origin, uint32_t count) {
    if (credential_fd < 0 && origin && seq && count <= 1 && !atomic_load_explicit(&templates_broken, memory_order_relaxed)) {
        const wire_template *tpl = template_for(name, origin);
        DBusMessage *m = tpl ? copy_numbered(tpl, seq) : NULL;
        if (m) return m;
    }
    return build_new(name, seq, credential_fd, origin, count);
}

static int is_post(DBusMessage *msg) {
    if (dbus_message_get_type(msg) != DBUS_MESSAGE_TYPE_SIGNAL || !dbus_message_has_member(msg, CN_MEMBER) ||
        !dbus_message_has_path(msg, CN_PATH))
        return 0;
    const char *iface = dbus_message_get_interface(msg);
    return iface && (strcmp(iface, CN_INTERFACE) == 0 || strncmp(iface, CN_BUCKET_PREFIX, strlen(CN_BUCKET_PREFIX)) == 0);
}

/* After the name: `t` sequence, then an optional `h` credential, then an optional `t` origin, then
 * after an origin an optional `u` count (0 reads as 1). */
static void parse_after_name(DBusMessageIter *it, cn_wire_post *out) {
    if (!dbus_message_iter_next(it) || dbus_message_iter_get_arg_type(it) != DBUS_TYPE_UINT64) return;
    dbus_uint64_t v;
    dbus_message_iter_get_basic(it, &v);
    out->seq = v;
    out->has_seq = 1;
    if (!dbus_message_iter_next(it)) return;
    if (dbus_message_iter_get_arg_type(it) == DBUS_TYPE_UNIX_FD) {
        dbus_message_iter_get_basic(it, &out->credential_fd); /* a duplicate that we own */
        if (!dbus_message_iter_next(it)) return;
    }
    if (dbus_message_iter_get_arg_type(it) == DBUS_TYPE_UINT64) {
        dbus_uint64_t origin;
        dbus_message_iter_get_basic(it, &origin);
        out->origin = origin; /* 0: none */
        if (origin && dbus_message_iter_next(it) && dbus_message_iter_get_arg_type(it) == DBUS_TYPE_UINT32) {
            dbus_uint32_t count;
            dbus_message_iter_get_basic(it, &count);
            out->count = count ? count : 1;
        }
    }
}

cn_wire_result cn_wire_parse(DBusMessage *msg, cn_wire_post *out) {
    if (!is_post(msg)) return CN_WIRE_NOT_OURS;
    DBusMessageIter it;
    if (!dbus_message_iter_init(msg, &it) || dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_STRING) return CN_WIRE_MALFORMED;
    *out = (cn_wire_post){ NULL, 0, 0, 0, -1, 1 };
    dbus_message_iter_get_basic(&it, &out->name);
    size_t len = strlen(out->name);
    if (len == 0 || len > CNOTIFY_NAME_MAX) return CN_WIRE_MALFORMED;
    parse_after_name(&it, out);
    return CN_WIRE_POST;
}

uint32_t cn_wire_marshal(DBusMessage *m, const char *name, char **out_bytes, int *out_len) {
    if (!m) return NOTIFY_STATUS_FAILED; /* building it failed: the error is set */
    dbus_message_set_serial(m, 1); /* a message is marshalled only once it has a serial */
    int ok = dbus_message_marshal(m, out_bytes, out_len);
    dbus_message_unref(m);
    if (!ok) { cn_set_error("out of memory while marshalling the post of %s", name); return NOTIFY_STATUS_FAILED; }
    return NOTIFY_STATUS_OK;
}

static uint32_t marshal_post(const char *name, uint64_t seq, uint64_t origin, char **out_bytes, int *out_len) {
    CN_RETURN_IF_NULL(out_bytes, "output pointer");
    CN_RETURN_IF_NULL(out_len, "length pointer");
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    return cn_wire_marshal(cn_wire_build(name, seq, -1, origin, 1), name, out_bytes, out_len);
}

/* The Post in `m` into the caller's buffers (`out_origin`, `out_count` NULL: not wanted). */
static uint32_t copy_parsed(DBusMessage *m, char *out_name, size_t name_len, uint64_t *out_seq, int *out_has_seq,
                            uint64_t *out_origin, uint32_t *out_count) {
    cn_wire_post post;
    if (cn_wire_parse(m, &post) != CN_WIRE_POST) {
        cn_set_error("a D-Bus message, but not a Post of docs/PROTOCOL.md (member, path, interface or arguments)");
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    if (post.credential_fd >= 0) close(post.credential_fd);
    if (strlen(post.name) >= name_len) {
        cn_set_error("the name is %zu bytes; the buffer holds %zu", strlen(post.name), name_len);
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    memcpy(out_name, post.name, strlen(post.name) + 1);
    *out_seq = post.seq;
    *out_has_seq = post.has_seq;
    if (out_origin) *out_origin = post.origin;
    if (out_count) *out_count = post.count;
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_protocol_parse_post(const char *bytes, int len, char *out_name, size_t name_len, uint64_t *out_seq,
                                     int *out_has_seq) {
    cn_clear_error();
    CN_RETURN_IF_NULL(bytes, "message bytes");
    CN_RETURN_IF_NULL(out_name, "name buffer");
    CN_RETURN_IF_NULL(out_seq, "sequence pointer");
    CN_RETURN_IF_NULL(out_has_seq, "has-sequence pointer");
    DBusError err;
    dbus_error_init(&err);
    DBusMessage *m = dbus_message_demarshal(bytes, len, &err);
    if (!m) {
        cn_set_error("not a D-Bus message: %s", err.message ? err.message : "unknown error");
        dbus_error_free(&err);
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    uint32_t st = copy_parsed(m, out_name, name_len, out_seq, out_has_seq, NULL, NULL);
    dbus_message_unref(m);
    return st;
}

uint32_t CNotify_protocol_read_post(const void *message, char *out_name, size_t name_len, uint64_t *out_seq,
                                    int *out_has_seq, uint64_t *out_origin, uint32_t *out_count) {
    cn_clear_error();
    CN_RETURN_IF_NULL(message, "message");
    CN_RETURN_IF_NULL(out_name, "name buffer");
    CN_RETURN_IF_NULL(out_seq, "sequence pointer");
    CN_RETURN_IF_NULL(out_has_seq, "has-sequence pointer");
    CN_RETURN_IF_NULL(out_origin, "origin pointer");
    CN_RETURN_IF_NULL(out_count, "count pointer");
    return copy_parsed((DBusMessage *)message /* read, never changed */, out_name, name_len, out_seq, out_has_seq,
                       out_origin, out_count);
}

uint32_t CNotify_protocol_build_post(const char *name, uint64_t seq, char **out_bytes, int *out_len) {
    cn_clear_error();
    return marshal_post(name, seq, 0, out_bytes, out_len);
}

uint32_t CNotify_protocol_build_post_from(const char *name, uint64_t seq, uint64_t origin, char **out_bytes,
                                          int *out_len) {
    cn_clear_error();
    if (origin == 0) { cn_set_error("an origin is never 0 (0 means none)"); return NOTIFY_STATUS_INVALID_REQUEST; }
    return marshal_post(name, seq, origin, out_bytes, out_len);
}

uint32_t CNotify_protocol_post_origin(const char *bytes, int len, uint64_t *out) {
    cn_clear_error();
    CN_RETURN_IF_NULL(bytes, "message bytes");
    CN_RETURN_IF_NULL(out, "origin pointer");
    DBusMessage *m = dbus_message_demarshal(bytes, len, NULL);
    cn_wire_post post;
    if (!m || cn_wire_parse(m, &post) != CN_WIRE_POST) {
        if (m) dbus_message_unref(m);
        cn_set_error("not a Post of docs/PROTOCOL.md");
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    if (post.credential_fd >= 0) close(post.credential_fd);
    *out = post.origin;
    dbus_message_unref(m);
    return NOTIFY_STATUS_OK;
}

void CNotify_protocol_free(void *bytes) { dbus_free(bytes); }
