/*
 * notify.h: Apple's notify(3) API on Linux, over D-Bus (DarwinNotify).
 *
 * Names, signatures and status codes are Apple's, so a C program written for macOS that uses
 * only these compiles unchanged with `#include <notify.h>`. Semantics follow Apple's Libnotify;
 * docs/DESIGN.md lists where and why we differ.
 */
#ifndef __NOTIFICATION_H__
#define __NOTIFICATION_H__

#include <stdint.h>
#include <stdbool.h>

#define NOTIFY_STATUS_OK 0
#define NOTIFY_STATUS_INVALID_NAME 1
#define NOTIFY_STATUS_INVALID_TOKEN 2
#define NOTIFY_STATUS_INVALID_PORT 3
#define NOTIFY_STATUS_INVALID_FILE 4
#define NOTIFY_STATUS_INVALID_SIGNAL 5
#define NOTIFY_STATUS_INVALID_REQUEST 6
#define NOTIFY_STATUS_NOT_AUTHORIZED 7
#define NOTIFY_STATUS_OPT_DISABLE 8
#define NOTIFY_STATUS_SERVER_NOT_FOUND 9
#define NOTIFY_STATUS_NULL_INPUT 10
#define NOTIFY_STATUS_FAILED 1000000

/* Flag for notify_register_file_descriptor: reuse a descriptor a previous call returned. */
#define NOTIFY_REUSE 0x00000001

/* A token value that no registration ever has. */
#define NOTIFY_TOKEN_INVALID -1

/* Mach ports do not exist on Linux. These stand in for Apple's types so that code with a Mach-port
 * path compiles unchanged; notify_register_mach_port fails at run time (below), and the code takes
 * its other path. Left out when a program defines MACH_PORT_NULL itself. */
#ifndef MACH_PORT_NULL
typedef unsigned int mach_port_t;   /* Apple's is a 32-bit port name */
#define MACH_PORT_NULL ((mach_port_t)0)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Posts a notification for `name` to every observer on the bus, this process included. */
uint32_t notify_post(const char *name);

/* Creates a token for notify_check(); nothing is delivered actively. */
uint32_t notify_register_check(const char *name, int *out_token);

/*
 * Delivers each notification as the 4-byte token, in network byte order, written to a pipe whose
 * read end is returned in *notify_fd. notify_cancel() closes it.
 */
uint32_t notify_register_file_descriptor(const char *name, int *notify_fd, int flags, int *out_token);

/* *check is 1 on the first call for a token, then only when a post happened since the last call. */
uint32_t notify_check(int token, int *check);

/*
 * Apple's delivery by Mach message. There are no Mach ports on Linux: it always returns
 * NOTIFY_STATUS_INVALID_PORT, registers nothing, sets *out_token to NOTIFY_TOKEN_INVALID and
 * leaves *notify_port as it was (as Libnotify: a bad or NULL name, NOTIFY_STATUS_INVALID_NAME; a NULL
 * notify_port, NOTIFY_STATUS_INVALID_PORT; a NULL out_token, NOTIFY_STATUS_NULL_INPUT). Use
 * notify_register_dispatch or notify_register_file_descriptor instead.
 */
uint32_t notify_register_mach_port(const char *name, mach_port_t *notify_port, int flags, int *out_token);

/* Cancels a registration and releases what it holds. */
uint32_t notify_cancel(int token);

/* True while `val` names a live registration of this process. */
bool notify_is_valid_token(int val);

/*
 * notify_register_signal: the process receives `sig` (kill(getpid(), sig)) on each post of
 * `name`; notify_check on the token tells whether this token's name was posted.
 * NOTIFY_STATUS_INVALID_SIGNAL unless 1 <= sig <= SIGRTMAX.
 */
uint32_t notify_register_signal(const char *name, int sig, int *out_token);

/*
 * notify_set_state / notify_get_state: the 64-bit state of the token's name, shared by every
 * process on the bus, kept after the setter exits and across bus restarts (0 if never set).
 * Reading needs no bus round trip. user.uid.N names: only uid N or root may set them
 * (NOTIFY_STATUS_NOT_AUTHORIZED). A cancelled token: NOTIFY_STATUS_INVALID_TOKEN.
 */
uint32_t notify_set_state(int token, uint64_t state);
uint32_t notify_get_state(int token, uint64_t *state);

/* A registration whose only effect is the count notify_check reads (Apple's SPI of that name). */
uint32_t notify_register_plain(const char *name, int *out_token);

/*
 * notify_suspend / notify_resume: while a token is suspended, posts of its name are held and
 * coalesced; when the last suspend is resumed, one delivery follows if any post arrived, none
 * otherwise. Suspends nest: each notify_suspend needs a notify_resume. notify_resume of a token
 * that is not suspended returns NOTIFY_STATUS_INVALID_REQUEST (Apple's returns OK).
 */
uint32_t notify_suspend(int token);
uint32_t notify_resume(int token);

#ifdef __BLOCKS__
#if defined(__has_include) && __has_include(<dispatch/dispatch.h>)
#include <dispatch/dispatch.h>
#else
typedef struct dispatch_queue_s *dispatch_queue_t; /* libdispatch's C type */
#endif
typedef void (^notify_handler_t)(int token);
/*
 * notify_register_dispatch: `handler` runs asynchronously on `queue` with the token, once per
 * post. No invocation starts after notify_cancel returns (one running on another thread is
 * waited for); a handler may cancel its own token. NULL queue or handler: NOTIFY_STATUS_NULL_INPUT.
 */
uint32_t notify_register_dispatch(const char *name, int *out_token, dispatch_queue_t queue, notify_handler_t handler);
#endif

#ifdef __cplusplus
}
#endif

#endif /* __NOTIFICATION_H__ */
