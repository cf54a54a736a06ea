/*
 * Probe roles for the rest of notify(3): signal and dispatch registrations, suspend/resume and
 * `self.` names. Each prints "ready" when its registrations are in place, then one line per
 * observation, which the integration tests compare.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <darwin_notify.h>
#include <notify.h>
#include "probe.h"

static void line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void line(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* signal NAME OTHER: SIGUSR1 for NAME and SIGUSR2 for OTHER; waits for one signal, then reports
 * which token notify_check says fired. Also tries invalid signal numbers. */
int cmd_signal(int argc, char **argv) {
    if (argc < 2) return fail("usage: signal NAME OTHER", NOTIFY_STATUS_INVALID_REQUEST);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread exists: all inherit it */
    int a, b, bad, check;
    uint32_t st = notify_register_signal(argv[0], SIGUSR1, &a);
    if (st) return fail("notify_register_signal", st);
    if ((st = notify_register_signal(argv[1], SIGUSR2, &b))) return fail("notify_register_signal", st);
    line("invalid 0: %u", notify_register_signal(argv[0], 0, &bad));
    line("invalid -3: %u", notify_register_signal(argv[0], -3, &bad));
    line("invalid 999: %u", notify_register_signal(argv[0], 999, &bad));
    notify_check(a, &check); /* the first check is always true: consume it */
    notify_check(b, &check);
    line("ready");
    struct timespec limit = { 20, 0 };
    int sig = sigtimedwait(&set, NULL, &limit);
    if (sig < 0) { line("no signal within 20 s"); return 2; }
    int ca, cb;
    notify_check(a, &ca);
    notify_check(b, &cb);
    line("signal %s, check %s=%d %s=%d", sig == SIGUSR1 ? "SIGUSR1" : "SIGUSR2", argv[0], ca, argv[1], cb);
    return 0;
}

#ifdef __BLOCKS__
extern dispatch_queue_t dispatch_queue_create(const char *label, void *attr);
extern void dispatch_release(void *object);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void wait_flag(volatile int *flag, int secs) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += secs;
    pthread_mutex_lock(&mu);
    while (!*flag && pthread_cond_timedwait(&cv, &mu, &dl) != ETIMEDOUT) {}
    pthread_mutex_unlock(&mu);
}

static void raise_flag(volatile int *flag) {
    pthread_mutex_lock(&mu);
    *flag = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* dispatch NAME: a handler that cancels its own token on its first run; later posts of NAME
 * (three, by this process) must not run it. A second token, whose handler is slow, is cancelled
 * from this thread while it runs: cancel must return only after it finished. */
int cmd_dispatch(int argc, char **argv) {
    if (argc < 1) return fail("usage: dispatch NAME", NOTIFY_STATUS_INVALID_REQUEST);
    const char *name = argv[0];
    char done_name[600], slow_name[600];
    snprintf(done_name, sizeof done_name, "%s.done", name);
    snprintf(slow_name, sizeof slow_name, "%s.slow", name);
    dispatch_queue_t q = dispatch_queue_create("probe.dispatch", NULL);
    dispatch_queue_t q2 = dispatch_queue_create("probe.slow", NULL);
    int bad;
    line("null queue: %u", notify_register_dispatch(name, &bad, NULL, ^(int t) { (void)t; }));
    line("null handler: %u", notify_register_dispatch(name, &bad, q, NULL));
    __block int fired = 0;
    static volatile int first = 0, done = 0, slow_running = 0;
    static volatile int slow_finished = 0;
    int tok, done_tok, slow_tok;
    uint32_t st = notify_register_dispatch(name, &tok, q, ^(int t) {
        fired++;
        if (fired == 1) {
            line("fired token=%d", t);
            line("cancel in handler: %u", notify_cancel(t));
            raise_flag(&first);
        }
    });
    if (st) return fail("notify_register_dispatch", st);
    if ((st = notify_register_dispatch(done_name, &done_tok, q, ^(int t) { (void)t; raise_flag(&done); })))
        return fail("notify_register_dispatch", st);
    if ((st = notify_register_dispatch(slow_name, &slow_tok, q2, ^(int t) {
        (void)t;
        raise_flag(&slow_running);
        usleep(300 * 1000); /* the work cancel must wait for, not synchronisation */
        slow_finished = 1;
    }))) return fail("notify_register_dispatch", st);
    line("ready");
    wait_flag(&first, 20);
    if (!first) { line("handler never ran"); return 2; }
    for (int i = 0; i < 3; i++) notify_post(name);
    notify_post(done_name); /* same serial queue: runs after any stray run of the first handler */
    wait_flag(&done, 20);
    line("after cancel: runs=%d", fired);
    notify_post(slow_name);
    wait_flag(&slow_running, 20);
    st = notify_cancel(slow_tok);
    line("cancel while running: %u, handler finished before it returned: %d", st, slow_finished);
    line("cancel again: %u", notify_cancel(tok));
    /* Ours to release, so a leak-checking run finds nothing of the probe's own. */
    notify_cancel(done_tok);
    dispatch_release(q);
    dispatch_release(q2);
    return 0;
}
#else
int cmd_dispatch(int argc, char **argv) {
    (void)argc; (void)argv;
    line("no blocks in this compiler");
    return 3;
}
#endif

/* Bytes waiting in a non-blocking pipe. */
static int pending_bytes(int fd) {
    char buf[256];
    int total = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) total += (int)n;
    return total;
}

