/*
 * launch.h: the launcher, darwin-notifyd's part that starts a job when a name it declared is
 * posted (launchd's LaunchEvents of com.apple.notifyd.matching) and hands it the events it
 * missed. In floors, each calling only those below it (upward only through nd_launch_ops):
 *   launch_files.c    the declaration directory: which files to believe, reading them, inotify
 *   launch_conf.c     one declaration file's text into an nd_decl (pure; a fuzzer beside it)
 *   launch_jobs.c     the jobs: queues, starting, throttling, check-in deadlines, ends, Take
 *   launch_spawn.c    an exec job's process: its user, environment and session (fork, exec)
 *   launch_bus.c      the launcher's D-Bus service (Describe, Take, List), StartServiceByName,
 *                     who owns each job's service name
 *   launch_observe.c  the declared names observed through the daemon's center, handed to the
 *                     loop thread through an inbox and an eventfd
 *   launch_list.c     `--list`: a client of a running launcher's List (beside, not below, them)
 * docs/PROTOCOL.md "Launch on post" is the contract; darwin-notify-launch(5) the file format.
 */
#ifndef DARWIN_NOTIFYD_LAUNCH_H
#define DARWIN_NOTIFYD_LAUNCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <dbus/dbus.h>
#include "notifyd.h"

#define ND_LABEL_MAX 200
#define ND_TARGET_MAX 4096
#define ND_DECL_NAMES 64
#define ND_DECL_FILE_MAX 65536
#define ND_QUEUE_MAX 1024
#define ND_TAKE_BATCH 256
#define ND_TAKE_WAIT_MAX_MS 30000

enum { ND_JOB_SERVICE = 1, ND_JOB_EXEC = 2 };

typedef struct nd_decl {
    char label[ND_LABEL_MAX + 1];
    char file[4352];
    int kind;
    char target[ND_TARGET_MAX + 1]; /* the service name, or the command line */
    char user[64];                  /* "" when no `user` line */
    size_t n_names;
    char *names[ND_DECL_NAMES];
    int is_namespace[ND_DECL_NAMES];
    unsigned throttle_s, checkin_s;
} nd_decl;

/* launch_conf.c: parses `text` (the file `label`.conf). 0, or -1 with *line and why[] saying the
 * first problem (line 0: the file as a whole). Frees nothing on failure: call nd_decl_free. */
int nd_decl_parse(const char *label, const char *text, size_t len, nd_decl *out, unsigned *line, char *why, size_t why_len);
void nd_decl_free(nd_decl *d);
/* Whether `label` (a file name without .conf) may name a job. */
int nd_label_valid(const char *label);

/* launch_observe.c: a post of a declared name arrives on the center's thread and is handed to
 * the loop thread, in order, through `arrived`. */
typedef void (*nd_arrived_fn)(const char *label, const char *name);
int nd_observe_init(CNotify_center *center, nd_arrived_fn arrived);
/* Observes `names` for `label` (replacing what it observed before); n 0 stops observing. */
int nd_observe_set(const char *label, size_t n, char *const *names, const int *is_namespace);
/* Posts that could not be handed over (the inbox full): a count per label is the job's. */

/* launch_bus.c: the launcher's service. The jobs reach it down; it reaches the jobs up through
 * these. */
typedef struct nd_launch_ops {
    /* Describe(job): kind and target, or -1 when there is no such job. */
    int (*describe)(const char *job, int *kind, const char **target);
    /* Take(job, token, wait_ms) from `sender`: the jobs answer `call` now or later (nd_bus_reply_*). */
    void (*take)(DBusMessage *call, const char *sender, const char *job, const char *token, uint32_t wait_ms);
    /* List(): the text table of docs/PROTOCOL.md, malloc'd. */
    char *(*list)(void);
    /* `service`'s owner is now `owner` ("" none). */
    void (*owner_changed)(const char *service, const char *owner);
    /* StartServiceByName(`service`) failed: `why`. */
    void (*start_failed)(const char *service, const char *why);
} nd_launch_ops;

int nd_bus_start(const char *address, const nd_launch_ops *ops);
/* A private connection to `spec` ("session", "system", "embedded" or an address), resolved as every
 * center resolves it (CNotify_bus_address); NULL, said, when it cannot be had. `resolved` (if not
 * NULL) gets the address. */
DBusConnection *nd_bus_open(const char *spec, char *resolved, size_t len);
const char *nd_bus_address(void);
/* Follows `service`'s owner (NameOwnerChanged, and its owner now); `follow` 0 stops. */
void nd_bus_follow(const char *service, int follow);
void nd_bus_start_service(const char *service);
/* Answers a Take: `n` events, or an error (`error` a D-Bus error name). Unrefs `call`. */
typedef struct nd_event { char *name; uint32_t count; uint64_t serial; } nd_event;
void nd_bus_reply_events(DBusMessage *call, const nd_event *events, size_t n);
void nd_bus_reply_error(DBusMessage *call, const char *error, const char *why);
/* Writes what is queued for the bus (after the loop's work). */
void nd_bus_flush(void);

#define ND_ERROR_NO_SUCH_JOB "org.darwinnotify.Launcher.Error.NoSuchJob"
#define ND_ERROR_NOT_THE_JOB "org.darwinnotify.Launcher.Error.NotTheJob"
#define ND_ERROR_REPLACED "org.darwinnotify.Launcher.Error.Replaced"

/* launch_jobs.c */
int nd_jobs_init(CNotify_center *center, const char *launch_bus, int user_mode);
/* Replaces the jobs with `decls` (n of them; the jobs keep what they can: a job whose declaration
 * is unchanged keeps its queue and its process). Takes the declarations. */
void nd_jobs_apply(nd_decl *decls, size_t n, char **refused, size_t n_refused);
/* SIGCHLD: reaps the jobs' processes. */
void nd_jobs_reap(void);

/* launch_spawn.c: 32 hex digits of 16 random bytes; an exec job's process, or -1 (said). */
void nd_fill_token(char out[33]);
pid_t nd_spawn(const nd_decl *d, const char *token, const char *launch_bus, int user_mode);

/* launch_list.c: `darwin-notifyd --list`: asks the launcher on `bus` for its jobs and prints
 * them; the process's exit status. */
int nd_list(const char *bus);

/* launch_files.c: reads the directory now and follows it (inotify). */
int nd_launch_start(const char *dir, int user_mode);
/* SIGHUP: reads the directory again now. */
void nd_launch_reread(void);

#endif
