/*
 * loop.c: darwin-notifyd's one epoll set, the floor of the daemon's files: each polled file
 * carries its own callback (nd_file, as dbus-broker's dispatch.h), and what the daemon says goes
 * to stderr (the journal under systemd). Everything else calls down into this file; it calls no
 * other file of the daemon (a source's callback is reached through its nd_file).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include "notifyd.h"

static int epoll_fd = -1;

void nd_say(const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "darwin-notifyd: %s\n", line);
}

int nd_watch(nd_file *file, int pri) {
    struct epoll_event ev = { .events = pri ? (EPOLLPRI | EPOLLERR) : EPOLLIN, .data.ptr = file };
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, file->fd, &ev) == 0) return 0;
    nd_say("epoll: %s", strerror(errno));
    return -1;
}


void nd_unwatch(nd_file *file) { epoll_ctl(epoll_fd, EPOLL_CTL_DEL, file->fd, NULL); }

int nd_loop_init(void) {
    epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    return epoll_fd < 0 ? -1 : 0;
}

int nd_loop_once(void) {
    struct epoll_event evs[16];
    int n = epoll_wait(epoll_fd, evs, 16, -1);
    if (n < 0 && errno != EINTR) {
        nd_say("epoll_wait: %s", strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        nd_file *f = evs[i].data.ptr;
        f->ready(f, evs[i].events);
    }
    return 0;
}
