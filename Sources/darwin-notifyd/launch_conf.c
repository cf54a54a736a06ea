/*
 * launch_conf.c: one declaration file (darwin-notify-launch(5)) into an nd_decl, purely: no file,
 * no user database, no bus. The job is the file's name without `.conf` (its label); a line is a
 * keyword and its words:
 *   service NAME            the job is the D-Bus activatable service NAME (or)
 *   exec PATH [ARG...]      the job is this command (an absolute path; words split on blanks, no shell)
 *   user NAME               who runs an exec job (system declarations; default root)
 *   notification NAME       a post of NAME starts the job and is one of its events
 *   namespace NS            so does a post of NS or of any name under it
 *   throttle SECONDS        launchd's ThrottleInterval: starts at least this far apart (default 10)
 *   checkin SECONDS         how long a started job has to check in (default 30)
 * `#` starts a comment. Any problem refuses the whole file: a job half understood is not started.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "launch.h"

int nd_label_valid(const char *label) {
    size_t n = strlen(label);
    if (n == 0 || n > ND_LABEL_MAX || label[0] == '.' || label[0] == '-') return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)label[i]) && !strchr("._-@", label[i])) return 0;
    return 1;
}

/* A D-Bus well-known name: two or more elements of [A-Za-z0-9_-], none starting with a digit,
 * at most 255 bytes (the D-Bus specification). */
static int service_valid(const char *s) {
    size_t n = strlen(s), elements = 1;
    if (n == 0 || n > 255 || s[0] == '.' || s[n - 1] == '.') return 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.') {
            if (s[i + 1] == '.' || isdigit((unsigned char)s[i + 1])) return 0;
            elements++;
        } else if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-') {
            return 0;
        }
    }
    return elements >= 2 && !isdigit((unsigned char)s[0]);
}

static int seconds(const char *s, unsigned min, unsigned max, unsigned *out) {
    char *end;
    if (!isdigit((unsigned char)s[0])) return 0;
    unsigned long v = strtoul(s, &end, 10);
    if (*end || v < min || v > max) return 0;
    *out = (unsigned)v;
    return 1;
}

/* Whether `name` is `ns` or under it. */
static int under(const char *name, const char *ns) {
    size_t n = strlen(ns);
    return strncmp(name, ns, n) == 0 && (name[n] == '\0' || name[n] == '.');
}

void nd_decl_free(nd_decl *d) {
    for (size_t i = 0; i < d->n_names; i++) free(d->names[i]);
    d->n_names = 0;
}

#define FAIL(...)                                    \
    do {                                             \
        snprintf(why, why_len, __VA_ARGS__);         \
        *line = lineno;                              \
        return -1;                                   \
    } while (0)

