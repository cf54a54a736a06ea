/*
 * plist.c: property lists, the userInfo of a distributed notification (docs/PROTOCOL.md
 * "Distributed notifications"). A tree of the types Apple allows in a property list: string,
 * integer, real, boolean, data, date, array and dictionary. Built by a poster (the CNotify_plist_*
 * builders) or by the transport from what arrived, read by observers; nothing here knows a wire.
 *
 * Bounds, the same for a poster and a receiver: containers nest at most CNOTIFY_PLIST_MAX_DEPTH
 * deep, and the whole tree weighs at most CNOTIFY_PLIST_MAX_BYTES, where a value weighs 8 bytes
 * plus the bytes of its string or data, and a dictionary entry also the bytes of its key. So what
 * any input can make a receiver keep is bounded before it is kept.
 */
#include <stdlib.h>
#include <string.h>
#include "base.h"

struct CNotify_plist {
    CNotify_plist_type type;
    size_t weight;              /* this value and everything in it (the bound above) */
    size_t depth;               /* containers: 1 + the deepest inside; other values 0 */
    int in_container;           /* added to an array or dictionary: owned there and no longer changed,
                                 * so the weights and depths counted up the tree stay true */
    union {
        char *string;
        int64_t integer;
        double real;            /* a real, or a date: seconds since 1970-01-01 00:00 UTC */
        int boolean;
        struct { unsigned char *bytes; size_t len; } data;
        struct {
            CNotify_plist **values;
            char **keys;            /* dictionaries only */
            size_t count, cap;
            uint32_t *slots;        /* dictionaries of CN_PLIST_INDEXED keys or more: open addressing,
                                     * an item's index + 1 (0: empty), so a key is found in O(1) */
            size_t nslots;
        } items;
    } u;
};

#define CN_PLIST_VALUE_WEIGHT 8u
#define CN_PLIST_INDEXED 8      /* keys past which a dictionary keeps a hash index */

/* Key comparisons this thread made looking keys up (a test's measure that a look-up is O(1)):
 * per thread, so that counting costs no shared cache line. */
_Thread_local unsigned long cn_test_plist_compares;

static CNotify_plist *plist_new(CNotify_plist_type type, size_t extra_weight) {
    CNotify_plist *p = calloc(1, sizeof *p);
    if (!p) { cn_set_error("out of memory while building a property list"); return NULL; }
    p->type = type;
    p->weight = CN_PLIST_VALUE_WEIGHT + extra_weight;
    p->depth = type == CNOTIFY_PLIST_ARRAY || type == CNOTIFY_PLIST_DICTIONARY;
    return p;
}

CNotify_plist *CNotify_plist_string(const char *utf8) {
    cn_clear_error();
    if (!utf8) { cn_set_error("string is NULL"); return NULL; }
    if (!cn_utf8_valid(utf8)) { cn_set_error("a property-list string must be valid UTF-8"); return NULL; }
    size_t len = strlen(utf8);
    if (len > CNOTIFY_PLIST_MAX_BYTES) {
        cn_set_error("a string of %zu bytes is past the property-list bound (%d bytes)", len, CNOTIFY_PLIST_MAX_BYTES);
        return NULL;
    }
    CNotify_plist *p = plist_new(CNOTIFY_PLIST_STRING, len);
    if (p && !(p->u.string = strdup(utf8))) { free(p); p = NULL; cn_set_error("out of memory while building a property list"); }
    return p;
}

CNotify_plist *CNotify_plist_integer(int64_t value) {
    cn_clear_error();
    CNotify_plist *p = plist_new(CNOTIFY_PLIST_INTEGER, 0);
    if (p) p->u.integer = value;
    return p;
}

