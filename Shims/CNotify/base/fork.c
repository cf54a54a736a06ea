/*
 * fork.c: the child inherits the parent's D-Bus socket but not its I/O thread. Writing on that
 * socket from the child would interleave bytes with the parent's stream and corrupt it, so in a
 * forked child every call returns NOTIFY_STATUS_OPT_DISABLE until exec, as Apple's library does,
 * and the exit-time flush leaves the inherited connections alone.
 */
#include <pthread.h>
#include "base.h"

static volatile int forked_child;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

static void mark_child(void) { forked_child = 1; }
static void install(void) { pthread_atfork(NULL, NULL, mark_child); }

void cn_fork_guard_install(void) { pthread_once(&guard_once, install); }

int cn_is_forked_child(void) { return forked_child; }

uint32_t cn_fork_check(void) {
    if (!forked_child) return NOTIFY_STATUS_OK;
    cn_set_error("this process was forked from one that used DarwinNotify; notifications are "
                 "disabled in the child until it execs (its parent's bus connection cannot be shared)");
    return NOTIFY_STATUS_OPT_DISABLE;
}
