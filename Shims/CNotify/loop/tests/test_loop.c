/*
 * test_loop.c: the loop's rounds (loop.c; docs/DESIGN.md "The loop"). A source that only moved
 * data (its handle returned 0) is not prepared again before the next poll: the round is lean. A
 * handle that returns nonzero, cn_loop_unsettle or cn_loop_wake on the loop thread, and a wake
 * from another thread each make the next round a prepared one; a lean round keeps the last
 * prepare's deadline. A fake source over a pipe, one command byte a round; the test waits on a
 * condition for each step (no sleeps).
 *
 * All of it twice: alone, and beside a source with an epoll set of its own (wait_set), in which
 * the loop then waits, the pipes added to it as the loop's entries. Then also: the set's own
 * event reaches its source with no prepare; and a second pipe replaced by one with the same
 * number while a copy of the old read end lives: the old pipe written gives nothing to anyone
 * and does not spin the loop, the new one written is read once (the source noted the close, as
 * it must: cn_loop_note_close).
 */
#include <fcntl.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include "../loop.h"
#include "../../base/tests/check.h"

static cn_loop loop;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int pipe_fds[2];
static int prepares, handled, stopped, ended, deadline_seen;
static int prepares_at[64];            /* prepares when the k-th byte was handled */
static uint64_t deadline_at;           /* ms (cn_now_ms): the source's deadline, 0 for none */
static int victim[2];                  /* a second pipe the source polls, replaced by 'x' */
static int victim_hits;                /* its reads (100 for a readiness with nothing to read) */
static int stale_read = -1, stale_write = -1; /* the victim pipe 'x' replaced */
static int own_read = -1, own_write = -1; /* 'k': the set's source's own pipe, under the victim's old number */
static int own_events;                    /* its events, reaching the set's source */
static int set_fd = -1, bell = -1, bell_events; /* the source with a set (below) */

static size_t fake_prepare(void *ctx, struct pollfd *fds, size_t cap, int *timeout_ms) {
    (void)ctx;
    pthread_mutex_lock(&mu);
    prepares++;
    uint64_t now = cn_now_ms();
    if (deadline_at && now >= deadline_at) {
        deadline_at = 0;
        deadline_seen = 1;
    }
    if (deadline_at) cn_loop_timeout_until(timeout_ms, deadline_at, now);
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&mu);
    if (cap < 2) return 0;
    fds[0] = (struct pollfd){ .fd = pipe_fds[0], .events = POLLIN };
    fds[1] = (struct pollfd){ .fd = victim[0], .events = POLLIN };
    return 2;
}

/* One command byte: 'd' data only (0), 'c' changed (1), 'u' cn_loop_unsettle, 'w' cn_loop_wake. */
static int fake_handle(void *ctx, const struct pollfd *fds, size_t n) {
    (void)ctx;
    if (n == 2 && (fds[1].revents & POLLIN)) {
        char c;
        pthread_mutex_lock(&mu);
        victim_hits += read(victim[0], &c, 1) == 1 ? 1 : 100; /* nonblocking */
        pthread_cond_broadcast(&changed);
        pthread_mutex_unlock(&mu);
    }
    if (n == 0 || !(fds[0].revents & POLLIN)) return 0;
    char byte = 0;
    if (read(pipe_fds[0], &byte, 1) != 1) return 1;
    int result = byte == 'c' || byte == 'x' || byte == 'k';
    if (byte == 'x') { /* a new victim pipe under the old read end's number; the old one's lives on in a dup */
        int number = victim[0], fresh[2];
        cn_loop_note_close(&loop); /* as a source must, before it closes a descriptor it named */
        stale_read = dup(victim[0]);
        stale_write = victim[1];
        close(victim[0]);
        if (pipe2(fresh, O_NONBLOCK) != 0) abort();
        if (fresh[0] != number) { /* the lowest free number: the old one, unless this process raced */
            dup2(fresh[0], number);
            close(fresh[0]);
        }
        victim[0] = number;
        victim[1] = fresh[1];
    }
    if (byte == 'k' && set_fd >= 0) { /* the victim closed (noted), its number taken by the set's source */
        int number = victim[0];
        cn_loop_note_close(&loop);
        close(victim[0]);
        close(victim[1]);
        int fresh[2];
        if (pipe2(fresh, O_NONBLOCK) != 0) abort();
        if (fresh[0] != number) {
            dup2(fresh[0], number);
            close(fresh[0]);
        }
        own_read = number;
        own_write = fresh[1];
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &own_read };
        if (epoll_ctl(set_fd, EPOLL_CTL_ADD, own_read, &ev) != 0) abort();
        if (pipe2(victim, O_NONBLOCK) != 0) abort(); /* the victim again, under another number */
    }
    if (byte == 'u') cn_loop_unsettle(&loop);
    if (byte == 'w') cn_loop_wake(&loop);
    pthread_mutex_lock(&mu);
    if (handled < 64) prepares_at[handled] = prepares;
    handled++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&mu);
    return result;
}

