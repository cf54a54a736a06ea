/*
 * fast_files.c: the fast path's poll set: one epoll descriptor, polled as one source of the
 * center's loop, holding the listener and every connection of either side, but for a few proved
 * connections polled by the loop itself (direct). Each polled record begins with a cn_fast_file,
 * which names its channel's connection and its own callback (as dbus-broker's DispatchFile): the
 * dispatch knows no kind of record. The set is also where the loop waits (loop.c): its events
 * come through cn_loop_epoll_events, and a descriptor the loop polls (the direct files) is out of
 * it as this file's, in it as the loop's. Loop thread, but for cn_fast_watch and
 * cn_fast_file_close of a poster's connections to its observers, which a posting thread calls
 * with peers.lock held (those are never direct, have no bell, and touch no field of cn_fast here).
 *
 * A connection with a bell (channel.h: the ring) is two entries of the epoll set, both naming its
 * file: the bell, edge-triggered, while it is watched for EPOLLIN, and its descriptor for the
 * rest (hang-ups). It is never direct (poll is level-triggered, and a bell is never read). A
 * close takes the file's later events out of the batch being dispatched, which may name it twice.
 */
#include <string.h>
#include <sys/epoll.h>
#include "fast.h"

/* Out of the direct files (loop thread): the prepared poll set no longer says what is polled.
 * The loop's entry for it in the set makes way for this file's own. */
static void undirect(cn_fast *f, cn_fast_file *file) {
    cn_loop_epoll_release(f->loop, file->ch->fd);
    file->direct = 0;
    for (size_t i = 0; i < f->ndirect; i++)
        if (f->direct[i] == file) {
            f->direct[i] = f->direct[--f->ndirect];
            break;
        }
    f->direct_changes++;
    f->direct_wanted = 1;
}

/* A bell's entry for a file watched for `events`: added, changed (which arms its edge again) or
 * taken out, as it was watched for `before`. */
static int bell_watch(cn_fast *f, cn_fast_file *file, uint32_t before, uint32_t events) {
    struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.ptr = file };
    int was = (before & EPOLLIN) != 0, is = (events & EPOLLIN) != 0;
    if (!was && !is) return 0;
    int op = was && is ? EPOLL_CTL_MOD : is ? EPOLL_CTL_ADD : EPOLL_CTL_DEL;
    return epoll_ctl(f->epoll_fd, op, file->ch->bell, &ev) == 0 ? 0 : -1;
}

int cn_fast_watch(cn_fast *f, cn_fast_file *file, uint32_t events) {
    file->events = events;
    file->direct = 0;
    int bell = file->ch->bell >= 0;
    struct epoll_event ev = { .events = bell ? events & ~(uint32_t)EPOLLIN : events, .data.ptr = file };
    if (epoll_ctl(f->epoll_fd, EPOLL_CTL_ADD, file->ch->fd, &ev) != 0) return -1;
    if (bell && bell_watch(f, file, 0, events) != 0) {
        epoll_ctl(f->epoll_fd, EPOLL_CTL_DEL, file->ch->fd, NULL);
        return -1;
    }
    return 0;
}

void cn_fast_bell_set(cn_fast *f, cn_fast_file *file) {
    if (file->direct) undirect(f, file); /* never, while a bell comes with a connection's first read */
    else epoll_ctl(f->epoll_fd, EPOLL_CTL_DEL, file->ch->fd, NULL);
    cn_fast_watch(f, file, file->events);
}

void cn_fast_rearm(cn_fast *f, cn_fast_file *file) {
    if (file->ch && file->ch->bell >= 0) bell_watch(f, file, file->events, file->events);
}

void cn_fast_rewatch(cn_fast *f, cn_fast_file *file, uint32_t events) {
    if (file->direct && events == EPOLLIN) return; /* read as it is */
    if (file->ch->bell >= 0) {
        uint32_t before = file->events;
        file->events = events;
        struct epoll_event ev = { .events = events & ~(uint32_t)EPOLLIN, .data.ptr = file };
        epoll_ctl(f->epoll_fd, EPOLL_CTL_MOD, file->ch->fd, &ev);
        bell_watch(f, file, before, events);
        return;
    }
    file->events = events;
    struct epoll_event ev = { .events = events, .data.ptr = file };
    if (file->direct) { /* back into the epoll set */
        undirect(f, file);
        epoll_ctl(f->epoll_fd, EPOLL_CTL_ADD, file->ch->fd, &ev);
    } else {
        epoll_ctl(f->epoll_fd, EPOLL_CTL_MOD, file->ch->fd, &ev);
    }
    if (events == EPOLLIN) f->direct_wanted = 1;
}

