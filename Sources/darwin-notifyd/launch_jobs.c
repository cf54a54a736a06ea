/*
 * launch_jobs.c: the jobs (docs/PROTOCOL.md "Launch on post"). Each declared job has a queue of
 * events, numbered per job from 1. A post of a declared name is queued and, when the job does not
 * run, starts it: an exec job by fork and exec (its process group its own; the launcher reaps it),
 * a service job by StartServiceByName. A job runs from its start until its process ends (exec) or
 * its service name loses its owner (service). The queue, per job:
 *   - while the job does not run, a post of a name already queued adds to that event's count
 *     (coalesced per name, as notify(3) coalesces posts not yet taken): one event per name;
 *   - while it runs (started, checked in or not), each post is its own event, up to ND_QUEUE_MAX;
 *     past that a post adds to its name's last event, or, with none queued, is counted dropped;
 *   - an event leaves the queue when it is handed over in a Take's answer (consumed when
 *     delivered, as xpc_events(3) says of launchd's).
 * Take is answered only to the job: an exec job's process proves it with the token the launcher
 * put in its environment; a service job's caller must own the service's name now. Starts are at
 * least `throttle` seconds apart; a job that ends or is stopped 5 times in a row without checking
 * in is started again only after a new post. One loop thread does all of this: nothing here
 * blocks (a fork, a kill, a bus message queued).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "launch.h"

#define ND_FAILURES_HELD 5
#define ND_TERM_GRACE_MS 5000


typedef struct job {
    nd_decl d;
    int live; /* declared now; 0: removed, kept until its process ends */
    nd_event *q;
    size_t qn, qcap;
    uint64_t next_serial, dropped, coalesced, delivered;
    pid_t pid;                /* exec: the running process */
    int service_starting;     /* service: StartServiceByName sent, no owner yet */
    char owner[256];          /* service: the name's owner now ("" none) */
    char token[33];
    int checked_in, held_back;
    unsigned starts, failures_in_row;
    uint64_t start_ms, next_start_ms, term_ms;
    time_t start_wall;
    char last_end[96];
    DBusMessage *held;
    uint64_t held_until_ms;
    struct job *next;
} job;

static job *jobs;
static int user_mode;
static char launch_bus[4096];
static nd_file timer_file;
static char **refused_files;
static size_t n_refused;

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static job *find(const char *label) {
    for (job *j = jobs; j; j = j->next)
        if (strcmp(j->d.label, label) == 0) return j;
    return NULL;
}

static int running(const job *j) { return j->pid > 0 || j->service_starting || j->owner[0]; }

/* ---- deadlines: one timerfd armed for the nearest ---- */

static void rearm(void) {
    uint64_t next = 0;
#define NEAREST(t) \
    if ((t) && (!next || (t) < next)) next = (t)
    for (job *j = jobs; j; j = j->next) {
        NEAREST(j->next_start_ms);
        NEAREST(j->term_ms);
        if (j->held) NEAREST(j->held_until_ms);
        if (running(j) && !j->checked_in && j->start_ms && !j->term_ms) NEAREST(j->start_ms + (uint64_t)j->d.checkin_s * 1000);
    }
    struct itimerspec its = { 0 };
    if (next) {
        uint64_t now = now_ms(), in = next > now ? next - now : 1;
        its.it_value.tv_sec = (time_t)(in / 1000);
        its.it_value.tv_nsec = (long)(in % 1000) * 1000000;
    }
    timerfd_settime(timer_file.fd, 0, &its, NULL);
}

/* ---- handing events over ---- */

static void hand_over(job *j) {
    size_t n = j->qn < ND_TAKE_BATCH ? j->qn : ND_TAKE_BATCH;
    DBusMessage *call = j->held;
    j->held = NULL;
    nd_bus_reply_events(call, j->q, n);
    for (size_t i = 0; i < n; i++) free(j->q[i].name);
    memmove(j->q, j->q + n, (j->qn - n) * sizeof *j->q);
    j->qn -= n;
    j->delivered += n;
}

static void answer_held_empty(job *j) {
    if (!j->held) return;
    DBusMessage *call = j->held;
    j->held = NULL;
    nd_bus_reply_events(call, NULL, 0);
}

/* ---- starting and ending ---- */

static void start(job *j, const char *why) {
    j->next_start_ms = 0;
    j->checked_in = 0;
    j->start_ms = now_ms();
    j->start_wall = time(NULL);
    j->starts++;
    if (j->d.kind == ND_JOB_EXEC) {
        nd_fill_token(j->token);
        j->pid = nd_spawn(&j->d, j->token, launch_bus, user_mode);
        if (j->pid <= 0) {
            j->pid = 0;
            j->failures_in_row++;
            snprintf(j->last_end, sizeof j->last_end, "could not start");
            return;
        }
        nd_say("launcher: started %s (pid %d, %s)", j->d.label, (int)j->pid, why);
    } else {
        j->service_starting = 1;
        nd_bus_start_service(j->d.target);
        nd_say("launcher: starting %s (service %s, %s)", j->d.label, j->d.target, why);
    }
}

