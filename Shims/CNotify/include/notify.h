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

/* Cancels a registration and releases what it holds. */
uint32_t notify_cancel(int token);

/* True while `val` names a live registration of this process. */
bool notify_is_valid_token(int val);

#ifdef __cplusplus
}
#endif

#endif /* __NOTIFICATION_H__ */
