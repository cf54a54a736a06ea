/*
 * notifyutil's front door: runs the command lines that only post (`[-q] [-z MS] [-M] [-R]
 * [--bus ADDRESS] -p NAME ...`) itself, in C, and hands every other command line, unchanged, to
 * the full notifyutil (Sources/notifyutil-full, Swift) by exec.
 *
 * Why: a command-line post is mostly process start-up. dbus-send (C, libdbus shared) is the
 * reference, and no Swift executable with glibc shared starts as fast as it does (BENCHMARKS.md,
 * "cli with glibc shared": the smallest Swift main measured 1.10-1.17x dbus-send). A C front with
 * the C core inside and glibc and libdbus shared posts in less time than dbus-send, and links
 * nothing statically that Debian ships as a shared library but libdbus's own peer, our core.
 *
 * The front never decides what a command line means. It runs one only when every argument is one
 * it reads exactly as the full tool does and every name is valid; anything else (help, a usage
 * error, waits, state, the monitor, a name the core refuses, a bus it cannot reach before its
 * first post) goes to the full tool, which prints what it always printed. Once a post went out,
 * the front reports a later failure itself, in the full tool's words, rather than post twice.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>

#include <dbus/dbus.h>

#include "darwin_notify.h"

/* The full tool: beside this one in a build tree; in ../libexec/darwin-notify from this one when
 * installed (BINDIR and LIBEXECDIR under one PREFIX); else where the Makefile said it installs it
 * (NOTIFYUTIL_FULL), for a BINDIR and LIBEXECDIR set apart. */
#ifndef NOTIFYUTIL_FULL
#define NOTIFYUTIL_FULL "../libexec/darwin-notify/notifyutil-full"
#endif
static const char *const full_tool_places[] = { "notifyutil-full", "../libexec/darwin-notify/notifyutil-full", NOTIFYUTIL_FULL };
enum { FULL_TOOL_PLACES = sizeof full_tool_places / sizeof *full_tool_places };

static void run_full_tool(char **argv) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "notifyutil: cannot find its own executable (/proc/self/exe): %s\n", strerror(errno));
        exit(69); /* EX_UNAVAILABLE */
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash != NULL) slash[1] = '\0';
    char tried[FULL_TOOL_PLACES][PATH_MAX];
    int tried_errno[FULL_TOOL_PLACES];
    for (int i = 0; i < FULL_TOOL_PLACES; i++) {
        const char *place = full_tool_places[i];
        /* An absolute place as it is; a relative one from this executable's directory. */
        if (snprintf(tried[i], sizeof tried[i], "%s%s", place[0] == '/' ? "" : self, place) >= (int)sizeof tried[i]) {
            tried_errno[i] = ENAMETOOLONG;
            continue;
        }
        execv(tried[i], argv); /* argv[0] stays "notifyutil": the full tool names itself so */
        tried_errno[i] = errno;
    }
    fprintf(stderr, "notifyutil: cannot run the full notifyutil:");
    for (int i = 0; i < FULL_TOOL_PLACES; i++)
        fprintf(stderr, "%s %s: %s", i ? ";" : "", tried[i], strerror(tried_errno[i]));
    fputs(" (in a SwiftPM build tree: swift build --product notifyutil-full)\n", stderr);
    exit(69);
}

/* Strict UTF-8 (no overlong forms, no surrogates): the full tool's Swift strings repair anything
 * else, and it, not the front, must say what becomes of such a name. */
