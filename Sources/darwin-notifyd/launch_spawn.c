/*
 * launch_spawn.c: an exec job's process (darwin-notify-launch(5) `exec`): its words split on
 * blanks (no shell), its user (a system declaration's `user`, else root; a user's launcher runs
 * it as itself), its environment (the launcher's, with DARWIN_NOTIFY_JOB, DARWIN_NOTIFY_LAUNCH_TOKEN
 * and DARWIN_NOTIFY_LAUNCHER_BUS), a session of its own, standard input /dev/null, the signal
 * mask cleared. Everything the child needs is made before fork: after it, only system calls
 * (the daemon has other threads). And the token that proves a process is the job.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include "launch.h"

extern char **environ;

void nd_fill_token(char out[33]) {
    unsigned char raw[16];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (fd < 0 || read(fd, raw, sizeof raw) != (ssize_t)sizeof raw) nd_say("launcher: no randomness for a job's token");
        if (fd >= 0) close(fd);
    }
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

/* Who runs an exec job: the user line (system declarations), else root; a user's launcher runs
 * every job as itself (launch_files.c refuses another user in a user's declaration). */
static int job_user(const nd_decl *d, int user_mode, uid_t *uid, gid_t *gid, gid_t *groups, int *n_groups) {
    if (user_mode || !d->user[0]) {
        *uid = geteuid();
        *gid = getegid();
        *n_groups = -1; /* keep the launcher's */
        return 0;
    }
    struct passwd *pw = getpwnam(d->user);
    char *end;
    unsigned long id = strtoul(d->user, &end, 10);
    if (!pw && !*end) pw = getpwuid((uid_t)id);
    if (!pw) {
        nd_say("launcher: %s: no user %s", d->label, d->user);
        return -1;
    }
    *uid = pw->pw_uid;
    *gid = pw->pw_gid;
    if (getgrouplist(pw->pw_name, pw->pw_gid, groups, n_groups) < 0) *n_groups = 1, groups[0] = pw->pw_gid;
    return 0;
}

pid_t nd_spawn(const nd_decl *d, const char *token, const char *launch_bus, int user_mode) {
    uid_t uid;
    gid_t gid, groups[64];
    int n_groups = 64;
    if (job_user(d, user_mode, &uid, &gid, groups, &n_groups) != 0) return -1;
    /* Everything the child needs is made before fork: after it, only system calls. */
    char cmd[ND_TARGET_MAX + 1], *argv[128];
    snprintf(cmd, sizeof cmd, "%s", d->target);
    size_t argc = 0;
    for (char *save = NULL, *w = strtok_r(cmd, " \t", &save); w && argc < 127; w = strtok_r(NULL, " \t", &save)) argv[argc++] = w;
    argv[argc] = NULL;
    size_t n_env = 0;
    while (environ[n_env]) n_env++;
    char **envp = calloc(n_env + 4, sizeof *envp), *job_env = NULL, *token_env = NULL, *bus_env = NULL;
    if (!envp || asprintf(&job_env, "DARWIN_NOTIFY_JOB=%s", d->label) < 0 ||
        asprintf(&token_env, "DARWIN_NOTIFY_LAUNCH_TOKEN=%s", token) < 0 ||
        asprintf(&bus_env, "DARWIN_NOTIFY_LAUNCHER_BUS=%s", launch_bus) < 0) {
        free(envp);
        return -1;
    }
    size_t e = 0;
    for (size_t i = 0; i < n_env; i++)
        if (strncmp(environ[i], "DARWIN_NOTIFY_JOB=", 18) && strncmp(environ[i], "DARWIN_NOTIFY_LAUNCH_TOKEN=", 27) &&
            strncmp(environ[i], "DARWIN_NOTIFY_LAUNCHER_BUS=", 27) && strncmp(environ[i], "NOTIFY_SOCKET=", 14))
            envp[e++] = environ[i];
    envp[e++] = job_env;
    envp[e++] = token_env;
    envp[e++] = bus_env;
    envp[e] = NULL;
    int change_user = uid != geteuid() || n_groups >= 0;
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        setsid();
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null >= 0) dup2(null, 0);
        if (change_user && (setgroups((size_t)(n_groups < 0 ? 0 : n_groups), groups) != 0 || setgid(gid) != 0 || setuid(uid) != 0))
            _exit(126);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    int saved = errno;
    free(job_env);
    free(token_env);
    free(bus_env);
    free(envp);
    if (pid < 0) nd_say("launcher: %s: fork: %s", d->label, strerror(saved));
    return pid;
}