void cn_fast_unwatch(cn_fast *f, cn_fast_file *file) {
    if (file->direct) undirect(f, file);
    else epoll_ctl(f->epoll_fd, EPOLL_CTL_DEL, file->ch->fd, NULL);
    if (file->ch->bell >= 0) bell_watch(f, file, file->events, 0);
    /* The batch being dispatched may name it again (a bell's other entry, or an event the loop's
     * wait took before this, in another source's handle): not after this. Only the loop thread
     * dispatches. */
    if (cn_loop_on_thread(f->loop)) {
        for (int i = f->batch_at + 1; i < f->batch_n; i++)
            if (f->batch[i].data.ptr == file) f->batch[i].data.ptr = NULL;
        cn_loop_epoll_forget(f->loop, file);
    }
}

void cn_fast_file_close(cn_fast *f, cn_fast_file *file) {
    if (!file->ch) return;
    /* Out of the set first (a descriptor not in it is refused, and harmless): a closed one's
     * number may be another's at once. */
    cn_fast_unwatch(f, file);
    f->chan->close(file->ch);
    file->ch = NULL;
}

int cn_fast_direct(cn_fast *f, cn_fast_file *file) {
    if (file->direct || !file->ch || file->ch->bell >= 0 || file->events != EPOLLIN || f->ndirect == CN_FAST_DIRECT_MAX) return 0;
    if (epoll_ctl(f->epoll_fd, EPOLL_CTL_DEL, file->ch->fd, NULL) != 0) return 0;
    file->direct = 1;
    f->direct[f->ndirect++] = file;
    return 1;
}

CN_HOT int cn_fast_dispatch(cn_fast *f) {
    struct epoll_event events[64];
    int ready = cn_loop_epoll_events(f->loop, f->epoll_fd, events, 64), changed = ready < 0;
    f->batch = events;
    f->batch_n = ready;
    for (f->batch_at = 0; f->batch_at < ready; f->batch_at++) {
        cn_fast_file *file = events[f->batch_at].data.ptr;
        /* A callback closes or frees its own record only (each close takes its descriptor out
         * of the set, and a file with a bell its second entry out of this batch): later events
         * of this batch name records still alive. */
        if (file) changed |= file->ready(f, file, events[f->batch_at].events);
    }
    f->batch_n = 0;
    return changed;
}

/* A direct file is out of the epoll set: one the loop had no room to poll would never be read. */
_Static_assert(1 + CN_FAST_DIRECT_MAX <= CN_LOOP_FDS_PER_SOURCE, "the loop polls every direct file");

size_t cn_fast_files_prepare(cn_fast *f, struct pollfd *fds, size_t cap) {
    if (cap == 0) return 0;
    fds[0] = (struct pollfd){ .fd = f->epoll_fd, .events = POLLIN };
    size_t n = 1;
    f->ndirect_polled = 0;
    for (size_t i = 0; i < f->ndirect && n < cap; i++) {
        fds[n++] = (struct pollfd){ .fd = f->direct[i]->ch->fd, .events = POLLIN };
        f->direct_polled[f->ndirect_polled++] = f->direct[i];
    }
    f->direct_prepared = f->direct_changes;
    return n;
}

CN_HOT int cn_fast_files_handle(cn_fast *f, const struct pollfd *fds, size_t n) {
    if (n == 0) return 0;
    int changed = 0;
    /* The set's events first: the loop's wait took them from the kernel already (loop.c), so they
     * are dispatched in this round whatever the direct files do; a close during the batch takes
     * the closed file's later events out of it (cn_fast_unwatch). */
    if (fds[0].revents & POLLIN) changed |= cn_fast_dispatch(f);
    else if (fds[0].revents) changed = 1;
    /* Then the direct files. Their records are alive while no file left them since the prepare
     * (a close is a leaving); once one has, the rest wait for the next, prepared, round (what is
     * ready stays ready: poll and the loop's one-shot entries are level-triggered). */
    for (size_t i = 1; i < n && i - 1 < f->ndirect_polled; i++) {
        if (!fds[i].revents) continue;
        if (f->direct_changes != f->direct_prepared || (fds[i].revents & POLLNVAL)) return 1;
        cn_fast_file *file = f->direct_polled[i - 1];
        /* poll's POLLIN, POLLERR and POLLHUP are epoll's EPOLLIN, EPOLLERR and EPOLLHUP */
        changed |= file->ready(f, file, (uint32_t)(fds[i].revents & (POLLIN | POLLERR | POLLHUP)));
    }
    return changed | (f->direct_changes != f->direct_prepared);
}
