/*
 * launch_api.c: the public entry point of launch on post (CNotify_launch_check_in,
 * darwin_notify.h): argument checks first, as in every public function, then the bus's check-in
 * (transport/bus/bus_launch.c), which has no center: a job's events come from the launcher alone.
 */
#include <string.h>
#include "api.h"

uint32_t CNotify_launch_check_in(const char *job, const char *bus, CNotify_launch_handler handler, void *context) {
    cn_clear_error();
    CN_RETURN_IF_NULL(handler, "handler");
    if (job && (!job[0] || strlen(job) > 200)) {
        cn_set_error("a job's label is 1 to 200 bytes (the declaration's file name without .conf)");
        return NOTIFY_STATUS_INVALID_REQUEST;
    }
    CN_RETURN_IF_FORKED();
    return cn_transport_launch_check_in(job, bus, handler, context);
}
