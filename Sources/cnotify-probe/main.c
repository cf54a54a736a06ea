/*
 * cnotify-probe: a plain C client of CNotify, run as a child process by the integration tests
 * and by notify-bench. It speaks on stdout, one line per event, and prints "ready" once its
 * registrations are in place (the tests' readiness handshake). Bus: DARWIN_NOTIFY_BUS.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <darwin_notify.h>
#include <notify.h>
#include "probe.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static long delivered, target = -1;

void say(const char *fmt, const char *arg) {
    pthread_mutex_lock(&lock);
    printf(fmt, arg);
    fflush(stdout);
    pthread_mutex_unlock(&lock);
}

/* The readiness handshake of the long-running roles: say "ready", then idle until the parent
 * closes our stdin. */
static int ready_then_idle(void) {
    say("%s\n", "ready");
    char buf[16];
    while (fgets(buf, sizeof buf, stdin)) {}
    return 0;
}

int fail(const char *what, uint32_t st) {
    fprintf(stderr, "cnotify-probe: %s: %s (%u): %s\n", what, CNotify_status_string(st), st, CNotify_last_error());
    return 1;
}

/* Waits until `delivered` reaches `target`, or fails loudly after `secs`. */
static int wait_target(int secs) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += secs;
    pthread_mutex_lock(&lock);
    while (delivered < target)
        if (pthread_cond_timedwait(&cond, &lock, &dl) == ETIMEDOUT) break;
    int ok = delivered >= target;
    long got = delivered;
    pthread_mutex_unlock(&lock);
    if (!ok) fprintf(stderr, "cnotify-probe: timed out after %d s with %ld of %ld notifications\n", secs, got, target);
    return ok ? 0 : 2;
}

static void count_one(void) {
    pthread_mutex_lock(&lock);
    delivered++;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void print_cb(CNotify_center *c, void *observer, const char *name, const void *o, const void *u) {
    (void)c; (void)observer; (void)o; (void)u;
    say("%s\n", name);
    count_one();
}

/* observe COUNT NAME...: a CF-style observer per name; exits after COUNT deliveries. */
static int cmd_observe(int argc, char **argv) {
    if (argc < 2) return fail("usage: observe COUNT NAME...", NOTIFY_STATUS_INVALID_REQUEST);
    target = atol(argv[0]);
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    for (int i = 1; i < argc; i++) {
        uint32_t st = CNotify_center_add_observer(c, &target, print_cb, argv[i]);
        if (st != NOTIFY_STATUS_OK) return fail("add_observer", st);
    }
    say("%s\n", "ready");
    return wait_target(60);
}

/* post NAME COUNT: posts NAME COUNT times, in order. */
static int cmd_post(int argc, char **argv) {
    if (argc < 2) return fail("usage: post NAME COUNT", NOTIFY_STATUS_INVALID_REQUEST);
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++) {
        uint32_t st = notify_post(argv[0]);
        if (st != NOTIFY_STATUS_OK) return fail("notify_post", st);
    }
    uint32_t st = CNotify_center_flush(CNotify_center_get_darwin_notify_center(), 10000);
    return st == NOTIFY_STATUS_OK ? 0 : fail("flush", st);
}

/* reentrant NAME: the handler posts NAME again until its counter reaches 10. */
static int depth, counter;
static void reentrant_cb(CNotify_center *c, void *observer, const char *name, const void *o, const void *u) {
    (void)observer; (void)o; (void)u;
    depth++;
    counter++;
    printf("%d depth=%d\n", counter, depth);
    fflush(stdout);
    if (counter < 10) CNotify_center_post(c, name);
    depth--;
    count_one();
}

static int cmd_reentrant(int argc, char **argv) {
    if (argc < 1) return fail("usage: reentrant NAME", NOTIFY_STATUS_INVALID_REQUEST);
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    uint32_t st = CNotify_center_add_observer(c, &depth, reentrant_cb, argv[0]);
    if (st != NOTIFY_STATUS_OK) return fail("add_observer", st);
    target = 10;
    st = CNotify_center_post(c, argv[0]);
    if (st != NOTIFY_STATUS_OK) return fail("post", st);
    return wait_target(60);
}

/* remove-in-callback NAME: an observer removes itself in its first callback; NAME is then
 * posted twice more, followed by NAME.done, seen by a second observer. Prints the count. */
