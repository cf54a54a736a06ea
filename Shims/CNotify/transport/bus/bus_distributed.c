/*
 * bus_distributed.c: the Distributed Post signal of docs/PROTOCOL.md ("Distributed
 * notifications"): built for sending, parsed on receipt. Body: `s name`, `s object` ("": none),
 * `a{sv} userInfo`, then `t sequence` and `t origin` as a Post has them, then `u options`; a
 * receiver reads what is there of the last three. The userInfo maps
 * property-list values onto D-Bus types that python-dbus, gdbus and dbus-monitor show as they are:
 *
 *   string s, integer x, real d, boolean b, data ay, date (d) (seconds since 1970, UTC),
 *   array av, dictionary a{sv}.
 *
 * A receiver also takes what foreign clients naturally send: any integer type (y n q i u x, and t
 * up to 2^63-1), typed arrays (as, ai, ad, ...) as arrays, and a{s?} as dictionaries. Anything else
 * (object paths, signatures, fds, other structs, a variant holding a variant, a key twice, NaN)
 * and anything past the property-list bounds drops the whole post, counted: a payload is taken
 * whole or not at all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bus.h"

/* ---- building ---- */

static int append_value(DBusMessageIter *parent, const CNotify_plist *v);

static int append_variant(DBusMessageIter *parent, const char *signature, const CNotify_plist *v) {
    DBusMessageIter var;
    if (!dbus_message_iter_open_container(parent, DBUS_TYPE_VARIANT, signature, &var)) return 0;
    int ok = append_value(&var, v);
    return dbus_message_iter_close_container(parent, &var) && ok;
}

static const char *signature_of(const CNotify_plist *v) {
    switch (CNotify_plist_type_of(v)) {
    case CNOTIFY_PLIST_STRING: return "s";
    case CNOTIFY_PLIST_INTEGER: return "x";
    case CNOTIFY_PLIST_REAL: return "d";
    case CNOTIFY_PLIST_BOOL: return "b";
    case CNOTIFY_PLIST_DATA: return "ay";
    case CNOTIFY_PLIST_DATE: return "(d)";
    case CNOTIFY_PLIST_ARRAY: return "av";
    case CNOTIFY_PLIST_DICTIONARY: return "a{sv}";
    default: return NULL;
    }
}

static int append_dictionary(DBusMessageIter *parent, const CNotify_plist *dict) {
    DBusMessageIter array;
    if (!dbus_message_iter_open_container(parent, DBUS_TYPE_ARRAY, "{sv}", &array)) return 0;
    int ok = 1;
    for (size_t i = 0; ok && dict && i < CNotify_plist_count(dict); i++) {
        DBusMessageIter entry;
        const char *key = CNotify_plist_key(dict, i);
        const CNotify_plist *value = CNotify_plist_item(dict, i);
        ok = dbus_message_iter_open_container(&array, DBUS_TYPE_DICT_ENTRY, NULL, &entry) &&
             dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &key) &&
             append_variant(&entry, signature_of(value), value);
        ok = dbus_message_iter_close_container(&array, &entry) && ok;
    }
    return dbus_message_iter_close_container(parent, &array) && ok;
}

