/*
 * transports.c: the entry point of the transport layer, and its one table of transports (as
 * libdbus's open_funcs[] in dbus-transport.c). The center and the API call these functions and
 * nothing in a transport's own folder (.ci/calls checks it): which transport carries a center, where
 * its state lives and what only one transport offers are answered here.
 *
 * Today one row: the bus (transport/bus/) with the same-host fast path around it
 * (transport/fast/); DARWIN_NOTIFY_FAST_PATH=0 switches the fast path off inside it, not here. A
 * transport of another kind of spec would go in a row before it.
 */
#include <stdlib.h>
#include <string.h>
#include "fast/fast.h"

typedef struct cn_transport_row {
    const char *what;
    /* Whether the row takes `spec` (the last row takes every spec). */
    int (*takes)(const char *spec);
    uint32_t (*resolve)(const char *spec, cn_transport_place *out);
    cn_transport *(*open)(const char *spec, cn_transport_place *place, cn_loop *loop, cn_transport_events events);
    uint32_t (*state_dir)(const char *spec, char *out, size_t len, cn_state_place *place);
} cn_transport_row;

static int takes_any(const char *spec) { (void)spec; return 1; }

static uint32_t bus_resolve(const char *spec, cn_transport_place *out) {
    cn_bus_kind kind = CN_BUS_ADDRESS;
    out->address = NULL;
    uint32_t rc = cn_resolve_bus(spec, &kind, &out->address);
    out->kind = (int)kind;
    return rc;
}

static cn_transport *fast_open(const char *spec, cn_transport_place *place, cn_loop *loop, cn_transport_events events) {
    if (!place) return cn_fast_transport_new(spec, 0, CN_BUS_ADDRESS, NULL, loop, events);
    char *address = place->address;
    place->address = NULL;
    return cn_fast_transport_new(spec, 1, (cn_bus_kind)place->kind, address, loop, events);
}

static const cn_transport_row transports[] = {
    { "the bus, with the same-host fast path around it", takes_any, bus_resolve, fast_open, cn_bus_state_dir },
};
#define TRANSPORTS (sizeof transports / sizeof transports[0])

static const cn_transport_row *row_for(const char *spec) {
    for (size_t i = 0; i + 1 < TRANSPORTS; i++)
        if (transports[i].takes(spec)) return &transports[i];
    return &transports[TRANSPORTS - 1];
}

uint32_t cn_transport_resolve(const char *spec, cn_transport_place *out) { return row_for(spec)->resolve(spec, out); }

cn_transport *cn_transport_open(const char *spec, cn_transport_place *place, cn_loop *loop, cn_transport_events events) {
    return row_for(spec)->open(spec, place, loop, events);
}

uint32_t cn_transport_state_dir(const char *spec, char *out, size_t len, cn_state_place *place) {
    return row_for(spec)->state_dir(spec, out, len, place);
}

void cn_transport_set_fast_path(cn_transport *t, int enabled) {
    if (cn_fast_transport_is(t)) cn_fast_transport_set(t, enabled);
}

void cn_transport_fast_path_stats(cn_transport *t, CNotify_fast_path_stats *out) {
    memset(out, 0, sizeof *out);
    if (cn_fast_transport_is(t)) cn_fast_transport_stats(t, out);
}

void cn_transport_fast_path_guards(cn_transport *t, CNotify_fast_path_guards *out) {
    memset(out, 0, sizeof *out);
    if (cn_fast_transport_is(t)) cn_fast_transport_guards(t, out);
}

uint32_t cn_transport_launch_check_in(const char *job, const char *bus, CNotify_launch_handler handler, void *context) {
    return cn_launch_check_in(job, bus, handler, context);
}
