/*
 * test_loop.c: the loop's rounds (loop.c; docs/DESIGN.md "The loop"). A source that only moved
 * data (its handle returned 0) is not prepared again before the next poll: the round is lean. A
 * handle that returns nonzero, cn_loop_unsettle or cn_loop_wake on the loop thread, and a wake
 * from another thread each make the next round a prepared one; a lean round keeps the last
 * prepare's deadline. A fake source over a pipe, one command byte a round; the test waits on a
 * condition for each step (no sleeps).
 */
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../loop.h"
#include "../../base/tests/check.h"

static cn_loop loop;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int pipe_fds[2];
static int prepares, handled, stopped, ended, deadline_seen;
static int prepares_at[16];            /* prepares when the k-th byte was handled */
static uint64_t deadline_at;           /* ms (cn_now_ms): the source's deadline, 0 for none */

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
    if (cap == 0) return 0;
    fds[0] = (struct pollfd){ .fd = pipe_fds[0], .events = POLLIN };
    return 1;
}

/* One command byte: 'd' data only (0), 'c' changed (1), 'u' cn_loop_unsettle, 'w' cn_loop_wake. */
static int fake_handle(void *ctx, const struct pollfd *fds, size_t n) {
    (void)ctx;
    if (n == 0 || !(fds[0].revents & POLLIN)) return 0;
    char byte = 0;
    if (read(pipe_fds[0], &byte, 1) != 1) return 1;
    int result = byte == 'c';
    if (byte == 'u') cn_loop_unsettle(&loop);
    if (byte == 'w') cn_loop_wake(&loop);
    pthread_mutex_lock(&mu);
    if (handled < 16) prepares_at[handled] = prepares;
    handled++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&mu);
    return result;
}

static void fake_stop(void *ctx) { (void)ctx; stopped = 1; }
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
    int p = before < 16 ? prepares_at[before] : -1;
    pthread_mutex_unlock(&mu);
    return p;
}

int main(void) {
    CHECK(pipe(pipe_fds) == 0, "pipe");
    CHECK(cn_loop_init(&loop, (cn_loop_owner){ NULL, loop_ended }) == 0, "init");
    cn_loop_source source = { NULL, fake_prepare, fake_handle, fake_stop };
    CHECK(cn_loop_add_source(&loop, &source) == 0, "add_source");
    CHECK(cn_loop_start(&loop) == 0, "start");
    CHECK(await_at_least(&prepares, 1), "the first round prepares");

    /* The wake written by cn_loop_add_source before the thread ran may be seen by the same poll
     * as the first byte written here (the first prepare counted does not mean the thread polled):
     * a 'c' first, so the rounds measured below start after a prepared round with no wake left. */
    command('c');

    /* Data only: the round after it polls again without preparing. */
    int p1 = command('d');
    int p2 = command('d');
    int p3 = command('d');
    CHECK(p2 == p1 && p3 == p1, "after data only, no prepare: %d, %d, %d", p1, p2, p3);

    /* A handle that changed something: the next round prepares, once; then lean again. */
    int pc = command('c');
    int pd = command('d');
    int pe = command('d');
    CHECK(pd == pc + 1 && pe == pd, "after a change, one prepare: %d, %d, %d", pc, pd, pe);

    /* cn_loop_unsettle on the loop thread: the next round prepares. */
    int pu = command('u');
    pd = command('d');
    CHECK(pd == pu + 1, "after unsettle, one prepare: %d, %d", pu, pd);

    /* cn_loop_wake on the loop thread, in a handle: the next round prepares (no eventfd). */
    int pw = command('w');
    pd = command('d');
    CHECK(pd == pw + 1, "after a wake on the loop thread, one prepare: %d, %d", pw, pd);

    /* A wake from another thread: a prepared round, with nothing written to the pipe. */
    int before = get(&prepares);
    cn_loop_wake(&loop);
    CHECK(await_at_least(&prepares, before + 1), "a wake from another thread makes a prepared round");

    /* A deadline named by the last prepare holds in the lean rounds after it. */
    pthread_mutex_lock(&mu);
    deadline_at = cn_now_ms() + 1000;
    pthread_mutex_unlock(&mu);
    int pdl = command('c'); /* a prepared round next: it names the deadline */
    int pl1 = command('d'); /* prepared (after 'c'), and once more if this machine stalled past the deadline */
    int pl2 = command('d'); /* lean, the deadline still ahead unless this machine stalled */
    CHECK(pl1 > pdl, "the deadline's round prepared: %d, %d", pdl, pl1);
    CHECK(await_at_least(&deadline_seen, 1), "the deadline came in a lean round's wait (%d, %d)", pl1, pl2);

    CHECK(cn_loop_stop(&loop) == 1, "stopped from another thread");
    CHECK(stopped && ended, "the source stopped (%d) and the owner told (%d)", stopped, ended);
    cn_loop_free(&loop);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return check_result("test_loop");
}