/* suspend NAME: an fd token on NAME is suspended; the test posts NAME three times and then
 * NAME.sentinel; after the sentinel (so the three arrived) we count what the pipe got, resume,
 * and count again. Then nesting and resume-without-suspend, with `self.` names. */
int cmd_suspend(int argc, char **argv) {
    if (argc < 1) return fail("usage: suspend NAME", NOTIFY_STATUS_INVALID_REQUEST);
    char sentinel[600];
    snprintf(sentinel, sizeof sentinel, "%s.sentinel", argv[0]);
    int fd, tok, stok, check;
    uint32_t st = notify_register_file_descriptor(argv[0], &fd, 0, &tok);
    if (st) return fail("notify_register_file_descriptor", st);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    int sfd;
    if ((st = notify_register_file_descriptor(sentinel, &sfd, 0, &stok))) return fail("register sentinel", st);
    if ((st = notify_suspend(tok))) return fail("notify_suspend", st);
    line("ready");
    int got;
    if (read(sfd, &got, sizeof got) != sizeof got) { line("no sentinel"); return 2; } /* blocks until it arrives */
    line("while suspended: %d bytes", pending_bytes(fd));
    notify_check(tok, &check);
    line("check while suspended (first call): %d", check);
    if ((st = notify_resume(tok))) return fail("notify_resume", st);
    line("after resume: %d deliveries", pending_bytes(fd) / 4);
    notify_check(tok, &check);
    line("check after resume: %d", check);

    int self_fd, self_tok;
    if ((st = notify_register_file_descriptor("self.suspend", &self_fd, 0, &self_tok))) return fail("register self", st);
    fcntl(self_fd, F_SETFL, O_NONBLOCK);
    notify_suspend(self_tok);
    if ((st = notify_resume(self_tok))) return fail("notify_resume", st);
    line("suspend, no post, resume: %d deliveries", pending_bytes(self_fd) / 4);
    notify_suspend(self_tok);
    notify_suspend(self_tok);
    for (int i = 0; i < 3; i++) notify_post("self.suspend");
    notify_resume(self_tok);
    line("nested, first resume: %d deliveries", pending_bytes(self_fd) / 4);
    notify_resume(self_tok);
    line("nested, second resume: %d deliveries", pending_bytes(self_fd) / 4);
    st = notify_resume(self_tok);
    line("resume without suspend: %u", st);
    /* Libnotify's _internal_resume: a count already 0 stays 0 (a post is delivered at once). */
    notify_post("self.suspend");
    line("a post after it: %d deliveries", pending_bytes(self_fd) / 4);
    notify_cancel(self_tok);
    line("suspend cancelled token: %u", notify_suspend(self_tok));
    return 0;
}

static long cf_calls;
static void count_cf(CNotify_center *c, void *observer, const char *name, const void *object, const void *info) {
    (void)c; (void)observer; (void)name; (void)object; (void)info;
    cf_calls++;
}

static void destroy_cb(CNotify_center *c, void *observer, const char *name, const void *object, const void *info) {
    (void)observer; (void)name; (void)object; (void)info;
    CNotify_center_destroy(c);
}