/* Starts `j` if it has events, does not run, is declared and not held back: now, or when its
 * throttle allows. */
static void maybe_start(job *j, const char *why) {
    if (!j->live || !j->qn || running(j) || j->held_back) return;
    uint64_t now = now_ms(), allowed = j->starts ? j->start_ms + (uint64_t)j->d.throttle_s * 1000 : 0;
    if (now >= allowed) {
        start(j, why);
    } else if (!j->next_start_ms) {
        j->next_start_ms = allowed;
        nd_say("launcher: %s is throttled: next start in %llu ms", j->d.label, (unsigned long long)(allowed - now));
    }
}

static void free_job(job *j) {
    for (size_t i = 0; i < j->qn; i++) free(j->q[i].name);
    free(j->q);
    if (j->held) dbus_message_unref(j->held);
    nd_decl_free(&j->d);
    free(j);
}

static void unlink_job(job *gone) {
    for (job **link = &jobs; *link; link = &(*link)->next)
        if (*link == gone) { *link = gone->next; break; }
    free_job(gone);
}

/* No job runs any more: what is queued becomes one event per name, at the place of the name's
 * first event, its count the sum (notify(3)'s coalescing of posts not yet taken). */
static void coalesce(job *j) {
    size_t kept = 0;
    for (size_t i = 0; i < j->qn; i++) {
        size_t k = 0;
        while (k < kept && strcmp(j->q[k].name, j->q[i].name) != 0) k++;
        if (k < kept) {
            uint64_t sum = (uint64_t)j->q[k].count + j->q[i].count;
            j->q[k].count = sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
            j->coalesced += j->q[i].count;
            free(j->q[i].name);
        } else {
            j->q[kept++] = j->q[i];
        }
    }
    j->qn = kept;
}

/* The job's process (or service) ended: `how` says how. */
static void ended(job *j, const char *how) {
    coalesce(j);
    snprintf(j->last_end, sizeof j->last_end, "%s", how);
    if (!j->checked_in) {
        if (++j->failures_in_row >= ND_FAILURES_HELD) j->held_back = 1;
        nd_say("launcher: %s ended (%s) without checking in%s", j->d.label, how,
               j->held_back ? "; 5 times in a row: started again only by a new post" : "");
    } else {
        nd_say("launcher: %s ended (%s)", j->d.label, how);
    }
    j->checked_in = 0;
    j->term_ms = 0;
    if (j->held) { dbus_message_unref(j->held); j->held = NULL; }
    if (!j->live) { unlink_job(j); return; }
    maybe_start(j, "events still queued");
}

void nd_jobs_reap(void) {
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (job *j = jobs; j; j = j->next) {
            if (j->pid != pid) continue;
            char how[64];
            if (WIFEXITED(status)) snprintf(how, sizeof how, "exit %d", WEXITSTATUS(status));
            else snprintf(how, sizeof how, "signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
            j->pid = 0;
            ended(j, how);
            break;
        }
    }
    rearm();
}

/* ---- events arriving ---- */

static void queue_post(job *j, const char *name) {
    nd_event *last = NULL;
    for (size_t i = j->qn; i-- > 0;)
        if (strcmp(j->q[i].name, name) == 0) { last = &j->q[i]; break; }
    if (last && (!running(j) || j->qn >= ND_QUEUE_MAX)) {
        if (last->count < UINT32_MAX) last->count++;
        j->coalesced++;
        return;
    }
    if (j->qn >= ND_QUEUE_MAX) {
        if (!j->dropped++) nd_say("launcher: %s: its queue is full (%d events): posts of names not queued are dropped",
                                  j->d.label, ND_QUEUE_MAX);
        return;
    }
    if (j->qn == j->qcap) {
        size_t cap = j->qcap ? j->qcap * 2 : 16;
        nd_event *q = realloc(j->q, cap * sizeof *q);
        if (!q) { j->dropped++; return; }
        j->q = q;
        j->qcap = cap;
    }
    char *copy = strdup(name);
    if (!copy) { j->dropped++; return; }
    j->q[j->qn++] = (nd_event){ copy, 1, ++j->next_serial };
}

static void arrived(const char *label, const char *name) {
    job *j = find(label);
    if (!j || !j->live) return;
    queue_post(j, name);
    j->held_back = 0;
    if (j->held) hand_over(j);
    char why[CNOTIFY_NAME_MAX + 16];
    snprintf(why, sizeof why, "post of %s", name);
    maybe_start(j, why);
    rearm();
}

/* ---- the bus's questions (nd_launch_ops) ---- */

