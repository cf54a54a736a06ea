/* Shared by the probe's files: output and failure reporting (main.c), and the notify(3)
 * semantics roles (semantics.c). */
#ifndef CNOTIFY_PROBE_H
#define CNOTIFY_PROBE_H
#include <stddef.h>
#include <sys/socket.h>
#include <stdint.h>

void say(const char *fmt, const char *arg);
int fail(const char *what, uint32_t st);
/* One line on stdout, printf-style (hardening.c). */
void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A registered private libdbus connection to DARWIN_NOTIFY_BUS, or NULL (said on stderr). */
struct DBusConnection;
struct DBusConnection *raw_connect(void);

/* The fast path's contract written from PROTOCOL.md, for the hostile and scripted peers
 * (fp_attack.c): a frame's bytes, an endpoint's abstract address, a connection to it, the bus
 * signals (Endpoint for no bucket or every one; Sync), the first endpoint announced to a Query. */
struct sockaddr_un;
void fp_random_hex(char out[33]);
size_t fp_frame(unsigned char *out, int type, uint64_t a, uint64_t b, const char *text);
void fp_address(const char *token, struct sockaddr_un *sa, socklen_t *len);
int fp_connect_endpoint(const char *token, int nonblock);
void fp_send_endpoint(struct DBusConnection *conn, const char *token, int all, const char *destination);
void fp_send_sync(struct DBusConnection *conn, const char *owner, uint64_t token);
int fp_find_endpoint(struct DBusConnection *conn, char token[64], char owner[256]);

int cmd_signal(int argc, char **argv);
/* launch.c: a job of the launcher */
int cmd_launch_job(int argc, char **argv);
int cmd_fp_peer(int argc, char **argv);
int cmd_fp_announce(int argc, char **argv);
int cmd_fp_deaf(int argc, char **argv);
int cmd_fp_swarm(int argc, char **argv);
int cmd_fp_forge(int argc, char **argv);
int cmd_fp_fakes(int argc, char **argv);
int cmd_fp_burst(int argc, char **argv);
int cmd_fp_orders(int argc, char **argv);
int cmd_fp_idle(int argc, char **argv);
int cmd_fp_hello_storm(int argc, char **argv);
int cmd_fp_query_flood(int argc, char **argv);
int cmd_dist_object(int argc, char **argv);
int cmd_plist_keys(int argc, char **argv);
int cmd_dist_watch(int argc, char **argv);
int cmd_fp_self(int argc, char **argv);
int cmd_fp_reconnect(int argc, char **argv);
int cmd_dispatch(int argc, char **argv);
int cmd_suspend(int argc, char **argv);
int cmd_self(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_state(int argc, char **argv);
int cmd_guard(int argc, char **argv);
int cmd_conf_check(int argc, char **argv);
int cmd_access(int argc, char **argv);
int cmd_reuse(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_count(int argc, char **argv);
int cmd_raw_post(int argc, char **argv);
int cmd_forge_seq(int argc, char **argv);
int cmd_forge_origin(int argc, char **argv);
int cmd_forge_huge(int argc, char **argv);
int cmd_watch_namespace(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_token_after_destroy(int argc, char **argv);
int cmd_flood_until_refused(int argc, char **argv);
int cmd_post_loop(int argc, char **argv);
int cmd_observe_namespace(int argc, char **argv);

#endif
