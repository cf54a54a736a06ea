/*
 * darwin_notify_distributed.h: distributed notifications, Apple's NSDistributedNotificationCenter
 * in C. A notification has a name, an optional object string and an optional userInfo property
 * list; observers filter by name (or take every name) and by object (or take any). It travels on
 * the center's bus as the Distributed Post signal of docs/PROTOCOL.md ("Distributed
 * notifications"), which foreign clients read and send with the stock D-Bus tools.
 *
 * Property lists (CNotify_plist) hold what Apple allows in one: strings (UTF-8), integers
 * (64-bit signed), reals and dates (finite doubles; a date in seconds since 1970-01-01 UTC),
 * booleans, data, arrays and dictionaries (string keys, each once). A tree is bounded: at most
 * CNOTIFY_PLIST_MAX_DEPTH nested containers and CNOTIFY_PLIST_MAX_BYTES of weight (8 bytes a
 * value, plus the bytes of each string, data and dictionary key). A builder returns NULL, and a
 * setter INVALID_REQUEST, with a sentence in CNotify_last_error(), for anything else; a receiver
 * drops a payload past the bounds or of another type, and counts it (dropped).
 *
 * Ownership: CNotify_plist_append and CNotify_plist_set take `value` on success (and leave it
 * with the caller on failure); a value goes into one container, once that container is filled
 * (containers are filled before they are added). The caller frees the top with CNotify_plist_free.
 * What a handler receives lives until it returns; CNotify_plist_copy keeps it longer.
 */
#ifndef CNOTIFY_DARWIN_NOTIFY_DISTRIBUTED_H
#define CNOTIFY_DARWIN_NOTIFY_DISTRIBUTED_H

#include "darwin_notify.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CNOTIFY_PLIST_MAX_DEPTH 32
#define CNOTIFY_PLIST_MAX_BYTES 65536

typedef struct CNotify_plist CNotify_plist;
typedef enum CNotify_plist_type {
    CNOTIFY_PLIST_NONE = 0, /* CNotify_plist_type_of(NULL) */
    CNOTIFY_PLIST_STRING,
    CNOTIFY_PLIST_INTEGER,
    CNOTIFY_PLIST_REAL,
    CNOTIFY_PLIST_BOOL,
    CNOTIFY_PLIST_DATA,
    CNOTIFY_PLIST_DATE,
    CNOTIFY_PLIST_ARRAY,
    CNOTIFY_PLIST_DICTIONARY,
} CNotify_plist_type;

CNotify_plist *CNotify_plist_string(const char *utf8);
CNotify_plist *CNotify_plist_integer(int64_t value);
CNotify_plist *CNotify_plist_real(double value);
CNotify_plist *CNotify_plist_bool(int value);
CNotify_plist *CNotify_plist_data(const void *bytes, size_t len);
CNotify_plist *CNotify_plist_date(double seconds_since_1970);
CNotify_plist *CNotify_plist_array(void);
CNotify_plist *CNotify_plist_dictionary(void);
uint32_t CNotify_plist_append(CNotify_plist *array, CNotify_plist *value);
uint32_t CNotify_plist_set(CNotify_plist *dictionary, const char *key, CNotify_plist *value);
CNotify_plist *CNotify_plist_copy(const CNotify_plist *plist);
void CNotify_plist_free(CNotify_plist *plist);

/* Reading. A getter of the wrong type returns INVALID_REQUEST and leaves *out alone: a value is
 * never read as 0 because it was something else. */
CNotify_plist_type CNotify_plist_type_of(const CNotify_plist *plist);
uint32_t CNotify_plist_get_string(const CNotify_plist *plist, const char **out);
uint32_t CNotify_plist_get_integer(const CNotify_plist *plist, int64_t *out);
uint32_t CNotify_plist_get_real(const CNotify_plist *plist, double *out);
uint32_t CNotify_plist_get_bool(const CNotify_plist *plist, int *out);
uint32_t CNotify_plist_get_data(const CNotify_plist *plist, const void **out_bytes, size_t *out_len);
uint32_t CNotify_plist_get_date(const CNotify_plist *plist, double *out_seconds_since_1970);
/* Arrays and dictionaries: how many items; the i-th value (in order of insertion); for a
 * dictionary its i-th key, or the value of `key` (NULL if absent). */