static int op_describe(const char *label, int *kind, const char **target) {
    job *j = find(label);
    if (!j) return -1;
    *kind = j->d.kind;
    *target = j->d.target;
    return 0;
}

static int same_token(const char *a, const char *b) {
    size_t n = strlen(b);
    if (strlen(a) != n || n != 32) return 0;
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

static void op_take(DBusMessage *call, const char *sender, const char *label, const char *token, uint32_t wait_ms) {
    job *j = find(label);
    if (!j) { nd_bus_reply_error(call, ND_ERROR_NO_SUCH_JOB, "no job of that label is declared to this launcher"); return; }
    int ok = j->d.kind == ND_JOB_EXEC ? j->pid > 0 && same_token(token, j->token) : j->owner[0] && strcmp(sender, j->owner) == 0;
    if (!ok) {
        nd_bus_reply_error(call, ND_ERROR_NOT_THE_JOB,
                           j->d.kind == ND_JOB_EXEC
                               ? "only the process the launcher started for this job, with the token it was given, takes its events"
                               : "only the owner of the job's service name takes its events");
        return;
    }
    if (!j->checked_in) {
        j->checked_in = 1;
        j->failures_in_row = 0;
        nd_say("launcher: %s checked in (%llu ms after its start)", j->d.label,
               (unsigned long long)(j->start_ms ? now_ms() - j->start_ms : 0));
    }
    answer_held_empty(j);
    j->held = call;
    if (j->qn) hand_over(j);
    else if (!wait_ms) answer_held_empty(j);
    else j->held_until_ms = now_ms() + wait_ms;
    rearm();
}

static int append(char **buf, size_t *len, size_t *cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int append(char **buf, size_t *len, size_t *cap, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return -1;
        if (*buf && *len + (size_t)n < *cap) { *len += (size_t)n; return 0; }
        size_t cap2 = (*cap + (size_t)n + 1) * 2;
        char *b = realloc(*buf, cap2);
        if (!b) return -1;
        *buf = b;
        *cap = cap2;
    }
}

static char *op_list(void) {
    char *buf = NULL;
    size_t len = 0, cap = 0;
    append(&buf, &len, &cap, "%s", "");
    for (job *j = jobs; j; j = j->next) {
        char state[320], when[32] = "-";
        if (j->pid > 0) snprintf(state, sizeof state, "%s(pid=%d)", j->checked_in ? "checked-in" : "starting", (int)j->pid);
        else if (j->owner[0]) snprintf(state, sizeof state, "%s(owner=%s)", j->checked_in ? "checked-in" : "starting", j->owner);
        else if (j->service_starting) snprintf(state, sizeof state, "starting");
        else if (j->next_start_ms) snprintf(state, sizeof state, "throttled");
        else snprintf(state, sizeof state, "%s", j->held_back ? "held-back" : "idle");
        if (j->start_wall) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", localtime(&j->start_wall));
        append(&buf, &len, &cap, "job=%s kind=%s state=%s%s starts=%u last-start=%s last-end=%s queued=%zu delivered=%llu "
                                 "coalesced=%llu dropped=%llu file=%s on=",
               j->d.label, j->d.kind == ND_JOB_SERVICE ? "service" : "exec", state, j->live ? "" : ",removed", j->starts, when,
               j->last_end[0] ? j->last_end : "-", j->qn, (unsigned long long)j->delivered, (unsigned long long)j->coalesced,
               (unsigned long long)j->dropped, j->d.file);
        for (size_t i = 0; i < j->d.n_names; i++)
            append(&buf, &len, &cap, "%s%s%s", i ? "," : "", j->d.names[i], j->d.is_namespace[i] ? ".*" : "");
        append(&buf, &len, &cap, " target=%s\n", j->d.target);
    }
    for (size_t i = 0; i < n_refused; i++) append(&buf, &len, &cap, "refused %s\n", refused_files[i]);
    return buf;
}

static void op_owner_changed(const char *service, const char *owner) {
    for (job *j = jobs; j; j = j->next) {
        if (j->d.kind != ND_JOB_SERVICE || strcmp(j->d.target, service) != 0) continue;
        int had = j->owner[0] != '\0';
        snprintf(j->owner, sizeof j->owner, "%s", owner);
        if (owner[0]) {
            j->service_starting = 0;
            if (!had && !j->start_ms) j->start_ms = now_ms(); /* running before we started it */
        } else if (had) {
            j->service_starting = 0;
            ended(j, "its name lost its owner");
            break; /* `j` may be gone */
        }
    }
    rearm();
}

static void op_start_failed(const char *service, const char *why) {
    for (job *j = jobs; j; j = j->next) {
        if (j->d.kind != ND_JOB_SERVICE || strcmp(j->d.target, service) != 0 || !j->service_starting || j->owner[0]) continue;
        j->service_starting = 0;
        nd_say("launcher: %s: the bus could not start %s: %s", j->d.label, service, why);
        ended(j, "the bus could not start it");
        break;
    }
    rearm();
}

static const nd_launch_ops launch_ops = {
    op_describe, op_take, op_list, op_owner_changed, op_start_failed,
};

/* ---- deadlines ---- */

static void timer_ready(nd_file *f, uint32_t events) {
    (void)events;
    uint64_t v;
    (void)!read(f->fd, &v, sizeof v);
    uint64_t now = now_ms();
    for (job *j = jobs; j; j = j->next) {
        if (j->held && j->held_until_ms <= now) answer_held_empty(j);
        if (j->term_ms && j->term_ms <= now && j->pid > 0) {
            kill(-j->pid, SIGKILL);
            j->term_ms = 0;
        }
        if (running(j) && !j->checked_in && j->start_ms && j->start_ms + (uint64_t)j->d.checkin_s * 1000 <= now &&
            !j->term_ms) {
            nd_say("launcher: %s did not check in within %u s%s", j->d.label, j->d.checkin_s,
                   j->pid > 0 ? ": stopped (SIGTERM, then SIGKILL 5 s later)" : "; it runs on, and its events wait for it");
            if (j->pid > 0) {
                kill(-j->pid, SIGTERM);
                j->term_ms = now + ND_TERM_GRACE_MS;
            } else {
                j->start_ms = 0; /* said once */
                if (++j->failures_in_row >= ND_FAILURES_HELD) j->held_back = 1;
            }
        }
        if (j->next_start_ms && j->next_start_ms <= now) {
            j->next_start_ms = 0;
            maybe_start(j, "throttle interval over");
        }
    }
    rearm();
}

/* ---- declarations ---- */

static int same_decl(const nd_decl *a, const nd_decl *b) {
    if (a->kind != b->kind || strcmp(a->target, b->target) || strcmp(a->user, b->user) || a->n_names != b->n_names)
        return 0;
    for (size_t i = 0; i < a->n_names; i++)
        if (strcmp(a->names[i], b->names[i]) || a->is_namespace[i] != b->is_namespace[i]) return 0;
    return 1;
}

void nd_jobs_apply(nd_decl *decls, size_t n, char **refused, size_t refused_n) {
    for (size_t i = 0; i < n_refused; i++) free(refused_files[i]);
    free(refused_files);
    refused_files = refused;
    n_refused = refused_n;
    /* Removed: no more starts or events; a running job is left to end. */
    for (job *j = jobs, *next; j; j = next) {
        next = j->next;
        int kept = 0;
        for (size_t i = 0; i < n; i++) kept |= strcmp(decls[i].label, j->d.label) == 0;
        if (kept || !j->live) continue;
        nd_observe_set(j->d.label, 0, NULL, NULL);
        if (j->d.kind == ND_JOB_SERVICE) nd_bus_follow(j->d.target, 0);
        nd_say("launcher: %s removed (%zu queued events dropped)%s", j->d.label, j->qn, running(j) ? "; it runs on until it ends" : "");
        j->live = 0;
        if (!running(j)) unlink_job(j);
    }
    for (size_t i = 0; i < n; i++) {
        job *j = find(decls[i].label);
        if (j && j->live && same_decl(&j->d, &decls[i])) {
            nd_decl_free(&decls[i]);
            continue;
        }
        if (!j) {
            if (!(j = calloc(1, sizeof *j))) { nd_decl_free(&decls[i]); continue; }
            j->next = jobs;
            jobs = j;
        } else {
            if (j->d.kind == ND_JOB_SERVICE) nd_bus_follow(j->d.target, 0);
            nd_decl_free(&j->d);
        }
        j->d = decls[i];
        j->live = 1;
        j->held_back = 0;
        nd_observe_set(j->d.label, j->d.n_names, j->d.names, j->d.is_namespace);
        if (j->d.kind == ND_JOB_SERVICE) nd_bus_follow(j->d.target, 1);
        nd_say("launcher: %s declared (%s %s, %zu name%s) in %s", j->d.label, j->d.kind == ND_JOB_SERVICE ? "service" : "exec",
               j->d.target, j->d.n_names, j->d.n_names == 1 ? "" : "s", j->d.file);
    }
    free(decls);
    rearm();
}

int nd_jobs_init(CNotify_center *center, const char *bus, int user) {
    user_mode = user;
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0) return -1;
    timer_file = (nd_file){ fd, timer_ready };
    if (nd_watch(&timer_file, 0) != 0 || nd_observe_init(center, arrived) != 0) return -1;
    if (nd_bus_start(bus, &launch_ops) != 0) return -1;
    snprintf(launch_bus, sizeof launch_bus, "%s", nd_bus_address());
    return 0;
}