static int append_value(DBusMessageIter *it, const CNotify_plist *v) {
    const char *s;
    int64_t i;
    double d;
    int b;
    const void *bytes;
    size_t len;
    switch (CNotify_plist_type_of(v)) {
    case CNOTIFY_PLIST_STRING:
        return CNotify_plist_get_string(v, &s) == NOTIFY_STATUS_OK && dbus_message_iter_append_basic(it, DBUS_TYPE_STRING, &s);
    case CNOTIFY_PLIST_INTEGER: {
        if (CNotify_plist_get_integer(v, &i) != NOTIFY_STATUS_OK) return 0;
        dbus_int64_t wire = i;
        return dbus_message_iter_append_basic(it, DBUS_TYPE_INT64, &wire);
    }
    case CNOTIFY_PLIST_REAL:
        return CNotify_plist_get_real(v, &d) == NOTIFY_STATUS_OK && dbus_message_iter_append_basic(it, DBUS_TYPE_DOUBLE, &d);
    case CNOTIFY_PLIST_BOOL: {
        if (CNotify_plist_get_bool(v, &b) != NOTIFY_STATUS_OK) return 0;
        dbus_bool_t wire = b ? TRUE : FALSE;
        return dbus_message_iter_append_basic(it, DBUS_TYPE_BOOLEAN, &wire);
    }
    case CNOTIFY_PLIST_DATA: {
        if (CNotify_plist_get_data(v, &bytes, &len) != NOTIFY_STATUS_OK) return 0;
        DBusMessageIter array;
        if (!dbus_message_iter_open_container(it, DBUS_TYPE_ARRAY, "y", &array)) return 0;
        int ok = dbus_message_iter_append_fixed_array(&array, DBUS_TYPE_BYTE, &bytes, (int)len);
        return dbus_message_iter_close_container(it, &array) && ok;
    }
    case CNOTIFY_PLIST_DATE: {
        if (CNotify_plist_get_date(v, &d) != NOTIFY_STATUS_OK) return 0;
        DBusMessageIter st;
        if (!dbus_message_iter_open_container(it, DBUS_TYPE_STRUCT, NULL, &st)) return 0;
        int ok = dbus_message_iter_append_basic(&st, DBUS_TYPE_DOUBLE, &d);
        return dbus_message_iter_close_container(it, &st) && ok;
    }
    case CNOTIFY_PLIST_ARRAY: {
        DBusMessageIter array;
        if (!dbus_message_iter_open_container(it, DBUS_TYPE_ARRAY, "v", &array)) return 0;
        int ok = 1;
        for (size_t k = 0; ok && k < CNotify_plist_count(v); k++) {
            const CNotify_plist *item = CNotify_plist_item(v, k);
            ok = append_variant(&array, signature_of(item), item);
        }
        return dbus_message_iter_close_container(it, &array) && ok;
    }
    case CNOTIFY_PLIST_DICTIONARY: return append_dictionary(it, v);
    default: return 0;
    }
}

DBusMessage *cn_distributed_build(const cn_outgoing_distributed *post) {
    DBusMessage *m = dbus_message_new_signal(CN_PATH, CN_DISTRIBUTED_INTERFACE, CN_MEMBER);
    const char *object = post->object ? post->object : "";
    dbus_uint64_t seq = post->seq, origin = post->origin;
    dbus_uint32_t options = post->options;
    DBusMessageIter it;
    int ok = m != NULL;
    if (ok) {
        dbus_message_iter_init_append(m, &it);
        ok = dbus_message_iter_append_basic(&it, DBUS_TYPE_STRING, &post->name) &&
             dbus_message_iter_append_basic(&it, DBUS_TYPE_STRING, &object) && append_dictionary(&it, post->user_info) &&
             dbus_message_iter_append_basic(&it, DBUS_TYPE_UINT64, &seq) &&
             dbus_message_iter_append_basic(&it, DBUS_TYPE_UINT64, &origin) &&
             dbus_message_iter_append_basic(&it, DBUS_TYPE_UINT32, &options);
    }
    if (!ok) {
        if (m) dbus_message_unref(m);
        cn_set_error("out of memory while building the distributed post of %s", post->name);
        return NULL;
    }
    return m;
}

/* ---- parsing: every value checked, the bounds counted as the tree grows ---- */

typedef struct reading {
    const char *why;    /* the first reason to drop the post */
} reading;

static CNotify_plist *read_value(DBusMessageIter *it, int depth, reading *r);

static CNotify_plist *refuse(reading *r, const char *why) {
    if (!r->why) r->why = why;
    return NULL;
}