static int removed_calls;
static void self_removing_cb(CNotify_center *c, void *observer, const char *name, const void *o, const void *u) {
    (void)o; (void)u;
    removed_calls++;
    uint32_t st = CNotify_center_remove_observer(c, observer, name);
    printf("removed status=%s\n", CNotify_status_string(st));
    fflush(stdout);
}

static int cmd_remove_in_callback(int argc, char **argv) {
    if (argc < 1) return fail("usage: remove-in-callback NAME", NOTIFY_STATUS_INVALID_REQUEST);
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    char done[600];
    snprintf(done, sizeof done, "%s.done", argv[0]);
    uint32_t st = CNotify_center_add_observer(c, &removed_calls, self_removing_cb, argv[0]);
    if (st == NOTIFY_STATUS_OK) st = CNotify_center_add_observer(c, &target, print_cb, done);
    if (st != NOTIFY_STATUS_OK) return fail("add_observer", st);
    target = 1;
    for (int i = 0; i < 3 && st == NOTIFY_STATUS_OK; i++) st = CNotify_center_post(c, argv[0]);
    if (st == NOTIFY_STATUS_OK) st = CNotify_center_post(c, done);
    if (st != NOTIFY_STATUS_OK) return fail("post", st);
    int rc = wait_target(60);
    printf("calls=%d\n", removed_calls);
    return rc;
}

/* fd NAME COUNT: a file-descriptor registration; prints each token read, in host order. */
static int cmd_fd(int argc, char **argv) {
    if (argc < 2) return fail("usage: fd NAME COUNT", NOTIFY_STATUS_INVALID_REQUEST);
    int fd = -1, token = -1;
    uint32_t st = notify_register_file_descriptor(argv[0], &fd, 0, &token);
    if (st != NOTIFY_STATUS_OK) return fail("notify_register_file_descriptor", st);
    printf("ready token=%d\n", token);
    fflush(stdout);
    for (long n = atol(argv[1]); n > 0; n--) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 60000) <= 0) return fail("timed out waiting on the descriptor", NOTIFY_STATUS_FAILED);
        uint32_t be;
        if (read(fd, &be, sizeof be) != (ssize_t)sizeof be) return fail("short read", NOTIFY_STATUS_FAILED);
        printf("token=%u\n", ntohl(be));
        fflush(stdout);
    }
    st = notify_cancel(token);
    return st == NOTIFY_STATUS_OK ? 0 : fail("notify_cancel", st);
}

/* ---- benchmark roles: ping-pong through the bus, each leg is post -> callback ---- */

static const char *pong_name;
static void echo_cb(CNotify_center *c, void *observer, const char *name, const void *o, const void *u) {
    (void)observer; (void)name; (void)o; (void)u;
    CNotify_center_post(c, pong_name);
}