static int is_utf8(const unsigned char *s) {
    while (*s) {
        if (*s < 0x80) { s++; continue; }
        int extra;
        uint32_t cp;
        if ((*s & 0xe0) == 0xc0) { extra = 1; cp = *s & 0x1f; }
        else if ((*s & 0xf0) == 0xe0) { extra = 2; cp = *s & 0x0f; }
        else if ((*s & 0xf8) == 0xf0) { extra = 3; cp = *s & 0x07; }
        else return 0;
        for (int k = 1; k <= extra; k++) {
            if ((s[k] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[k] & 0x3f);
        }
        static const uint32_t least[4] = { 0, 0x80, 0x800, 0x10000 };
        if (cp < least[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        s += extra + 1;
    }
    return 1;
}

/* A name as the full tool's messages show it (NotifyUtilCore's shownName): quoted, and past 64
 * bytes cut to 60 (a partial character at the cut shown as U+FFFD) with its length. */
static void print_shown_name(FILE *out, const char *name) {
    size_t len = strlen(name);
    if (len <= 64) { fprintf(out, "'%s'", name); return; }
    size_t cut = 60, start = cut;
    while (start > 0 && ((unsigned char)name[start - 1] & 0xc0) == 0x80) start--;
    int partial = 0;
    if (start > 0 && (unsigned char)name[start - 1] >= 0xc0) { /* the lead byte of the last character */
        unsigned char lead = (unsigned char)name[start - 1];
        size_t need = (lead & 0xe0) == 0xc0 ? 2 : (lead & 0xf0) == 0xe0 ? 3 : 4;
        if (cut - (start - 1) < need) { partial = 1; cut = start - 1; }
    }
    fprintf(out, "'%.*s%s…' (%zu bytes)", (int)cut, name, partial ? "\xef\xbf\xbd" : "", len);
}

static void report_failure(const char *name, uint32_t status) {
    const char *why = CNotify_last_error();
    fputs("notifyutil: -p ", stderr);
    print_shown_name(stderr, name);
    fprintf(stderr, ": %s%s%s\n", CNotify_status_string(status), why[0] ? ": " : "", why);
}

/* A -z value as the full tool reads it when it is only decimal digits (Swift's Int("007") is 7);
 * -1 for anything else (a sign, an overflow), which the full tool judges. */
static long nap_value(const char *s) {
    if (*s == '\0') return -1;
    long value = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        if (value > (LONG_MAX - 9) / 10) return -1;
        value = value * 10 + (*s - '0');
    }
    return value;
}

/* The origin a center signs its posts with (docs/PROTOCOL.md "Origins"): 64 random bits, never 0. */
static int new_origin(uint64_t *out) {
    do {
        if (getrandom(out, sizeof *out, 0) != (ssize_t)sizeof *out) return -1;
    } while (*out == 0);
    return 0;
}

/* How many times `names[k]` came before position k: its sequence number is that plus one, as a
 * center numbers each name's posts from 1. */
static uint64_t seq_of(char **names, int k) {
    uint64_t seq = 1;
    for (int j = 0; j < k; j++)
        if (strcmp(names[j], names[k]) == 0) seq++;
    return seq;
}

/* Posts `count` names on a connection of its own, as a center posts them (the Post signal the core
 * marshals, numbered and signed with an origin), with one difference that makes it quicker than
 * dbus-send: Hello goes out with the posts, not a round trip before them (dbus-daemon handles a
 * connection's messages in order, so the posts still follow Hello). Its reply is awaited once the
 * posts are written (a bus that refused us is reported, never taken for a delivery), and then the
 * reply to a call sent after the posts: the bus has handled them before the process exits.
 * Returns -1 when nothing was sent (the full tool then runs the same command line), else the exit
 * status. */
static int post_directly(const char *bus, char **names, int count, long nap_ms) {
    char address[4096];
    uint64_t origin;
    if (CNotify_bus_address(bus, address, sizeof address) != NOTIFY_STATUS_OK || new_origin(&origin) != 0) return -1;
    DBusError err;
    dbus_error_init(&err);
    DBusConnection *conn = dbus_connection_open_private(address, &err);
    dbus_error_free(&err);
    if (conn == NULL) return -1;
    dbus_connection_set_exit_on_disconnect(conn, FALSE);
    int result = -1, sent = 0;
    DBusPendingCall *hello_reply = NULL, *barrier_reply = NULL;
    DBusMessage *barrier = NULL;
    DBusMessage *hello = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS, DBUS_INTERFACE_DBUS, "Hello");
    if (hello == NULL || !dbus_connection_send_with_reply(conn, hello, &hello_reply, DBUS_TIMEOUT_USE_DEFAULT) || hello_reply == NULL)
        goto out;
    for (int k = 0; k < count; k++) {
        char *bytes = NULL;
        int len = 0;
        if (CNotify_protocol_build_post_from(names[k], seq_of(names, k), origin, &bytes, &len) != NOTIFY_STATUS_OK) goto failed;
        DBusMessage *post = dbus_message_demarshal(bytes, len, NULL);
        CNotify_protocol_free(bytes);
        if (post == NULL) goto failed;
        /* Marshalled as serial 1, Hello's: each post its own serial after it. */
        dbus_message_set_serial(post, (dbus_uint32_t)k + 2);
        dbus_bool_t queued = dbus_connection_send(conn, post, NULL);
        dbus_message_unref(post);
        if (!queued) goto failed;
        sent++;
        if (nap_ms > 0) { /* Apple's pause after every post, once it is written */
            dbus_connection_flush(conn);
            usleep((useconds_t)(nap_ms < 4000000 ? nap_ms : 4000000) * 1000);
        }
    }
    /* Then one call to the bus, whose reply (any: even a policy's refusal) comes once the bus has
     * handled everything sent before it: a process that exits as soon as its posts are written
     * can leave them unread, and a bus that sees the hang-up first may drop them (dbus-broker
     * did). */
    barrier = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS, DBUS_INTERFACE_DBUS, "GetId");
    if (barrier != NULL) dbus_message_set_serial(barrier, (dbus_uint32_t)count + 2);
    if (barrier == NULL || !dbus_connection_send_with_reply(conn, barrier, &barrier_reply, DBUS_TIMEOUT_USE_DEFAULT)
        || barrier_reply == NULL)
        goto failed;
    dbus_connection_flush(conn);
    dbus_pending_call_block(hello_reply);
    DBusMessage *reply = dbus_pending_call_steal_reply(hello_reply);
    DBusMessage *handled = NULL;
    if (reply != NULL && dbus_message_get_type(reply) == DBUS_MESSAGE_TYPE_METHOD_RETURN) {
        dbus_pending_call_block(barrier_reply);
        handled = dbus_pending_call_steal_reply(barrier_reply);
        result = handled != NULL ? 0 : 1;
        if (!handled) {
            fprintf(stderr, "notifyutil: -p ");
            print_shown_name(stderr, names[count - 1]);
            fprintf(stderr, ": %s: the bus at %s closed the connection before it took the posts\n",
                    CNotify_status_string(NOTIFY_STATUS_FAILED), address);
        }
    } else {
        const char *why = reply == NULL ? "the connection closed"
                          : dbus_message_get_error_name(reply) ? dbus_message_get_error_name(reply) : "an unexpected reply";
        fprintf(stderr, "notifyutil: -p ");
        print_shown_name(stderr, names[count - 1]);
        fprintf(stderr, ": %s: the bus at %s refused us: %s\n", CNotify_status_string(NOTIFY_STATUS_SERVER_NOT_FOUND), address, why);
        result = 1;
    }
    if (reply) dbus_message_unref(reply);
    if (handled) dbus_message_unref(handled);
    goto out;
failed:
    if (sent > 0) {
        fprintf(stderr, "notifyutil: -p ");
        print_shown_name(stderr, names[sent < count ? sent : count - 1]);
        fprintf(stderr, ": %s: out of memory\n", CNotify_status_string(NOTIFY_STATUS_FAILED));
        result = 1;
    }
out:
    if (hello) dbus_message_unref(hello);
    if (hello_reply) dbus_pending_call_unref(hello_reply);
    if (barrier) dbus_message_unref(barrier);
    if (barrier_reply) dbus_pending_call_unref(barrier_reply);
    dbus_connection_close(conn); /* a private connection: closed before its last unref */
    dbus_connection_unref(conn);
    return result;
}