/* A container's items, added one by one: the builders enforce the weight and depth bounds. */
static CNotify_plist *read_dictionary(DBusMessageIter *array, int depth, reading *r) {
    CNotify_plist *dict = CNotify_plist_dictionary();
    if (!dict) return refuse(r, "out of memory");
    for (; dbus_message_iter_get_arg_type(array) == DBUS_TYPE_DICT_ENTRY; dbus_message_iter_next(array)) {
        DBusMessageIter entry;
        dbus_message_iter_recurse(array, &entry);
        if (dbus_message_iter_get_arg_type(&entry) != DBUS_TYPE_STRING) { CNotify_plist_free(dict); return refuse(r, "a dictionary key that is not a string"); }
        const char *key;
        dbus_message_iter_get_basic(&entry, &key);
        if (CNotify_plist_lookup(dict, key)) { CNotify_plist_free(dict); return refuse(r, "a dictionary key twice"); }
        dbus_message_iter_next(&entry);
        CNotify_plist *value = read_value(&entry, depth, r);
        if (!value || CNotify_plist_set(dict, key, value) != NOTIFY_STATUS_OK) {
            CNotify_plist_free(value);
            CNotify_plist_free(dict);
            return refuse(r, "past the property-list bounds");
        }
    }
    return dict;
}

static CNotify_plist *read_array(DBusMessageIter *it, int depth, reading *r) {
    if (depth >= CNOTIFY_PLIST_MAX_DEPTH) return refuse(r, "containers nested past the bound");
    int element = dbus_message_iter_get_element_type(it);
    DBusMessageIter array;
    dbus_message_iter_recurse(it, &array);
    if (element == DBUS_TYPE_BYTE) { /* ay: data */
        const void *bytes = NULL;
        int n = 0;
        dbus_message_iter_get_fixed_array(&array, &bytes, &n);
        if (n < 0 || (size_t)n > CNOTIFY_PLIST_MAX_BYTES) return refuse(r, "data past the property-list bounds");
        CNotify_plist *data = CNotify_plist_data(bytes, (size_t)n);
        return data ? data : refuse(r, "out of memory");
    }
    if (element == DBUS_TYPE_DICT_ENTRY) return read_dictionary(&array, depth + 1, r);
    CNotify_plist *list = CNotify_plist_array();
    if (!list) return refuse(r, "out of memory");
    for (; dbus_message_iter_get_arg_type(&array) != DBUS_TYPE_INVALID; dbus_message_iter_next(&array)) {
        CNotify_plist *value = read_value(&array, depth + 1, r);
        if (!value || CNotify_plist_append(list, value) != NOTIFY_STATUS_OK) {
            CNotify_plist_free(value);
            CNotify_plist_free(list);
            return refuse(r, "past the property-list bounds");
        }
    }
    return list;
}

static CNotify_plist *read_integer(DBusMessageIter *it, int type, reading *r) {
    DBusBasicValue v;
    dbus_message_iter_get_basic(it, &v);
    switch (type) {
    case DBUS_TYPE_BYTE: return CNotify_plist_integer(v.byt);
    case DBUS_TYPE_INT16: return CNotify_plist_integer(v.i16);
    case DBUS_TYPE_UINT16: return CNotify_plist_integer(v.u16);
    case DBUS_TYPE_INT32: return CNotify_plist_integer(v.i32);
    case DBUS_TYPE_UINT32: return CNotify_plist_integer(v.u32);
    case DBUS_TYPE_INT64: return CNotify_plist_integer(v.i64);
    default: /* UINT64 */
        if (v.u64 > (dbus_uint64_t)INT64_MAX) return refuse(r, "an unsigned integer past 2^63-1");
        return CNotify_plist_integer((int64_t)v.u64);
    }
}

