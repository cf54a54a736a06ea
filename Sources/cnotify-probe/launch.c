/*
 * launch.c: the probe's launch-on-post roles (darwin-notifyd's launcher, docs/PROTOCOL.md
 * "Launch on post"). `launch-job LOG [options]` is a job: it appends one line per step to LOG
 * (O_APPEND, one write per line, so a job started twice writes whole lines):
 *   started pid=P uid=U          when it runs (before it checks in)
 *   checked-in pid=P             once CNotify_launch_check_in returned OK
 *   event NAME COUNT SERIAL pid=P  each event, in the order the handler got them
 *   check-in-failed STATUS: WHY  when it did not
 * Options: --job LABEL (else $DARWIN_NOTIFY_JOB), --bus ADDRESS, --hold FILE (wait until FILE
 * exists before checking in: the test's handshake for "posts while the job starts"), --exit-after
 * N (exit 0 after N events), --exit-at-once (exit 3 before checking in), --no-check-in (run, never
 * check in, until killed), --twice (check in a second time once checked in, and log the answer),
 * --stamp (" mono=NS", CLOCK_MONOTONIC, after the started and event lines: notify-bench launch).
 */
#include <fcntl.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <darwin_notify.h>
#include "probe.h"

static int log_fd = -1;
static long exit_after = -1, events;
static int stamp; /* --stamp: " mono=NS" (CLOCK_MONOTONIC) after the started and event lines, for notify-bench */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    (void)!write(log_fd, line, (size_t)n);
}

static unsigned long long mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static void on_event(void *ctx, const CNotify_launch_event *ev) {
    (void)ctx;
    unsigned long long now = mono_ns();
    if (stamp) log_line("event %s %u %llu pid=%d mono=%llu", ev->name, ev->count, (unsigned long long)ev->serial, (int)getpid(), now);
    else log_line("event %s %u %llu pid=%d", ev->name, ev->count, (unsigned long long)ev->serial, (int)getpid());
    pthread_mutex_lock(&lock);
    if (++events == exit_after) pthread_cond_signal(&done);
    pthread_mutex_unlock(&lock);
}

static void nap_ms(long ms) {
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

int cmd_launch_job(int argc, char **argv) {
    if (argc < 1) { fprintf(stderr, "usage: cnotify-probe launch-job LOG [--job L] [--bus A] [--hold F] [--exit-after N] [--exit-at-once] [--no-check-in]\n"); return 64; }
    const char *job = NULL, *bus = NULL, *hold = NULL;
    int at_once = 0, no_check_in = 0, twice = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(argv[i], "--job")) job = v, i++;
        else if (!strcmp(argv[i], "--bus")) bus = v, i++;
        else if (!strcmp(argv[i], "--hold")) hold = v, i++;
        else if (!strcmp(argv[i], "--exit-after")) exit_after = atol(v), i++;
        else if (!strcmp(argv[i], "--exit-at-once")) at_once = 1;
        else if (!strcmp(argv[i], "--no-check-in")) no_check_in = 1;
        else if (!strcmp(argv[i], "--twice")) twice = 1;
        else if (!strcmp(argv[i], "--stamp")) stamp = 1;
        else { fprintf(stderr, "cnotify-probe launch-job: unknown option %s\n", argv[i]); return 64; }
    }
    if ((log_fd = open(argv[0], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0) { perror(argv[0]); return 1; }
    unsigned long long started = mono_ns();
    if (stamp) log_line("started pid=%d uid=%u mono=%llu", (int)getpid(), (unsigned)getuid(), started);
    else log_line("started pid=%d uid=%u", (int)getpid(), (unsigned)getuid());
    if (at_once) return 3;
    struct stat st;
    /* The test's handshake: it creates the file once its posts are made (a poll of 10 ms). */
    while (hold && stat(hold, &st) != 0) nap_ms(10);
    if (no_check_in) for (;;) pause();
    uint32_t s = CNotify_launch_check_in(job, bus, on_event, NULL);
    if (s != NOTIFY_STATUS_OK) {
        log_line("check-in-failed %s: %s", CNotify_status_string(s), CNotify_last_error());
        return 2;
    }
    log_line("checked-in pid=%d", (int)getpid());
    if (twice) {
        s = CNotify_launch_check_in(job, bus, on_event, NULL);
        log_line("second-check-in %s: %s", CNotify_status_string(s), CNotify_last_error());
    }
    pthread_mutex_lock(&lock);
    while (exit_after < 0 || events < exit_after) pthread_cond_wait(&done, &lock);
    pthread_mutex_unlock(&lock);
    log_line("exiting pid=%d", (int)getpid());
    return 0;
}