static int cmd_bench_echo(int argc, char **argv) {
    if (argc < 2) return fail("usage: bench-echo PING PONG", NOTIFY_STATUS_INVALID_REQUEST);
    pong_name = argv[1];
    uint32_t st = CNotify_center_add_observer(CNotify_center_get_darwin_notify_center(), NULL, echo_cb, argv[0]);
    if (st != NOTIFY_STATUS_OK) return fail("add_observer", st);
    return ready_then_idle();
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The latency ends when the callback runs, so the time is taken here, not in the waiting thread. */
static uint64_t pong_at;
static void pong_cb(CNotify_center *c, void *observer, const char *name, const void *o, const void *u) {
    (void)c; (void)observer; (void)name; (void)o; (void)u;
    uint64_t t = now_ns();
    pthread_mutex_lock(&lock);
    pong_at = t;
    pthread_mutex_unlock(&lock);
    count_one();
}

/* bench-ping PING PONG N: prints N round-trip times in ns, one per line. */
static int cmd_bench_ping(int argc, char **argv) {
    if (argc < 3) return fail("usage: bench-ping PING PONG N", NOTIFY_STATUS_INVALID_REQUEST);
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    uint32_t st = CNotify_center_add_observer(c, NULL, pong_cb, argv[1]);
    if (st != NOTIFY_STATUS_OK) return fail("add_observer", st);
    long n = atol(argv[2]);
    uint64_t *rtt = calloc((size_t)n, sizeof *rtt);
    for (long i = 0; i < n; i++) {
        target = delivered + 1;
        uint64_t t0 = now_ns();
        st = CNotify_center_post(c, argv[0]);
        if (st != NOTIFY_STATUS_OK) return fail("post", st);
        if (wait_target(30) != 0) return 2;
        pthread_mutex_lock(&lock);
        rtt[i] = pong_at - t0;
        pthread_mutex_unlock(&lock);
    }
    for (long i = 0; i < n; i++) printf("%llu\n", (unsigned long long)rtt[i]);
    free(rtt);
    return 0;
}

/* observe-many PREFIX COUNT: observes PREFIX.0 .. PREFIX.COUNT-1 until stdin closes
 * (background load for the names benchmark). */
static void ignore_cb(CNotify_center *c, void *observer, const char *name, const void *o, const void *u) {
    (void)c; (void)observer; (void)name; (void)o; (void)u;
}

static int cmd_observe_many(int argc, char **argv) {
    if (argc < 2) return fail("usage: observe-many PREFIX COUNT", NOTIFY_STATUS_INVALID_REQUEST);
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    for (long i = 0, n = atol(argv[1]); i < n; i++) {
        char name[600];
        snprintf(name, sizeof name, "%s.%ld", argv[0], i);
        uint32_t st = CNotify_center_add_observer(c, NULL, ignore_cb, name);
        if (st != NOTIFY_STATUS_OK) return fail("add_observer", st);
    }
    return ready_then_idle();
}

/* fork NAME: with a live registration, fork; the child's calls must be refused (never touching
 * the parent's socket) and it exits through exit(); the parent must still post and receive. */
static int cmd_fork(int argc, char **argv) {
    if (argc < 1) return fail("usage: fork NAME", NOTIFY_STATUS_INVALID_REQUEST);
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    uint32_t st = CNotify_center_add_observer(c, &target, print_cb, argv[0]);
    if (st != NOTIFY_STATUS_OK) return fail("add_observer", st);
    int parent_token;
    if ((st = notify_register_check(argv[0], &parent_token)) != NOTIFY_STATUS_OK) return fail("register", st);
    pid_t pid = fork();
    if (pid == 0) {
        /* Every call that could touch the parent's connection or registrations is refused. */
        int token;
        uint64_t state;
        uint32_t r[] = {
            notify_post(argv[0]), notify_register_check(argv[0], &token), notify_register_signal(argv[0], SIGUSR1, &token),
            notify_suspend(parent_token), notify_resume(parent_token), notify_cancel(parent_token),
            notify_set_state(parent_token, 1), notify_get_state(parent_token, &state), notify_post("self.child"),
        };
        for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
            if (r[i] != NOTIFY_STATUS_OPT_DISABLE) exit(10 + (int)i);
        exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("child status=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    fflush(stdout);
    target = 1;
    st = notify_post(argv[0]);
    if (st != NOTIFY_STATUS_OK) return fail("post after fork", st);
    return wait_target(60);
}

/* bench-check N: notify_check on an unchanged token, N times, timed. Then N more inside seccomp
 * strict mode, where any system call but read/write/exit kills the thread: printing the result
 * proves notify_check made none. (The timing stays outside: here clock_gettime itself may be a
 * system call.) Prints "NS_PER_CHECK syscalls=0 changed=0". */
static int cmd_bench_check(int argc, char **argv) {
    if (argc < 1) return fail("usage: bench-check N", NOTIFY_STATUS_INVALID_REQUEST);
    long n = atol(argv[0]);
    int token, check;
    uint32_t st = notify_register_check("bench.check", &token);
    if (st != NOTIFY_STATUS_OK) return fail("notify_register_check", st);
    notify_check(token, &check); /* the first call is true; every later one checks "unchanged" */
    for (long i = 0; i < 10000; i++) notify_check(token, &check); /* warm-up */
    long changed = 0;
    uint64_t t0 = now_ns();
    for (long i = 0; i < n; i++) { notify_check(token, &check); changed += check; }
    uint64_t t1 = now_ns();
    char line[96];
    int len = snprintf(line, sizeof line, "%.2f syscalls=0 changed=%ld\n", (double)(t1 - t0) / (double)n, changed);
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0) return fail("seccomp", NOTIFY_STATUS_FAILED);
    for (long i = 0; i < n; i++) { notify_check(token, &check); changed += check; }
    if (write(1, line, (size_t)len) != len) syscall(SYS_exit, 3);
    syscall(SYS_exit, 0); /* strict mode allows exit (this thread), and the parent sees the line */
    return 0;
}

/* User and system time of this process so far, µs. */
static uint64_t cpu_us(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u + (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* bench-sink NAME: counts posts of NAME until NAME.end arrives (or 5 s of silence); prints
 * "received=R gaps=G elapsed_ns=E direct=D duplicates=U cpu_us=C" (first to last receipt; posts
 * delivered by the fast path; bus copies dropped; its own user+sys time) and exits. */
static uint64_t sink_first, sink_last;
static long sink_count, sink_done;
static void sink_cb(CNotify_center *c, void *observer, const char *name, const void *o, const void *u) {
    (void)c; (void)o; (void)u;
    uint64_t t = now_ns();
    pthread_mutex_lock(&lock);
    if (observer) { sink_done = 1; pthread_cond_broadcast(&cond); }
    else { if (!sink_count++) sink_first = t; sink_last = t; }
    pthread_mutex_unlock(&lock);
    (void)name;
}

static int cmd_bench_sink(int argc, char **argv) {
    if (argc < 1) return fail("usage: bench-sink NAME", NOTIFY_STATUS_INVALID_REQUEST);
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    char end[600];
    snprintf(end, sizeof end, "%s.end", argv[0]);
    uint32_t st = CNotify_center_add_observer(c, NULL, sink_cb, argv[0]);
    if (st == NOTIFY_STATUS_OK) st = CNotify_center_add_observer(c, &sink_done, sink_cb, end);
    if (st != NOTIFY_STATUS_OK) return fail("add_observer", st);
    say("%s\n", "ready");
    pthread_mutex_lock(&lock);
    long last_count = -1;
    while (!sink_done && sink_count != last_count) { /* ends on the marker, or after 5 s with nothing new */
        last_count = sink_count;
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 5;
        while (!sink_done && sink_count == last_count)
            if (pthread_cond_timedwait(&cond, &lock, &dl) == ETIMEDOUT) break;
        if (!sink_done && sink_count != last_count) last_count = -1; /* progress: keep waiting */
    }
    pthread_mutex_unlock(&lock);
    /* Posts delivered directly still have their bus copies on the way: counted in the CPU this
     * costs, they are taken (and dropped) first, until none has come for 100 ms. */
    CNotify_fast_path_stats fast;
    CNotify_center_get_fast_path_stats(c, &fast);
    for (uint64_t seen = UINT64_MAX, quiet = 0; quiet < 2 && fast.duplicates < fast.delivered;) {
        struct timespec ms50 = { 0, 50000000 };
        nanosleep(&ms50, NULL); /* a benchmark's settling: polls a counter, synchronises nothing */
        seen = fast.duplicates;
        CNotify_center_get_fast_path_stats(c, &fast);
        quiet = fast.duplicates == seen ? quiet + 1 : 0;
    }
    CNotify_stats stats;
    CNotify_center_get_stats(c, &stats);
    printf("received=%ld gaps=%llu elapsed_ns=%llu direct=%llu duplicates=%llu cpu_us=%llu\n", sink_count,
           (unsigned long long)stats.gaps, (unsigned long long)(sink_last - sink_first),
           (unsigned long long)fast.delivered, (unsigned long long)fast.duplicates, (unsigned long long)cpu_us());
    return 0;
}

/* Posts NAME N times as fast as it can, then NAME.end (the sink's marker). */
static uint32_t post_burst(const char *name, long n) {
    char end[600];
    snprintf(end, sizeof end, "%s.end", name);
    for (long i = 0; i < n; i++) {
        uint32_t st = notify_post(name);
        if (st != NOTIFY_STATUS_OK) return st;
    }
    return notify_post(end);
}

/* With the fast path on: a first post (of a name the sink does not count), then up to 5 s for the
 * connection to its observer, so that a flood measures the steady state, not discovery (whose
 * posts take the bus while it runs). Prints nothing; the sink's count shows what it got. */
static void await_fast_path(const char *name) {
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    CNotify_fast_path_stats stats;
    CNotify_center_get_fast_path_stats(c, &stats);
    if (!stats.enabled) return;
    char warm[600];
    snprintf(warm, sizeof warm, "%s.warm", name);
    if (notify_post(warm) != NOTIFY_STATUS_OK) return;
    for (uint64_t t0 = now_ns(); now_ns() - t0 < 5000000000ull;) {
        CNotify_center_get_fast_path_stats(c, &stats);
        if (stats.peers > 0) return;
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL); /* a benchmark's warm-up: polls a counter, synchronises nothing */
    }
}

/* bench-flood NAME N: a burst, then a flush (the fast path connected first, when it is on). */
static int cmd_bench_flood(int argc, char **argv) {
    if (argc < 2) return fail("usage: bench-flood NAME N", NOTIFY_STATUS_INVALID_REQUEST);
    await_fast_path(argv[0]);
    uint32_t st = post_burst(argv[0], atol(argv[1]));
    if (st == NOTIFY_STATUS_OK) st = CNotify_center_flush(CNotify_center_get_darwin_notify_center(), 30000);
    if (st != NOTIFY_STATUS_OK) return fail("flood", st);
    printf("cpu_us=%llu\n", (unsigned long long)cpu_us());
    return 0;
}

/* flood-hold NAME N: a burst with no flush; prints "posted" and stays alive until stdin closes.
 * Whatever the socket did not take must reach the bus without a later post or a flush to push
 * it (the I/O thread writes a poster's backlog, send.c). */
static int cmd_flood_hold(int argc, char **argv) {
    if (argc < 2) return fail("usage: flood-hold NAME N", NOTIFY_STATUS_INVALID_REQUEST);
    uint32_t st = post_burst(argv[0], atol(argv[1]));
    if (st != NOTIFY_STATUS_OK) return fail("notify_post", st);
    say("%s\n", "posted");
    char buf[16];
    while (fgets(buf, sizeof buf, stdin)) {}
    return 0;
}

/* bench-stamp NAME: prints the CLOCK_MONOTONIC time (ns) of each delivery of NAME, until stdin
 * closes (an observer of the fan-out benchmark). */
static void stamp_cb(CNotify_center *c, void *observer, const char *name, const void *o, const void *u) {
    (void)c; (void)observer; (void)name; (void)o; (void)u;
    char line[32];
    int len = snprintf(line, sizeof line, "%llu\n", (unsigned long long)now_ns());
    if (write(1, line, (size_t)len) != len) {}
}

static int cmd_bench_stamp(int argc, char **argv) {
    if (argc < 1) return fail("usage: bench-stamp NAME", NOTIFY_STATUS_INVALID_REQUEST);
    uint32_t st = CNotify_center_add_observer(CNotify_center_get_darwin_notify_center(), NULL, stamp_cb, argv[0]);
    if (st != NOTIFY_STATUS_OK) return fail("add_observer", st);
    return ready_then_idle();
}

/* bench-fanout-post NAME M GAP_MS: M posts of NAME, GAP_MS apart, printing each post's time. */
static int cmd_bench_fanout_post(int argc, char **argv) {
    if (argc < 3) return fail("usage: bench-fanout-post NAME M GAP_MS", NOTIFY_STATUS_INVALID_REQUEST);
    long m = atol(argv[1]), gap = atol(argv[2]);
    for (long i = 0; i < m; i++) {
        uint64_t t = now_ns();
        uint32_t st = notify_post(argv[0]);
        if (st != NOTIFY_STATUS_OK) return fail("notify_post", st);
        printf("%llu\n", (unsigned long long)t);
        fflush(stdout);
        struct timespec ts = { gap / 1000, (gap % 1000) * 1000000L };
        nanosleep(&ts, NULL); /* pacing between rounds, not synchronisation */
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: cnotify-probe observe|post|reentrant|remove-in-callback|fd|bench-echo|bench-ping ...\n");
        return 64;
    }
    const char *cmd = argv[1];
    argc -= 2;
    argv += 2;
    if (!strcmp(cmd, "observe")) return cmd_observe(argc, argv);
    if (!strcmp(cmd, "post")) return cmd_post(argc, argv);
    if (!strcmp(cmd, "reentrant")) return cmd_reentrant(argc, argv);
    if (!strcmp(cmd, "remove-in-callback")) return cmd_remove_in_callback(argc, argv);
    if (!strcmp(cmd, "fd")) return cmd_fd(argc, argv);
    if (!strcmp(cmd, "bench-echo")) return cmd_bench_echo(argc, argv);
    if (!strcmp(cmd, "bench-ping")) return cmd_bench_ping(argc, argv);
    if (!strcmp(cmd, "observe-many")) return cmd_observe_many(argc, argv);
    if (!strcmp(cmd, "fork")) return cmd_fork(argc, argv);
    if (!strcmp(cmd, "bench-check")) return cmd_bench_check(argc, argv);
    if (!strcmp(cmd, "bench-sink")) return cmd_bench_sink(argc, argv);
    if (!strcmp(cmd, "bench-flood")) return cmd_bench_flood(argc, argv);
    if (!strcmp(cmd, "flood-hold")) return cmd_flood_hold(argc, argv);
    if (!strcmp(cmd, "bench-stamp")) return cmd_bench_stamp(argc, argv);
    if (!strcmp(cmd, "bench-fanout-post")) return cmd_bench_fanout_post(argc, argv);
    if (!strcmp(cmd, "signal")) return cmd_signal(argc, argv);
    if (!strcmp(cmd, "launch-job")) return cmd_launch_job(argc, argv);
    if (!strcmp(cmd, "dispatch")) return cmd_dispatch(argc, argv);
    if (!strcmp(cmd, "suspend")) return cmd_suspend(argc, argv);
    if (!strcmp(cmd, "self")) return cmd_self(argc, argv);
    if (!strcmp(cmd, "check")) return cmd_check(argc, argv);
    if (!strcmp(cmd, "state")) return cmd_state(argc, argv);
    if (!strcmp(cmd, "guard")) return cmd_guard(argc, argv);
    if (!strcmp(cmd, "conf-check")) return cmd_conf_check(argc, argv);
    if (!strcmp(cmd, "access")) return cmd_access(argc, argv);
    if (!strcmp(cmd, "reuse")) return cmd_reuse(argc, argv);
    if (!strcmp(cmd, "stats")) return cmd_stats(argc, argv);
    if (!strcmp(cmd, "count")) return cmd_count(argc, argv);
    if (!strcmp(cmd, "raw-post")) return cmd_raw_post(argc, argv);
    if (!strcmp(cmd, "forge-seq")) return cmd_forge_seq(argc, argv);
    if (!strcmp(cmd, "forge-origin")) return cmd_forge_origin(argc, argv);
    if (!strcmp(cmd, "forge-huge")) return cmd_forge_huge(argc, argv);
    if (!strcmp(cmd, "watch-namespace")) return cmd_watch_namespace(argc, argv);
    if (!strcmp(cmd, "replay")) return cmd_replay(argc, argv);
    if (!strcmp(cmd, "token-after-destroy")) return cmd_token_after_destroy(argc, argv);
    if (!strcmp(cmd, "flood-until-refused")) return cmd_flood_until_refused(argc, argv);
    if (!strcmp(cmd, "post-loop")) return cmd_post_loop(argc, argv);
    if (!strcmp(cmd, "observe-namespace")) return cmd_observe_namespace(argc, argv);
    if (!strcmp(cmd, "fp-peer")) return cmd_fp_peer(argc, argv);
    if (!strcmp(cmd, "fp-announce")) return cmd_fp_announce(argc, argv);
    if (!strcmp(cmd, "fp-deaf")) return cmd_fp_deaf(argc, argv);
    if (!strcmp(cmd, "fp-swarm")) return cmd_fp_swarm(argc, argv);
    if (!strcmp(cmd, "fp-forge")) return cmd_fp_forge(argc, argv);
    if (!strcmp(cmd, "fp-fakes")) return cmd_fp_fakes(argc, argv);
    if (!strcmp(cmd, "fp-burst")) return cmd_fp_burst(argc, argv);
    if (!strcmp(cmd, "fp-orders")) return cmd_fp_orders(argc, argv);
    if (!strcmp(cmd, "fp-idle")) return cmd_fp_idle(argc, argv);
    if (!strcmp(cmd, "fp-hello-storm")) return cmd_fp_hello_storm(argc, argv);
    if (!strcmp(cmd, "fp-query-flood")) return cmd_fp_query_flood(argc, argv);
    if (!strcmp(cmd, "dist-object")) return cmd_dist_object(argc, argv);
    if (!strcmp(cmd, "plist-keys")) return cmd_plist_keys(argc, argv);
    if (!strcmp(cmd, "dist-watch")) return cmd_dist_watch(argc, argv);
    if (!strcmp(cmd, "fp-self")) return cmd_fp_self(argc, argv);
    if (!strcmp(cmd, "fp-reconnect")) return cmd_fp_reconnect(argc, argv);
    fprintf(stderr, "cnotify-probe: unknown command %s\n", cmd);
    return 64;
}