static CNotify_plist *read_value(DBusMessageIter *it, int depth, reading *r) {
    int type = dbus_message_iter_get_arg_type(it);
    DBusMessageIter inner;
    const char *s;
    double d;
    dbus_bool_t b;
    switch (type) {
    case DBUS_TYPE_VARIANT:
        dbus_message_iter_recurse(it, &inner);
        if (dbus_message_iter_get_arg_type(&inner) == DBUS_TYPE_VARIANT) return refuse(r, "a variant holding a variant");
        return read_value(&inner, depth, r);
    case DBUS_TYPE_STRING:
        dbus_message_iter_get_basic(it, &s); /* libdbus checked it is UTF-8 */
        {
            CNotify_plist *p = CNotify_plist_string(s);
            return p ? p : refuse(r, "a string past the bounds");
        }
    case DBUS_TYPE_BYTE: case DBUS_TYPE_INT16: case DBUS_TYPE_UINT16: case DBUS_TYPE_INT32:
    case DBUS_TYPE_UINT32: case DBUS_TYPE_INT64: case DBUS_TYPE_UINT64:
        return read_integer(it, type, r);
    case DBUS_TYPE_DOUBLE: {
        dbus_message_iter_get_basic(it, &d);
        CNotify_plist *p = CNotify_plist_real(d);
        return p ? p : refuse(r, "a real that is NaN or infinite");
    }
    case DBUS_TYPE_BOOLEAN:
        dbus_message_iter_get_basic(it, &b);
        return CNotify_plist_bool(b != 0);
    case DBUS_TYPE_STRUCT: { /* (d): a date, and no other struct */
        dbus_message_iter_recurse(it, &inner);
        if (dbus_message_iter_get_arg_type(&inner) != DBUS_TYPE_DOUBLE) return refuse(r, "a struct other than a date (d)");
        dbus_message_iter_get_basic(&inner, &d);
        if (dbus_message_iter_next(&inner)) return refuse(r, "a struct other than a date (d)");
        CNotify_plist *p = CNotify_plist_date(d);
        return p ? p : refuse(r, "a date that is NaN or infinite");
    }
    case DBUS_TYPE_ARRAY: return read_array(it, depth, r);
    default: return refuse(r, "a value of a type no property list has (object path, signature, fd)");
    }
}

cn_wire_result cn_distributed_parse(DBusMessage *msg, cn_wire_distributed *out, const char **why) {
    *why = NULL;
    if (dbus_message_get_type(msg) != DBUS_MESSAGE_TYPE_SIGNAL || !dbus_message_has_member(msg, CN_MEMBER) ||
        !dbus_message_has_path(msg, CN_PATH) || !dbus_message_has_interface(msg, CN_DISTRIBUTED_INTERFACE))
        return CN_WIRE_NOT_OURS;
    *out = (cn_wire_distributed){ 0 };
    DBusMessageIter it;
    if (!dbus_message_iter_init(msg, &it) || dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_STRING) {
        *why = "no name";
        return CN_WIRE_MALFORMED;
    }
    dbus_message_iter_get_basic(&it, &out->name);
    size_t len = strlen(out->name);
    if (len == 0 || len > CNOTIFY_NAME_MAX) { *why = "a name empty or too long"; return CN_WIRE_MALFORMED; }
    if (!dbus_message_iter_next(&it) || dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_STRING) { *why = "no object"; return CN_WIRE_MALFORMED; }
    dbus_message_iter_get_basic(&it, &out->object);
    /* Checked before the userInfo is read: a receiver keeps nothing past the bounds. */
    if (strlen(out->object) > CNOTIFY_NAME_MAX) { *why = "an object longer than 512 bytes"; return CN_WIRE_MALFORMED; }
    if (!out->object[0]) out->object = NULL;
    if (!dbus_message_iter_next(&it) || dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_ARRAY ||
        dbus_message_iter_get_element_type(&it) != DBUS_TYPE_DICT_ENTRY) {
        *why = "no userInfo dictionary";
        return CN_WIRE_MALFORMED;
    }
    reading r = { NULL };
    DBusMessageIter entries;
    dbus_message_iter_recurse(&it, &entries);
    CNotify_plist *info = read_dictionary(&entries, 1, &r);
    if (!info) { *why = r.why ? r.why : "a userInfo past the bounds"; return CN_WIRE_MALFORMED; }
    if (CNotify_plist_count(info) == 0) { CNotify_plist_free(info); info = NULL; } /* empty: none */
    out->user_info = info;
    if (dbus_message_iter_next(&it) && dbus_message_iter_get_arg_type(&it) == DBUS_TYPE_UINT64) {
        dbus_uint64_t v;
        dbus_message_iter_get_basic(&it, &v);
        out->seq = v;
        out->has_seq = 1;
        if (dbus_message_iter_next(&it) && dbus_message_iter_get_arg_type(&it) == DBUS_TYPE_UINT64) {
            dbus_message_iter_get_basic(&it, &v);
            out->origin = v;
            if (dbus_message_iter_next(&it) && dbus_message_iter_get_arg_type(&it) == DBUS_TYPE_UINT32) {
                dbus_uint32_t options;
                dbus_message_iter_get_basic(&it, &options);
                out->options = options & CNOTIFY_DISTRIBUTED_OPTIONS_KNOWN; /* the rest are reserved: ignored */
            }
        }
    }
    return CN_WIRE_POST;
}