/* self: `self.` names with no reachable bus (the test points DARWIN_NOTIFY_BUS nowhere). */
int cmd_self(int argc, char **argv) {
    (void)argc; (void)argv;
    int tok, check;
    uint32_t st = notify_register_check("self.local", &tok);
    line("register self.local: %u", st);
    notify_check(tok, &check);
    line("first check: %d", check);
    notify_check(tok, &check);
    line("unchanged: %d", check);
    line("post self.local: %u", notify_post("self.local"));
    notify_check(tok, &check);
    line("after post: %d", check);
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    line("observe self.cf: %u", CNotify_center_add_observer(c, &cf_calls, count_cf, "self.cf"));
    for (int i = 0; i < 3; i++) CNotify_center_post(c, "self.cf");
    line("callbacks: %ld", cf_calls);
    line("post bus name: %u", notify_post("com.example.needs.bus"));
    /* A center destroyed by its own `self.` callback, on this (posting) thread. */
    uint32_t st2;
    CNotify_center *own = CNotify_center_create(getenv("DARWIN_NOTIFY_BUS"), &st2);
    if (!own) return fail("create", st2);
    CNotify_center_add_observer(own, NULL, destroy_cb, "self.destroy");
    line("post to a center its callback destroys: %u", CNotify_center_post(own, "self.destroy"));
    return 0;
}

/* check NAME: notify_check on the process-wide center, as a macOS program uses it: true on the
 * first call, then only after a post (its own, on the bus: waited for up to 10 s), and
 * NOTIFY_STATUS_INVALID_TOKEN once cancelled. One line per step. */
int cmd_check(int argc, char **argv) {
    if (argc < 1) return fail("usage: check NAME", NOTIFY_STATUS_INVALID_REQUEST);
    const char *name = argv[0];
    int tok = -1, check = -1;
    line("register: %u", notify_register_check(name, &tok));
    line("valid: %d", notify_is_valid_token(tok));
    uint32_t st = notify_check(tok, &check);
    line("first: %u %d", st, check);
    st = notify_check(tok, &check);
    line("unchanged: %u %d", st, check);
    line("post: %u", notify_post(name));
    check = 0;
    for (int i = 0; i < 1000 && check == 0; i++) {
        if ((st = notify_check(tok, &check)) != NOTIFY_STATUS_OK) break;
        if (!check) usleep(10000);
    }
    line("after post: %u %d", st, check);
    st = notify_check(tok, &check);
    line("again: %u %d", st, check);
    line("cancel: %u", notify_cancel(tok));
    line("valid: %d", notify_is_valid_token(tok));
    line("cancel again: %u", notify_cancel(tok));
    line("check cancelled: %u", notify_check(tok, &check));
    return 0;
}

/* state set NAME VALUE | state get NAME | state cancelled NAME | state get-many NAME COUNT:
 * through a token, as a macOS program would; prints the status (and the value; for get-many,
 * "values=V" when every get read V, else "values=differ"). */
int cmd_state(int argc, char **argv) {
    if (argc < 2) return fail("usage: state set|get|get-many|cancelled NAME [VALUE|COUNT]", NOTIFY_STATUS_INVALID_REQUEST);
    int tok;
    uint32_t st = notify_register_check(argv[1], &tok);
    if (st) return fail("notify_register_check", st);
    if (!strcmp(argv[0], "get-many") && argc >= 3) {
        long count = strtol(argv[2], NULL, 10);
        uint64_t first = 0, v = 0;
        int same = 1;
        for (long i = 0; i < count && st == NOTIFY_STATUS_OK; i++) {
            st = notify_get_state(tok, &v);
            if (i == 0) first = v;
            same &= v == first;
        }
        if (same) line("get-many %s: %s values=%llu", argv[1], CNotify_status_string(st), (unsigned long long)first);
        else line("get-many %s: %s values=differ", argv[1], CNotify_status_string(st));
    } else if (!strcmp(argv[0], "set") && argc >= 3) {
        st = notify_set_state(tok, strtoull(argv[2], NULL, 10));
        line("set %s: %s %s", argv[1], CNotify_status_string(st), CNotify_last_error());
    } else if (!strcmp(argv[0], "get")) {
        uint64_t v = 0;
        st = notify_get_state(tok, &v);
        line("get %s: %s %llu", argv[1], CNotify_status_string(st), (unsigned long long)v);
    } else {
        notify_cancel(tok);
        uint64_t v;
        line("set cancelled: %s", CNotify_status_string(notify_set_state(tok, 1)));
        line("get cancelled: %s", CNotify_status_string(notify_get_state(tok, &v)));
        notify_register_check(argv[1], &tok);
        line("get NULL: %s", CNotify_status_string(notify_get_state(tok, NULL)));
    }
    return st == NOTIFY_STATUS_OK ? 0 : 1;
}

