/*
 * fast_files.c: the fast path's poll set: one epoll descriptor, polled as one source of the
 * center's loop, holding the listener and every connection of either side. Each polled record
 * begins with a cn_fast_file, which names its channel's connection and its own callback (as
 * dbus-broker's DispatchFile): the dispatch knows no kind of record. Loop thread, but for
 * cn_fast_file_close, which a posting thread calls with peers.lock held.
 */
#include <sys/epoll.h>
#include "fast.h"

int cn_fast_watch(cn_fast *f, cn_fast_file *file, uint32_t events) {
    struct epoll_event ev = { .events = events, .data.ptr = file };
    return epoll_ctl(f->epoll_fd, EPOLL_CTL_ADD, file->ch->fd, &ev) == 0 ? 0 : -1;
}

void cn_fast_rewatch(cn_fast *f, cn_fast_file *file, uint32_t events) {
    struct epoll_event ev = { .events = events, .data.ptr = file };
    epoll_ctl(f->epoll_fd, EPOLL_CTL_MOD, file->ch->fd, &ev);
}

void cn_fast_unwatch(cn_fast *f, cn_fast_file *file) { epoll_ctl(f->epoll_fd, EPOLL_CTL_DEL, file->ch->fd, NULL); }

void cn_fast_file_close(cn_fast *f, cn_fast_file *file) {
    if (!file->ch) return;
    /* Out of the set first (a descriptor not in it is refused, and harmless): a closed one's
     * number may be another's at once. */
    cn_fast_unwatch(f, file);
    f->chan->close(file->ch);
    file->ch = NULL;
}

int cn_fast_dispatch(cn_fast *f) {
    struct epoll_event events[64];
    int ready = epoll_wait(f->epoll_fd, events, 64, 0), changed = ready < 0;
    for (int i = 0; i < ready; i++) {
        cn_fast_file *file = events[i].data.ptr;
        /* A callback closes or frees its own record only (each close takes its descriptor out
         * of the set): later events of this batch name records still alive. */
        changed |= file->ready(f, file, events[i].events);
    }
    return changed;
}