static CNotify_plist *finite_real(CNotify_plist_type type, double value, const char *what) {
    /* JSON, XML property lists and most foreign readers have no NaN or infinity. */
    if (value != value || value > 1.7976931348623157e308 || value < -1.7976931348623157e308) {
        cn_set_error("a property-list %s must be finite (not NaN or infinite)", what);
        return NULL;
    }
    CNotify_plist *p = plist_new(type, 0);
    if (p) p->u.real = value;
    return p;
}

CNotify_plist *CNotify_plist_real(double value) {
    cn_clear_error();
    return finite_real(CNOTIFY_PLIST_REAL, value, "real");
}

CNotify_plist *CNotify_plist_date(double seconds_since_1970) {
    cn_clear_error();
    return finite_real(CNOTIFY_PLIST_DATE, seconds_since_1970, "date");
}

CNotify_plist *CNotify_plist_bool(int value) {
    cn_clear_error();
    CNotify_plist *p = plist_new(CNOTIFY_PLIST_BOOL, 0);
    if (p) p->u.boolean = value != 0;
    return p;
}

CNotify_plist *CNotify_plist_data(const void *bytes, size_t len) {
    cn_clear_error();
    if (!bytes && len) { cn_set_error("data bytes are NULL"); return NULL; }
    if (len > CNOTIFY_PLIST_MAX_BYTES) {
        cn_set_error("data of %zu bytes is past the property-list bound (%d bytes)", len, CNOTIFY_PLIST_MAX_BYTES);
        return NULL;
    }
    CNotify_plist *p = plist_new(CNOTIFY_PLIST_DATA, len);
    if (!p) return NULL;
    p->u.data.len = len;
    if (len && !(p->u.data.bytes = malloc(len))) { free(p); cn_set_error("out of memory while building a property list"); return NULL; }
    if (len) memcpy(p->u.data.bytes, bytes, len);
    return p;
}

CNotify_plist *CNotify_plist_array(void) {
    cn_clear_error();
    return plist_new(CNOTIFY_PLIST_ARRAY, 0);
}

CNotify_plist *CNotify_plist_dictionary(void) {
    cn_clear_error();
    return plist_new(CNOTIFY_PLIST_DICTIONARY, 0);
}

void CNotify_plist_free(CNotify_plist *p) {
    if (!p) return;
    switch (p->type) {
    case CNOTIFY_PLIST_STRING: free(p->u.string); break;
    case CNOTIFY_PLIST_DATA: free(p->u.data.bytes); break;
    case CNOTIFY_PLIST_ARRAY:
    case CNOTIFY_PLIST_DICTIONARY:
        for (size_t i = 0; i < p->u.items.count; i++) {
            CNotify_plist_free(p->u.items.values[i]);
            if (p->u.items.keys) free(p->u.items.keys[i]);
        }
        free(p->u.items.values);
        free(p->u.items.keys);
        free(p->u.items.slots);
        break;
    default: break;
    }
    free(p);
}

size_t cn_plist_depth(const CNotify_plist *p) { return p->depth; }

size_t cn_plist_weight(const CNotify_plist *p) { return p->weight; }