size_t CNotify_plist_count(const CNotify_plist *container);
const CNotify_plist *CNotify_plist_item(const CNotify_plist *container, size_t i);
const char *CNotify_plist_key(const CNotify_plist *dictionary, size_t i);
const CNotify_plist *CNotify_plist_lookup(const CNotify_plist *dictionary, const char *key);

/* A distributed notification as a handler receives it, valid until the handler returns. */
typedef struct CNotify_distributed_note {
    const char *name;
    const char *object;             /* NULL: none */
    const CNotify_plist *user_info; /* a dictionary, or NULL: none (an empty one arrives as none) */
    const char *sender;             /* the poster's unique bus name */
    uint64_t sequence;              /* the poster's number of this post of `name` (0: it had none) */
    int from_this_center;           /* posted by this very center */
    uint32_t options;               /* the poster's CNOTIFY_DISTRIBUTED_* options */
} CNotify_distributed_note;
typedef void (*CNotify_distributed_handler)(void *context, const CNotify_distributed_note *note);

/* Options of a post, which travel with it: DELIVER_IMMEDIATELY asks observers that suspended
 * delivery to deliver this one now (Apple's deliverImmediately). */
#define CNOTIFY_DISTRIBUTED_DELIVER_IMMEDIATELY 1u
/* Every option defined; a receiver clears the others (reserved) before a handler sees them. */
#define CNOTIFY_DISTRIBUTED_OPTIONS_KNOWN CNOTIFY_DISTRIBUTED_DELIVER_IMMEDIATELY

/* Posts `name` with `object` (NULL or "": none) and `user_info` (NULL, or a dictionary, which
 * stays the caller's), on the center's bus, to every observer there (this center's too). */
uint32_t CNotify_distributed_post(CNotify_center *center, const char *name, const char *object,
                                  const CNotify_plist *user_info, uint32_t options);
/* Observes `name` (NULL: every name) from `object` (NULL: any object): `handler` runs on the
 * center's delivery thread, one callback of the center at a time, as the other handlers do; its
 * id into *out_id. Returns once the bus brings the posts. */
uint32_t CNotify_distributed_add_handler(CNotify_center *center, const char *name, const char *object,
                                         CNotify_distributed_handler handler, void *context, CNotify_release release,
                                         uint64_t *out_id);
/* Removes a handler: once this returns it never runs again; `release` runs once no invocation
 * can still be running. */
uint32_t CNotify_distributed_remove_handler(CNotify_center *center, uint64_t id);

typedef struct CNotify_distributed_stats {
    uint64_t received;  /* Distributed Post signals received from the bus */
    uint64_t delivered; /* handler invocations */
    uint64_t dropped;   /* payloads refused as malformed or past the bounds (from foreign posters) */
    uint64_t gaps;      /* posts missing from a poster's numbering of a name */
} CNotify_distributed_stats;
void CNotify_distributed_get_stats(CNotify_center *center, CNotify_distributed_stats *out);

/* The wire contract (docs/PROTOCOL.md "Distributed notifications"), for other implementations and
 * tests: the Distributed Post as our library sends it (serial 1; free *out_bytes with
 * CNotify_protocol_free); marshalled bytes read as a receiver reads them (INVALID_REQUEST, with a
 * sentence, for anything a receiver drops; else the name and object (NUL-terminated, "" for no
 * object) in the caller's buffers of CNOTIFY_NAME_MAX + 1 bytes, the userInfo (NULL: none; the
 * caller frees it with CNotify_plist_free) and the options); and the match rule that observes
 * `name` (NULL: every name). */
uint32_t CNotify_protocol_build_distributed(const char *name, const char *object, const CNotify_plist *user_info,
                                            uint64_t seq, uint64_t origin, uint32_t options, char **out_bytes,
                                            int *out_len);
uint32_t CNotify_protocol_parse_distributed(const char *bytes, int len, char *out_name, char *out_object,
                                            CNotify_plist **out_user_info, uint32_t *out_options);
uint32_t CNotify_protocol_distributed_match_rule(const char *name, char *out, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* CNOTIFY_DARWIN_NOTIFY_DISTRIBUTED_H */