/* ---- the contract, offered to other implementations (darwin_notify_distributed.h) ---- */

uint32_t CNotify_protocol_build_distributed(const char *name, const char *object, const CNotify_plist *user_info,
                                            uint64_t seq, uint64_t origin, uint32_t options, char **out_bytes,
                                            int *out_len) {
    cn_clear_error();
    CN_RETURN_IF_NULL(out_bytes, "output pointer");
    CN_RETURN_IF_NULL(out_len, "length pointer");
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    if (user_info && CNotify_plist_type_of(user_info) != CNOTIFY_PLIST_DICTIONARY) {
        cn_set_error("a userInfo is a dictionary");
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    cn_outgoing_distributed post = { name, object, user_info, seq, origin, options };
    return cn_wire_marshal(cn_distributed_build(&post), name, out_bytes, out_len);
}

uint32_t CNotify_protocol_parse_distributed(const char *bytes, int len, char *out_name, char *out_object,
                                            CNotify_plist **out_user_info, uint32_t *out_options) {
    cn_clear_error();
    CN_RETURN_IF_NULL(bytes, "message bytes");
    CN_RETURN_IF_NULL(out_name, "name buffer");
    CN_RETURN_IF_NULL(out_object, "object buffer");
    CN_RETURN_IF_NULL(out_user_info, "userInfo pointer");
    CN_RETURN_IF_NULL(out_options, "options pointer");
    DBusMessage *m = dbus_message_demarshal(bytes, len, NULL);
    if (!m) { cn_set_error("not a D-Bus message"); return NOTIFY_STATUS_INVALID_REQUEST; }
    cn_wire_distributed post;
    const char *why = NULL;
    cn_wire_result r = cn_distributed_parse(m, &post, &why);
    uint32_t st = NOTIFY_STATUS_OK;
    if (r != CN_WIRE_POST) {
        cn_set_error("not a Distributed Post a receiver takes: %s", r == CN_WIRE_NOT_OURS ? "member, path or interface" : why);
        st = NOTIFY_STATUS_INVALID_REQUEST;
    } else { /* name and object at most CNOTIFY_NAME_MAX: checked by the parse */
        memcpy(out_name, post.name, strlen(post.name) + 1);
        snprintf(out_object, CNOTIFY_NAME_MAX + 1, "%s", post.object ? post.object : "");
        *out_user_info = post.user_info;
        *out_options = post.options;
    }
    dbus_message_unref(m);
    return st;
}

uint32_t CNotify_protocol_distributed_match_rule(const char *name, char *out, size_t len) {
    cn_clear_error();
    CN_RETURN_IF_NULL(out, "output buffer");
    if (name) {
        uint32_t st = CNotify_validate_name(name);
        if (st != NOTIFY_STATUS_OK) return st;
    }
    char rule[CN_RULE_MAX + 64];
    cn_distributed_rule(name ? name : "", rule, sizeof rule);
    if (strlen(rule) >= len) {
        cn_set_error("the rule is %zu bytes; the buffer holds %zu", strlen(rule), len);
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    memcpy(out, rule, strlen(rule) + 1);
    return NOTIFY_STATUS_OK;
}