/* Room for one more item; the container's weight and depth checked with the newcomer. */
static uint32_t make_room(CNotify_plist *c, const CNotify_plist *value, size_t key_len) {
    if (c->in_container || value->in_container) {
        cn_set_error("%s", c->in_container ? "this container is inside another already: fill containers before adding them"
                                           : "this value is inside a container already (copy it to add it twice)");
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    if (c->weight + value->weight + key_len > CNOTIFY_PLIST_MAX_BYTES) {
        cn_set_error("the property list would weigh %zu bytes, past its bound of %d (docs/PROTOCOL.md)",
                     c->weight + value->weight + key_len, CNOTIFY_PLIST_MAX_BYTES);
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    if (value->depth + 1 > CNOTIFY_PLIST_MAX_DEPTH) {
        cn_set_error("containers would nest %zu deep, past the bound of %d", value->depth + 1, CNOTIFY_PLIST_MAX_DEPTH);
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    if (c->u.items.count < c->u.items.cap) return NOTIFY_STATUS_OK;
    size_t cap = c->u.items.cap ? c->u.items.cap * 2 : 4;
    CNotify_plist **values = realloc(c->u.items.values, cap * sizeof *values);
    if (values) c->u.items.values = values;
    int keyed = c->type == CNOTIFY_PLIST_DICTIONARY;
    char **keys = keyed ? realloc(c->u.items.keys, cap * sizeof *keys) : NULL;
    if (keys) c->u.items.keys = keys;
    if (!values || (keyed && !keys)) { cn_set_error("out of memory while building a property list"); return NOTIFY_STATUS_FAILED; }
    c->u.items.cap = cap;
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_plist_append(CNotify_plist *array, CNotify_plist *value) {
    cn_clear_error();
    CN_RETURN_IF_NULL(array, "array");
    CN_RETURN_IF_NULL(value, "value");
    if (array->type != CNOTIFY_PLIST_ARRAY) { cn_set_error("append needs an array"); return NOTIFY_STATUS_INVALID_REQUEST; }
    if (value == array) { cn_set_error("an array cannot contain itself"); return NOTIFY_STATUS_INVALID_REQUEST; }
    uint32_t st = make_room(array, value, 0);
    if (st != NOTIFY_STATUS_OK) return st;
    array->u.items.values[array->u.items.count++] = value;
    array->weight += value->weight;
    if (value->depth + 1 > array->depth) array->depth = value->depth + 1;
    value->in_container = 1;
    return NOTIFY_STATUS_OK;
}

static int same_key(const char *a, const char *b) {
    cn_test_plist_compares++;
    return strcmp(a, b) == 0;
}

static size_t index_of_key(const CNotify_plist *dict, const char *key) {
    const uint32_t *slots = dict->u.items.slots;
    if (!slots) {
        for (size_t i = 0; i < dict->u.items.count; i++)
            if (same_key(dict->u.items.keys[i], key)) return i;
        return SIZE_MAX;
    }
    size_t mask = dict->u.items.nslots - 1;
    for (size_t s = cn_fnv1a32(key) & mask; slots[s]; s = (s + 1) & mask)
        if (same_key(dict->u.items.keys[slots[s] - 1], key)) return slots[s] - 1;
    return SIZE_MAX;
}

/* Item `i`'s key into the index (which has room: at most half full). */
static void index_key(CNotify_plist *dict, size_t i) {
    size_t mask = dict->u.items.nslots - 1, s = cn_fnv1a32(dict->u.items.keys[i]) & mask;
    while (dict->u.items.slots[s]) s = (s + 1) & mask;
    dict->u.items.slots[s] = (uint32_t)(i + 1);
}

/* Keeps the index at most half full once the dictionary has CN_PLIST_INDEXED keys; -1 when out of
 * memory (the dictionary is unchanged). */
static int grow_index(CNotify_plist *dict, size_t count) {
    if (count < CN_PLIST_INDEXED || 2 * count <= dict->u.items.nslots) return 0;
    size_t nslots = dict->u.items.nslots ? 2 * dict->u.items.nslots : 4 * CN_PLIST_INDEXED;
    while (2 * count > nslots) nslots *= 2;
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots) return -1;
    free(dict->u.items.slots);
    dict->u.items.slots = slots;
    dict->u.items.nslots = nslots;
    for (size_t i = 0; i < dict->u.items.count; i++) index_key(dict, i);
    return 0;
}

uint32_t CNotify_plist_set(CNotify_plist *dict, const char *key, CNotify_plist *value) {
    cn_clear_error();
    CN_RETURN_IF_NULL(dict, "dictionary");
    CN_RETURN_IF_NULL(key, "key");
    CN_RETURN_IF_NULL(value, "value");
    if (dict->type != CNOTIFY_PLIST_DICTIONARY) { cn_set_error("set needs a dictionary"); return NOTIFY_STATUS_INVALID_REQUEST; }
    if (value == dict) { cn_set_error("a dictionary cannot contain itself"); return NOTIFY_STATUS_INVALID_REQUEST; }
    if (!cn_utf8_valid(key)) { cn_set_error("a dictionary key must be valid UTF-8"); return NOTIFY_STATUS_INVALID_REQUEST; }
    size_t key_len = strlen(key), at = index_of_key(dict, key);
    if (at != SIZE_MAX) { /* a key is set once: the new value replaces the old one */
        CNotify_plist *old = dict->u.items.values[at];
        if (dict->in_container || value->in_container) return make_room(dict, value, 0); /* its sentence */
        if (dict->weight - old->weight + value->weight > CNOTIFY_PLIST_MAX_BYTES) {
            cn_set_error("the property list would weigh past its bound of %d bytes", CNOTIFY_PLIST_MAX_BYTES);
            return NOTIFY_STATUS_INVALID_REQUEST;
        }
        if (value->depth + 1 > CNOTIFY_PLIST_MAX_DEPTH) {
            cn_set_error("containers would nest past the bound of %d", CNOTIFY_PLIST_MAX_DEPTH);
            return NOTIFY_STATUS_INVALID_REQUEST;
        }
        dict->weight = dict->weight - old->weight + value->weight;
        dict->u.items.values[at] = value;
        if (value->depth + 1 > dict->depth) dict->depth = value->depth + 1; /* an upper bound after a replace */
        value->in_container = 1;
        CNotify_plist_free(old);
        return NOTIFY_STATUS_OK;
    }
    uint32_t st = make_room(dict, value, key_len);
    if (st != NOTIFY_STATUS_OK) return st;
    char *k = strdup(key);
    if (!k || grow_index(dict, dict->u.items.count + 1) != 0) {
        free(k);
        cn_set_error("out of memory while building a property list");
        return NOTIFY_STATUS_FAILED;
    }
    dict->u.items.keys[dict->u.items.count] = k;
    dict->u.items.values[dict->u.items.count++] = value;
    if (dict->u.items.slots) index_key(dict, dict->u.items.count - 1);
    dict->weight += value->weight + key_len;
    if (value->depth + 1 > dict->depth) dict->depth = value->depth + 1;
    value->in_container = 1;
    return NOTIFY_STATUS_OK;
}

/* ---- reading ---- */

CNotify_plist_type CNotify_plist_type_of(const CNotify_plist *p) { return p ? p->type : CNOTIFY_PLIST_NONE; }

static uint32_t check_type(const CNotify_plist *p, const void *out, CNotify_plist_type want, const char *what) {
    CN_RETURN_IF_NULL(p, "property list");
    CN_RETURN_IF_NULL(out, "output pointer");
    if (p->type != want) {
        cn_set_error("the value is not %s (its type is %d)", what, (int)p->type);
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_plist_get_string(const CNotify_plist *p, const char **out) {
    cn_clear_error();
    uint32_t st = check_type(p, out, CNOTIFY_PLIST_STRING, "a string");
    if (st == NOTIFY_STATUS_OK) *out = p->u.string;
    return st;
}

uint32_t CNotify_plist_get_integer(const CNotify_plist *p, int64_t *out) {
    cn_clear_error();
    uint32_t st = check_type(p, out, CNOTIFY_PLIST_INTEGER, "an integer");
    if (st == NOTIFY_STATUS_OK) *out = p->u.integer;
    return st;
}

uint32_t CNotify_plist_get_real(const CNotify_plist *p, double *out) {
    cn_clear_error();
    uint32_t st = check_type(p, out, CNOTIFY_PLIST_REAL, "a real");
    if (st == NOTIFY_STATUS_OK) *out = p->u.real;
    return st;
}

uint32_t CNotify_plist_get_date(const CNotify_plist *p, double *out_seconds_since_1970) {
    cn_clear_error();
    uint32_t st = check_type(p, out_seconds_since_1970, CNOTIFY_PLIST_DATE, "a date");
    if (st == NOTIFY_STATUS_OK) *out_seconds_since_1970 = p->u.real;
    return st;
}

uint32_t CNotify_plist_get_bool(const CNotify_plist *p, int *out) {
    cn_clear_error();
    uint32_t st = check_type(p, out, CNOTIFY_PLIST_BOOL, "a boolean");
    if (st == NOTIFY_STATUS_OK) *out = p->u.boolean;
    return st;
}

uint32_t CNotify_plist_get_data(const CNotify_plist *p, const void **out_bytes, size_t *out_len) {
    cn_clear_error();
    CN_RETURN_IF_NULL(out_len, "length pointer");
    uint32_t st = check_type(p, out_bytes, CNOTIFY_PLIST_DATA, "data");
    if (st == NOTIFY_STATUS_OK) { *out_bytes = p->u.data.bytes ? (const void *)p->u.data.bytes : (const void *)""; *out_len = p->u.data.len; }
    return st;
}

size_t CNotify_plist_count(const CNotify_plist *p) {
    return p && (p->type == CNOTIFY_PLIST_ARRAY || p->type == CNOTIFY_PLIST_DICTIONARY) ? p->u.items.count : 0;
}

const CNotify_plist *CNotify_plist_item(const CNotify_plist *container, size_t i) {
    if (!container || (container->type != CNOTIFY_PLIST_ARRAY && container->type != CNOTIFY_PLIST_DICTIONARY)) return NULL;
    return i < container->u.items.count ? container->u.items.values[i] : NULL;
}

const char *CNotify_plist_key(const CNotify_plist *dict, size_t i) {
    if (!dict || dict->type != CNOTIFY_PLIST_DICTIONARY || i >= dict->u.items.count) return NULL;
    return dict->u.items.keys[i];
}

const CNotify_plist *CNotify_plist_lookup(const CNotify_plist *dict, const char *key) {
    if (!dict || !key || dict->type != CNOTIFY_PLIST_DICTIONARY) return NULL;
    size_t at = index_of_key(dict, key);
    return at == SIZE_MAX ? NULL : dict->u.items.values[at];
}

/* A copy for each observer that keeps one beyond its callback. */
CNotify_plist *CNotify_plist_copy(const CNotify_plist *p) {
    cn_clear_error();
    if (!p) { cn_set_error("property list is NULL"); return NULL; }
    CNotify_plist *c;
    switch (p->type) {
    case CNOTIFY_PLIST_STRING: return CNotify_plist_string(p->u.string);
    case CNOTIFY_PLIST_INTEGER: return CNotify_plist_integer(p->u.integer);
    case CNOTIFY_PLIST_REAL: return CNotify_plist_real(p->u.real);
    case CNOTIFY_PLIST_DATE: return CNotify_plist_date(p->u.real);
    case CNOTIFY_PLIST_BOOL: return CNotify_plist_bool(p->u.boolean);
    case CNOTIFY_PLIST_DATA: return CNotify_plist_data(p->u.data.bytes, p->u.data.len);
    case CNOTIFY_PLIST_ARRAY:
    case CNOTIFY_PLIST_DICTIONARY:
        if (!(c = plist_new(p->type, 0))) return NULL;
        for (size_t i = 0; i < p->u.items.count; i++) {
            CNotify_plist *v = CNotify_plist_copy(p->u.items.values[i]);
            uint32_t st = !v ? NOTIFY_STATUS_FAILED
                : p->type == CNOTIFY_PLIST_ARRAY ? CNotify_plist_append(c, v) : CNotify_plist_set(c, p->u.items.keys[i], v);
            if (st != NOTIFY_STATUS_OK) { CNotify_plist_free(v); CNotify_plist_free(c); return NULL; }
        }
        return c;
    default:
        cn_set_error("not a property-list value");
        return NULL;
    }
}
