/*
 * test_lock_order.c: the lock order's check (base/lock_order.c). Locks taken in the table's order
 * pass and are known held; one taken out of order aborts the process, naming both locks (seen in
 * a child); a trylock is noted held, not checked; release in any order.
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../base.h"
#include "check.h"

/* Runs `fn` in a child with stderr captured; the child's status, and what it said. */
static int in_child(void (*fn)(void), char *said, size_t cap) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        signal(SIGABRT, SIG_DFL);
        fn();
        _exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fds[0], said + n, cap - 1 - n)) > 0) n += (size_t)r;
    said[n] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

static cn_mutex outbox = CN_MUTEX_INITIALIZER(CN_LOCK_OUTBOX), subs = CN_MUTEX_INITIALIZER(CN_LOCK_SUBS),
                peers = CN_MUTEX_INITIALIZER(CN_LOCK_PEERS), registry_a = CN_MUTEX_INITIALIZER(CN_LOCK_REGISTRY),
                registry_b = CN_MUTEX_INITIALIZER(CN_LOCK_REGISTRY);

static void out_of_order(void) {
    cn_mutex_lock(&outbox);
    cn_mutex_lock(&subs); /* subs.lock is above outbox.lock: must abort here */
    cn_mutex_unlock(&subs);
    cn_mutex_unlock(&outbox);
}

static void same_level_twice(void) {
    cn_mutex_lock(&registry_a);
    cn_mutex_lock(&registry_b); /* two registries are never held together */
}

static void in_order(void) {
    cn_mutex_lock(&subs);
    cn_mutex_lock(&outbox);
    cn_mutex_lock(&peers);
    cn_mutex_unlock(&outbox); /* not the last taken: released out of order is fine */
    cn_mutex_unlock(&peers);
    cn_mutex_unlock(&subs);
}

int main(void) {
#if !CN_LOCK_CHECK
    fprintf(stderr, "test_lock_order: built without CN_LOCK_CHECK\n");
    return 1;
#endif
    char said[1024];
    int status = in_child(in_order, said, sizeof said);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "in order: status %d, said '%s'", status, said);

    status = in_child(out_of_order, said, sizeof said);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "out of order: status %d", status);
    CHECK(strstr(said, "taking subs.lock") && strstr(said, "while holding outbox.lock"), "said '%s'", said);

    status = in_child(same_level_twice, said, sizeof said);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "two registries: status %d", status);
    CHECK(strstr(said, "taking registry.lock") && strstr(said, "while holding registry.lock"), "said '%s'", said);

    /* Held, as CN_ASSERT_HELD asks it: by this thread only. */
    CHECK(!cn_mutex_is_held(&outbox), "outbox held before");
    cn_mutex_lock(&outbox);
    CHECK(cn_mutex_is_held(&outbox), "outbox not held after lock");
    /* A trylock of a lock above is noted, not checked (it never waits). */
    CHECK(cn_mutex_trylock(&subs) == 0, "trylock subs");
    CHECK(cn_mutex_is_held(&subs), "subs not held after trylock");
    cn_mutex_unlock(&subs);
    cn_mutex_unlock(&outbox);
    CHECK(!cn_mutex_is_held(&outbox) && !cn_mutex_is_held(&subs), "still held after unlock");

    /* Every level has its name. */
    for (int level = 1; level < CN_LOCK_LEVELS; level++)
        CHECK(strcmp(cn_lock_level_name(level), "an unnamed lock") != 0, "level %d has no name", level);
    return check_result("test_lock_order");
}