/* guard NAME...: observes the names and prints each post with the center's count of rejected
 * (forged user.uid.N) posts so far: "NAME rejected=N". */
static void guard_cb(CNotify_center *c, void *observer, const char *name, const void *object, const void *info) {
    (void)observer; (void)object; (void)info;
    CNotify_stats s;
    CNotify_center_get_stats(c, &s);
    line("%s rejected=%llu", name, (unsigned long long)s.rejected);
}

int cmd_guard(int argc, char **argv) {
    CNotify_center *c = CNotify_center_get_darwin_notify_center();
    for (int i = 0; i < argc; i++) {
        uint32_t st = CNotify_center_add_observer(c, &argc, guard_cb, argv[i]);
        if (st) return fail("add_observer", st);
    }
    line("ready");
    char buf[16];
    while (fgets(buf, sizeof buf, stdin)) {}
    return 0;
}

/* reuse NAME: NOTIFY_REUSE accepts only a descriptor notify returned: a foreign pipe, stdin and a
 * closed descriptor are INVALID_FILE; the real one is shared by a second token. */
int cmd_reuse(int argc, char **argv) {
    if (argc < 1) return fail("usage: reuse NAME", NOTIFY_STATUS_INVALID_REQUEST);
    int fds[2], tok, tok2, fd;
    if (pipe(fds) != 0) return fail("pipe", NOTIFY_STATUS_FAILED);
    fd = fds[0];
    line("foreign pipe: %u", notify_register_file_descriptor(argv[0], &fd, NOTIFY_REUSE, &tok));
    fd = 0;
    line("stdin: %u", notify_register_file_descriptor(argv[0], &fd, NOTIFY_REUSE, &tok));
    fd = 9999;
    line("closed: %u", notify_register_file_descriptor(argv[0], &fd, NOTIFY_REUSE, &tok));
    uint32_t st = notify_register_file_descriptor(argv[0], &fd, 0, &tok);
    if (st) return fail("register", st);
    int shared = fd;
    st = notify_register_file_descriptor("self.reuse.other", &fd, NOTIFY_REUSE, &tok2);
    line("notify's own: %u, same descriptor: %d", st, fd == shared);
    notify_post("self.reuse.other");
    int got = 0;
    if (read(shared, &got, sizeof got) == sizeof got) line("token written: %d", (int)ntohl((uint32_t)got) == tok2);
    return 0;
}

/* conf-check PATH: CNotify_conf_check's report, one "FILE:LINE: why" per problem, then the counts. */
static void conf_problem(void *ctx, const char *file, unsigned lineno, const char *why) {
    (void)ctx;
    if (lineno) line("%s:%u: %s", file, lineno, why);
    else line("%s %s", file, why);
}

int cmd_conf_check(int argc, char **argv) {
    size_t bad = 0, reserves = 0, monitors = 0, sets = 0;
    uint32_t st = CNotify_conf_check(argc > 0 ? argv[0] : NULL, conf_problem, NULL, &bad, &reserves, &monitors, &sets);
    if (st) return fail("conf_check", st);
    line("bad=%zu reserves=%zu monitors=%zu sets=%zu", bad, reserves, monitors, sets);
    return 0;
}

/* access NAME UID GID r|w: CNotify_name_access's answer under this process's notify.conf. */
int cmd_access(int argc, char **argv) {
    if (argc != 4) return fail("usage: access NAME UID GID r|w", NOTIFY_STATUS_INVALID_REQUEST);
    uint32_t gid = (uint32_t)strtoul(argv[2], NULL, 10);
    uint32_t st = CNotify_name_access(argv[0], (uint32_t)strtoul(argv[1], NULL, 10), &gid, 1,
                                      argv[3][0] == 'w' ? CNOTIFY_ACCESS_WRITE : CNOTIFY_ACCESS_READ);
    line("%s", CNotify_status_string(st));
    return 0;
}
