/*
 * distributed_api.c: the public entry points of darwin_notify_distributed.h (the property-list
 * builders are base/plist.c's): argument checks first, as in every public function, then the
 * center layer.
 */
#include <stdlib.h>
#include <string.h>
#include "api.h"

/* NULL or "" (none), or a string of the same bounds and encoding as a name. */
static uint32_t validate_object(const char *object) {
    if (!object || !object[0]) return NOTIFY_STATUS_OK;
    if (strlen(object) > CNOTIFY_NAME_MAX) {
        cn_set_error("the object is %zu bytes; the limit is %d", strlen(object), CNOTIFY_NAME_MAX);
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    if (!cn_utf8_valid(object)) { cn_set_error("the object is not valid UTF-8"); return NOTIFY_STATUS_INVALID_REQUEST; }
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_distributed_post(CNotify_center *c, const char *name, const char *object, const CNotify_plist *user_info,
                                  uint32_t options) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    uint32_t st = CNotify_validate_name(name);
    if (st == NOTIFY_STATUS_OK) st = validate_object(object);
    if (st != NOTIFY_STATUS_OK) return st;
    if (user_info && CNotify_plist_type_of(user_info) != CNOTIFY_PLIST_DICTIONARY) {
        cn_set_error("a userInfo is a dictionary (its type is %d)", (int)CNotify_plist_type_of(user_info));
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    if (options & ~CNOTIFY_DISTRIBUTED_DELIVER_IMMEDIATELY) {
        cn_set_error("unknown options 0x%x", options & ~CNOTIFY_DISTRIBUTED_DELIVER_IMMEDIATELY);
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    CN_RETURN_IF_FORKED();
    return cn_center_post_distributed(c, name, object && object[0] ? object : NULL, user_info, options);
}

uint32_t CNotify_distributed_add_handler(CNotify_center *c, const char *name, const char *object,
                                         CNotify_distributed_handler handler, void *context, CNotify_release release,
                                         uint64_t *out_id) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    CN_RETURN_IF_NULL(handler, "handler");
    CN_RETURN_IF_NULL(out_id, "id pointer");
    uint32_t st = name ? CNotify_validate_name(name) : NOTIFY_STATUS_OK;
    if (st == NOTIFY_STATUS_OK) st = validate_object(object);
    if (st != NOTIFY_STATUS_OK) return st;
    CN_RETURN_IF_FORKED();
    cn_entry *e = calloc(1, sizeof *e);
    int ok = e && (e->name = strdup(name ? name : "")) && (!object || !object[0] || (e->object = strdup(object)));
    if (!ok) {
        if (e) { free(e->name); free(e); }
        cn_set_error("out of memory");
        return NOTIFY_STATUS_FAILED;
    }
    e->distributed_handler = handler;
    e->context = context;
    e->release = release;
    return cn_center_add_distributed(c, e, out_id);
}

uint32_t CNotify_distributed_remove_handler(CNotify_center *c, uint64_t id) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    CN_RETURN_IF_FORKED();
    if (id == 0) { cn_set_error("no distributed handler has id 0"); return NOTIFY_STATUS_INVALID_TOKEN; }
    return cn_center_remove_distributed(c, id) == NOTIFY_STATUS_OK ? NOTIFY_STATUS_OK : NOTIFY_STATUS_INVALID_TOKEN;
}

void CNotify_distributed_get_stats(CNotify_center *c, CNotify_distributed_stats *out) {
    cn_clear_error();
    if (!c || !out) { cn_set_error("center or stats pointer is NULL"); return; }
    cn_center_distributed_stats(c, out);
}