static void fake_stop(void *ctx) { (void)ctx; stopped = 1; }

/* The source with a set: an epoll set holding an eventfd (the bell), edge-triggered. */
static size_t set_prepare(void *ctx, struct pollfd *fds, size_t cap, int *timeout_ms) {
    (void)ctx;
    (void)timeout_ms;
    if (cap == 0) return 0;
    fds[0] = (struct pollfd){ .fd = set_fd, .events = POLLIN };
    return 1;
}
static int set_handle(void *ctx, const struct pollfd *fds, size_t n) {
    (void)ctx;
    if (n == 0 || !(fds[0].revents & POLLIN)) return 0;
    struct epoll_event ev[8];
    int got = cn_loop_epoll_events(&loop, set_fd, ev, 8);
    pthread_mutex_lock(&mu);
    for (int k = 0; k < got; k++) {
        bell_events += ev[k].data.ptr == &bell;
        if (ev[k].data.ptr == &own_read) {
            char c;
            while (read(own_read, &c, 1) == 1) own_events++;
        }
    }
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&mu);
    return 0;
}
static void set_stop(void *ctx) { (void)ctx; }
static int set_wait_set(void *ctx) { (void)ctx; return set_fd; }
static void loop_ended(void *ctx) { (void)ctx; ended = 1; }

/* Waits (at most 10 s) until *value reaches at least `want`; 1 if it did. */
static int await_at_least(const int *value, int want) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    pthread_mutex_lock(&mu);
    int rc = 0;
    while (*value < want && rc == 0) rc = pthread_cond_timedwait(&changed, &mu, &deadline);
    int reached = *value >= want;
    pthread_mutex_unlock(&mu);
    return reached;
}

static int get(const int *value) {
    pthread_mutex_lock(&mu);
    int v = *value;
    pthread_mutex_unlock(&mu);
    return v;
}

/* Writes one command byte and waits for its handling; returns the prepares counted then. */
static int command(char byte) {
    int before = get(&handled);
    if (write(pipe_fds[1], &byte, 1) != 1) return -1;
    CHECK(await_at_least(&handled, before + 1), "byte '%c' handled", byte);
    pthread_mutex_lock(&mu);
    int p = before < 64 ? prepares_at[before] : -1;
    pthread_mutex_unlock(&mu);
    return p;
}