/* Posts through a center, as the full tool does: for names a center signs with credentials
 * (`user.uid.N`: they need the bus's id and our unique name first), and for `self.` names, which a
 * center delivers in the process alone. */
static int post_through_center(const char *bus, char **names, int count, long nap_ms, char **argv) {
    CNotify_center *center;
    if (bus == NULL) {
        center = CNotify_center_get_darwin_notify_center();
    } else {
        uint32_t status = 0;
        center = CNotify_center_create(bus, &status);
        if (center == NULL) run_full_tool(argv); /* a malformed address: its words, exit 1 */
    }
    for (int k = 0; k < count; k++) {
        uint32_t status = CNotify_center_post(center, names[k]);
        if (status == NOTIFY_STATUS_OK && nap_ms > 0) {
            status = CNotify_center_flush(center, 5000);
            if (status == NOTIFY_STATUS_OK) usleep((useconds_t)(nap_ms < 4000000 ? nap_ms : 4000000) * 1000);
        }
        if (status != NOTIFY_STATUS_OK) {
            if (k == 0) { /* nothing went out yet: the full tool tries the same and says why, as always */
                if (bus != NULL) CNotify_center_destroy(center);
                run_full_tool(argv);
            }
            report_failure(names[k], status);
            return 1;
        }
    }
    /* The posts are written before the process ends, or it says they may not be. */
    uint32_t status = CNotify_center_flush(center, 5000);
    if (status != NOTIFY_STATUS_OK) report_failure(names[count - 1], status);
    if (bus != NULL) CNotify_center_destroy(center);
    return status == NOTIFY_STATUS_OK ? 0 : 1;
}

int main(int argc, char **argv) {
    long nap_ms = 100; /* Apple's pause after each post */
    const char *bus = NULL;
    char **names = calloc((size_t)argc, sizeof *names);
    int count = 0, through_center = 0;
    if (names == NULL) run_full_tool(argv);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-q") == 0 || strcmp(arg, "-M") == 0 || strcmp(arg, "-R") == 0) continue;
        if (strcmp(arg, "-z") == 0 && i + 1 < argc && (nap_ms = nap_value(argv[i + 1])) >= 0) { i++; continue; }
        if (strcmp(arg, "--bus") == 0 && i + 1 < argc && argv[i + 1][0] != '\0') { bus = argv[++i]; continue; }
        if (strcmp(arg, "-p") == 0 && i + 1 < argc && is_utf8((const unsigned char *)argv[i + 1])
            && CNotify_validate_name(argv[i + 1]) == NOTIFY_STATUS_OK) {
            uint32_t uid;
            /* A center signs user.uid.N posts and names notify.conf reserves, and keeps self.
             * posts in the process (they never reach the bus): they go through one. */
            if (CNotify_name_restricted_uid(argv[i + 1], &uid) || CNotify_name_needs_credential(argv[i + 1]) ||
                strncmp(argv[i + 1], "self.", 5) == 0)
                through_center = 1;
            names[count++] = argv[++i];
            continue;
        }
        run_full_tool(argv); /* anything else, including -v, -g, -s, -w, -h, --version */
    }
    if (count == 0) run_full_tool(argv);
    int status = through_center ? -1 : post_directly(bus, names, count, nap_ms);
    if (status < 0) status = post_through_center(bus, names, count, nap_ms, argv);
    free(names);
    return status;
}