int nd_decl_parse(const char *label, const char *text, size_t len, nd_decl *out, unsigned *line, char *why,
                  size_t why_len) {
    unsigned lineno = 0;
    memset(out, 0, sizeof *out);
    out->throttle_s = 10;
    out->checkin_s = 30;
    if (!nd_label_valid(label))
        FAIL("the file name must be the job's label and .conf: letters, digits, '.', '_', '-', '@', at most %d bytes",
             ND_LABEL_MAX);
    snprintf(out->label, sizeof out->label, "%s", label);
    if (len > ND_DECL_FILE_MAX) FAIL("the file is %zu bytes; the limit is %d", len, ND_DECL_FILE_MAX);
    if (memchr(text, '\0', len)) FAIL("the file holds a NUL byte");
    int seen_throttle = 0, seen_checkin = 0;
    for (size_t at = 0; at < len;) {
        const char *start = text + at, *nl = memchr(start, '\n', len - at);
        size_t n = nl ? (size_t)(nl - start) : len - at;
        at += n + (nl ? 1 : 0);
        lineno++;
        char buf[ND_TARGET_MAX + 64];
        if (n >= sizeof buf) FAIL("the line is %zu bytes; the limit is %zu", n, sizeof buf - 1);
        memcpy(buf, start, n);
        buf[n] = '\0';
        char *hash = strchr(buf, '#');
        if (hash) *hash = '\0';
        if (n && buf[n - 1] == '\r') buf[n - 1] = '\0';
        char *p = buf;
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) continue;
        char *word = p;
        while (*p && *p != ' ' && *p != '\t') p++;
        if (*p) *p++ = '\0';
        while (*p == ' ' || *p == '\t') p++;
        char *rest = p; /* the rest of the line, blanks at its end removed */
        for (char *e = rest + strlen(rest); e > rest && (e[-1] == ' ' || e[-1] == '\t'); e--) e[-1] = '\0';
        int one_word = *rest && !strpbrk(rest, " \t");
        if (strcmp(word, "service") == 0 || strcmp(word, "exec") == 0) {
            if (out->kind) FAIL("a second job (%s): one of service or exec per file", word);
            if (!*rest) FAIL("%s needs %s", word, word[0] == 's' ? "a D-Bus service name" : "a command");
            if (word[0] == 's') {
                if (!one_word || !service_valid(rest))
                    FAIL("service '%s' is not a D-Bus well-known name (two or more elements, none starting with a digit)", rest);
                out->kind = ND_JOB_SERVICE;
            } else {
                if (rest[0] != '/') FAIL("exec needs an absolute path (no shell, no PATH search): '%s'", rest);
                out->kind = ND_JOB_EXEC;
            }
            snprintf(out->target, sizeof out->target, "%s", rest);
        } else if (strcmp(word, "user") == 0) {
            if (out->user[0]) FAIL("a second user line");
            if (!one_word || strlen(rest) >= sizeof out->user) FAIL("user needs one user name or uid");
            snprintf(out->user, sizeof out->user, "%s", rest);
        } else if (strcmp(word, "notification") == 0 || strcmp(word, "namespace") == 0) {
            int ns = word[1] == 'a';
            if (!one_word) FAIL("%s needs one %s", word, ns ? "namespace" : "name");
            if ((ns ? CNotify_validate_namespace(rest) : CNotify_validate_name(rest)) != NOTIFY_STATUS_OK)
                FAIL("%s '%s': %s", word, rest, CNotify_last_error());
            if (out->n_names == ND_DECL_NAMES) FAIL("more than %d names and namespaces", ND_DECL_NAMES);
            for (size_t i = 0; i < out->n_names; i++) {
                if (strcmp(out->names[i], rest) == 0 && out->is_namespace[i] == ns) FAIL("'%s' is declared twice", rest);
                if (out->is_namespace[i] && under(rest, out->names[i]))
                    FAIL("'%s' is already under namespace '%s': each post is one event", rest, out->names[i]);
                if (ns && under(out->names[i], rest))
                    FAIL("namespace '%s' covers '%s', declared above: each post is one event", rest, out->names[i]);
            }
            if (!(out->names[out->n_names] = strdup(rest))) FAIL("out of memory");
            out->is_namespace[out->n_names++] = ns;
        } else if (strcmp(word, "throttle") == 0) {
            if (seen_throttle++ || !seconds(rest, 0, 86400, &out->throttle_s)) FAIL("throttle needs one number of seconds, 0 to 86400");
        } else if (strcmp(word, "checkin") == 0) {
            if (seen_checkin++ || !seconds(rest, 1, 3600, &out->checkin_s)) FAIL("checkin needs one number of seconds, 1 to 3600");
        } else {
            FAIL("unknown keyword '%s' (service, exec, user, notification, namespace, throttle, checkin)", word);
        }
    }
    lineno = 0;
    if (!out->kind) FAIL("no job: a service or an exec line");
    if (!out->n_names) FAIL("nothing starts the job: a notification or a namespace line");
    if (out->user[0] && out->kind == ND_JOB_SERVICE)
        FAIL("user applies to exec jobs; a service runs as its D-Bus service file says");
    return 0;
}