static void suite(int with_set) {
    const char *mode = with_set ? "beside a set" : "alone";
    prepares = handled = stopped = ended = deadline_seen = bell_events = victim_hits = own_events = 0;
    deadline_at = 0;
    CHECK(pipe(pipe_fds) == 0 && pipe2(victim, O_NONBLOCK) == 0, "pipes");
    CHECK(cn_loop_init(&loop, (cn_loop_owner){ NULL, loop_ended }) == 0, "init");
    cn_loop_source source = { NULL, fake_prepare, fake_handle, fake_stop, NULL };
    CHECK(cn_loop_add_source(&loop, &source) == 0, "add_source");
    if (with_set) {
        set_fd = epoll_create1(EPOLL_CLOEXEC);
        bell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.ptr = &bell };
        CHECK(set_fd >= 0 && bell >= 0 && epoll_ctl(set_fd, EPOLL_CTL_ADD, bell, &ev) == 0, "the set");
        cn_loop_source with = { NULL, set_prepare, set_handle, set_stop, set_wait_set };
        CHECK(cn_loop_add_source(&loop, &with) == 0, "add_source with a set");
    }
    CHECK(cn_loop_start(&loop) == 0, "start");
    CHECK(await_at_least(&prepares, 1), "the first round prepares");

    /* The wake written by cn_loop_add_source before the thread ran may be seen by the same poll
     * as the first byte written here (the first prepare counted does not mean the thread polled):
     * a 'c' first, so the rounds measured below start after a prepared round with no wake left. */
    command('c');

    /* Data only: the round after it polls again without preparing. */
    uint64_t waits = atomic_load(&loop.set_waits);
    int p1 = command('d');
    int p2 = command('d');
    int p3 = command('d');
    CHECK(p2 == p1 && p3 == p1, "%s: after data only, no prepare: %d, %d, %d", mode, p1, p2, p3);
    if (with_set) CHECK(atomic_load(&loop.set_waits) >= waits + 2, "the rounds waited in the set");
    else CHECK(atomic_load(&loop.set_waits) == 0, "no set, no wait in one");

    if (with_set) { /* the set's own event reaches its source, with no prepare */
        uint64_t one = 1;
        int before = get(&prepares);
        CHECK(write(bell, &one, sizeof one) == sizeof one, "bell");
        CHECK(await_at_least(&bell_events, 1), "the set's event reached its source");
        int pd = command('d');
        CHECK(pd == before && get(&prepares) == before, "and no prepare for it: %d, %d", before, get(&prepares));
    }

    /* A handle that changed something: the next round prepares, once; then lean again. */
    int pc = command('c');
    int pd = command('d');
    int pe = command('d');
    CHECK(pd == pc + 1 && pe == pd, "%s: after a change, one prepare: %d, %d, %d", mode, pc, pd, pe);

    /* cn_loop_unsettle on the loop thread: the next round prepares. */
    int pu = command('u');
    pd = command('d');
    CHECK(pd == pu + 1, "%s: after unsettle, one prepare: %d, %d", mode, pu, pd);

    /* cn_loop_wake on the loop thread, in a handle: the next round prepares (no eventfd). */
    int pw = command('w');
    pd = command('d');
    CHECK(pd == pw + 1, "%s: after a wake on the loop thread, one prepare: %d, %d", mode, pw, pd);

    /* A wake from another thread: a prepared round, with nothing written to the pipe. */
    int before = get(&prepares);
    cn_loop_wake(&loop);
    CHECK(await_at_least(&prepares, before + 1), "%s: a wake from another thread makes a prepared round", mode);

    /* The victim pipe replaced under the same number (its entry armed, never fired) while a copy
     * of its old read end lives. The old pipe written: nobody is given it, and the loop does not
     * spin (a prepared round at most, then lean). The new one written: read once. */
    command('d');
    command('x');
    command('d');
    int px = command('d');
    CHECK(write(stale_write, "s", 1) == 1, "the old pipe written");
    int py = command('d');
    int pz = command('d');
    int pv = command('d');
    CHECK(py <= px + 1 && pz <= px + 2 && pv == pz, "%s: the old pipe's entry: %d, %d, %d, %d", mode, px, py, pz, pv);
    CHECK(get(&victim_hits) == 0, "%s: the old pipe's readiness was given to the new one (%d)", mode, get(&victim_hits));
    char left;
    CHECK(read(stale_read, &left, 1) == 1, "%s: the old pipe's byte was not taken by anyone", mode);
    CHECK(write(victim[1], "n", 1) == 1, "the new pipe written");
    CHECK(await_at_least(&victim_hits, 1) && get(&victim_hits) == 1, "%s: the new pipe read once (%d)", mode, get(&victim_hits));
    close(stale_read);
    close(stale_write);

    if (with_set) {
        /* The victim closed (the close noted) and its number taken at once by the set's source
         * for an entry of its own, before the next prepare: that prepare must not delete the
         * number's entry (it is the source's now), and the source's pipe is read. */
        command('d');
        command('k');
        command('d');
        CHECK(write(own_write, "o", 1) == 1, "the source's own pipe written");
        CHECK(await_at_least(&own_events, 1), "the source's own entry under a reused number was kept (%d)", get(&own_events));
        epoll_ctl(set_fd, EPOLL_CTL_DEL, own_read, NULL);
        close(own_read);
        close(own_write);
        own_read = own_write = -1;
    }

    /* A deadline named by the last prepare holds in the lean rounds after it. */
    pthread_mutex_lock(&mu);
    deadline_at = cn_now_ms() + 1000;
    pthread_mutex_unlock(&mu);
    int pdl = command('c'); /* a prepared round next: it names the deadline */
    int pl1 = command('d'); /* prepared (after 'c'), and once more if this machine stalled past the deadline */
    int pl2 = command('d'); /* lean, the deadline still ahead unless this machine stalled */
    CHECK(pl1 > pdl, "%s: the deadline's round prepared: %d, %d", mode, pdl, pl1);
    CHECK(await_at_least(&deadline_seen, 1), "%s: the deadline came in a lean round's wait (%d, %d)", mode, pl1, pl2);

    CHECK(cn_loop_stop(&loop) == 1, "stopped from another thread");
    CHECK(stopped && ended, "the source stopped (%d) and the owner told (%d)", stopped, ended);
    cn_loop_free(&loop);
    memset(&loop, 0, sizeof loop);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    close(victim[0]);
    close(victim[1]);
    if (with_set) {
        close(bell);
        close(set_fd);
    }
}

int main(void) {
    suite(0);
    suite(1);
    return check_result("test_loop");
}
