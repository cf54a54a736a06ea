/*
 * center_api.c: the CNotify_center_* entry points of include/darwin_notify.h. The argument
 * checks first, the same in each (base/base.h), then the center layer does the work.
 */
#include <stdlib.h>
#include <string.h>
#include "api.h"

CNotify_center *CNotify_center_get_darwin_notify_center(void) {
    cn_clear_error();
    return cn_center_default();
}

CNotify_center *CNotify_center_create(const char *bus, uint32_t *out_status) {
    cn_clear_error();
    uint32_t st;
    CNotify_center *c = cn_center_new(bus, &st);
    if (out_status) *out_status = st;
    return c;
}

void CNotify_center_destroy(CNotify_center *c) {
    cn_clear_error();
    if (!c || cn_center_is_default(c)) return;
    /* Tokens die with their center (darwin_notify.h): notify_check on one now answers
     * INVALID_TOKEN instead of reading freed memory. */
    cn_tokens_cancel_for_center(c);
    cn_center_destroy(c);
}

uint32_t CNotify_center_post(CNotify_center *c, const char *name) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    CN_RETURN_IF_FORKED();
    return cn_center_post(c, name);
}

uint32_t CNotify_center_flush(CNotify_center *c, int timeout_ms) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    CN_RETURN_IF_FORKED();
    return cn_center_flush(c, timeout_ms);
}

/* ---- registrations ---- */

/* The one way in for every registration: exact or namespace, CF-style callback or handler. */
static uint32_t add_registration(CNotify_center *c, const char *key, int is_namespace, const void *observer,
                                 CNotify_callback callback, CNotify_handler handler, void *context,
                                 CNotify_release release, uint64_t *out_id) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    if (!callback) {
        CN_RETURN_IF_NULL(handler, "handler");
        CN_RETURN_IF_NULL(out_id, "id pointer");
    }
    uint32_t st = is_namespace ? cn_validate_namespace(key) : CNotify_validate_name(key);
    if (st != NOTIFY_STATUS_OK) return st;
    cn_entry *e = calloc(1, sizeof *e);
    if (e && !(e->name = strdup(key))) { free(e); e = NULL; }
    if (!e) { cn_set_error("out of memory"); return NOTIFY_STATUS_FAILED; }
    e->observer = observer;
    e->cf_callback = callback;
    e->handler = handler;
    e->context = context;
    e->release = release;
    e->is_namespace = is_namespace;
    return cn_center_add(c, e, out_id);
}

uint32_t CNotify_center_add_observer(CNotify_center *c, const void *observer, CNotify_callback callback, const char *name) {
    if (!callback) { cn_set_error("callback is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    return add_registration(c, name, 0, observer, callback, NULL, NULL, NULL, NULL);
}

uint32_t CNotify_center_add_handler(CNotify_center *c, const char *name, CNotify_handler handler, void *context,
                                    CNotify_release release, uint64_t *out_id) {
    return add_registration(c, name, 0, NULL, NULL, handler, context, release, out_id);
}

uint32_t CNotify_center_add_namespace_observer(CNotify_center *c, const void *observer, CNotify_callback callback,
                                               const char *ns) {
    if (!callback) { cn_set_error("callback is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    return add_registration(c, ns, 1, observer, callback, NULL, NULL, NULL, NULL);
}

uint32_t CNotify_center_add_namespace_handler(CNotify_center *c, const char *ns, CNotify_handler handler, void *context,
                                              CNotify_release release, uint64_t *out_id) {
    return add_registration(c, ns, 1, NULL, NULL, handler, context, release, out_id);
}

static int match_observer(const cn_entry *e, const void *observer, uint64_t unused) {
    (void)unused;
    return e->cf_callback && e->observer == observer;
}

static uint32_t remove_observer(CNotify_center *c, const void *observer, const char *key, int is_namespace) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    if (key) {
        uint32_t st = is_namespace ? cn_validate_namespace(key) : CNotify_validate_name(key);
        if (st != NOTIFY_STATUS_OK) return st;
    }
    CN_RETURN_IF_FORKED(); /* nothing of the parent's is ours to change */
    cn_center_remove(c, key, is_namespace, 0, match_observer, observer, 0);
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_center_remove_observer(CNotify_center *c, const void *observer, const char *name) {
    if (!name) { cn_clear_error(); cn_set_error("notification name is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    return remove_observer(c, observer, name, 0);
}

uint32_t CNotify_center_remove_namespace_observer(CNotify_center *c, const void *observer, const char *ns) {
    if (!ns) { cn_clear_error(); return cn_validate_namespace(ns); }
    return remove_observer(c, observer, ns, 1);
}

uint32_t CNotify_center_remove_every_observer(CNotify_center *c, const void *observer) {
    return remove_observer(c, observer, NULL, 0);
}

uint32_t CNotify_center_remove_handler(CNotify_center *c, uint64_t id) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    CN_RETURN_IF_FORKED();
    if (id == 0 || cn_center_remove(c, NULL, 0, id, NULL, NULL, 0) == 0) {
        cn_set_error("no registration with id %llu", (unsigned long long)id);
        return NOTIFY_STATUS_INVALID_TOKEN;
    }
    return NOTIFY_STATUS_OK;
}

/* ---- state, the post being delivered, statistics ---- */

uint32_t CNotify_center_get_state(CNotify_center *c, const char *name, uint64_t *out) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    CN_RETURN_IF_NULL(out, "state pointer");
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    CN_RETURN_IF_FORKED();
    return cn_state_get(c, name, out);
}

uint32_t CNotify_center_set_state(CNotify_center *c, const char *name, uint64_t value) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    CN_RETURN_IF_FORKED();
    return cn_state_set(c, name, value);
}

uint32_t CNotify_center_current_post(CNotify_center *c, CNotify_post_info *out) {
    cn_clear_error();
    CN_RETURN_IF_NULL(c, "center");
    CN_RETURN_IF_NULL(out, "info pointer");
    return cn_center_current_post(c, out);
}

const char *CNotify_center_bus_address(CNotify_center *c) {
    return c ? cn_center_address(c) : "";
}

void CNotify_center_get_stats(CNotify_center *c, CNotify_stats *out) {
    cn_clear_error();
    if (!c || !out) { cn_set_error("center or stats pointer is NULL"); return; }
    cn_center_stats(c, out);
}

uint32_t CNotify_center_set_fast_path(CNotify_center *c, int mode) {
    cn_clear_error();
    if (!c) { cn_set_error("center is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    if (mode != CNOTIFY_FAST_PATH_OFF && mode != CNOTIFY_FAST_PATH_ON && mode != CNOTIFY_FAST_PATH_DIRECT) {
        cn_set_error("fast path mode %d: CNOTIFY_FAST_PATH_OFF, _ON or _DIRECT", mode);
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    cn_center_set_fast_path(c, mode);
    return NOTIFY_STATUS_OK;
}

void CNotify_center_get_fast_path_stats(CNotify_center *c, CNotify_fast_path_stats *out) {
    cn_clear_error();
    if (!c || !out) { cn_set_error("center or stats pointer is NULL"); return; }
    cn_center_fast_path_stats(c, out);
}

void CNotify_center_get_fast_path_guards(CNotify_center *c, CNotify_fast_path_guards *out) {
    cn_clear_error();
    if (!c || !out) { cn_set_error("center or guards pointer is NULL"); return; }
    cn_center_fast_path_guards(c, out);
}

uint64_t CNotify_center_unmatched_posts(CNotify_center *c) {
    cn_clear_error();
    if (!c) { cn_set_error("center is NULL"); return 0; }
    return cn_center_unmatched(c);
}
