/*
 * post.c: the daemon's posts, through one center on its bus. Run as root, its posts of reserved
 * names carry root's credential (docs/PROTOCOL.md "Credentials"), so every receiver believes them.
 * Each post is said on stderr with its reason: the journal then tells what the system did.
 */
#include <stdio.h>
#include "notifyd.h"

static CNotify_center *center;

void nd_post_init(CNotify_center *c) { center = c; }

void nd_post(const char *name, const char *why) {
    uint32_t st = CNotify_center_post(center, name);
    if (st == NOTIFY_STATUS_OK) st = CNotify_center_flush(center, 5000);
    if (st == NOTIFY_STATUS_OK) nd_say("posted %s (%s)", name, why);
    else nd_say("could not post %s (%s): %s: %s", name, why, CNotify_status_string(st), CNotify_last_error());
}

void nd_set_state(const char *name, uint64_t value) {
    uint32_t st = CNotify_center_set_state(center, name, value);
    if (st == NOTIFY_STATUS_OK) nd_say("state of %s set to %llu", name, (unsigned long long)value);
    else nd_say("could not set the state of %s: %s: %s", name, CNotify_status_string(st), CNotify_last_error());
}
