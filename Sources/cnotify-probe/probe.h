/* Shared by the probe's files: output and failure reporting (main.c), and the notify(3)
 * semantics roles (semantics.c). */
#ifndef CNOTIFY_PROBE_H
#define CNOTIFY_PROBE_H
#include <stdint.h>

void say(const char *fmt, const char *arg);
int fail(const char *what, uint32_t st);
/* One line on stdout, printf-style (hardening.c). */
void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A registered private libdbus connection to DARWIN_NOTIFY_BUS, or NULL (said on stderr). */
struct DBusConnection;
struct DBusConnection *raw_connect(void);

int cmd_signal(int argc, char **argv);
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
int cmd_dispatch(int argc, char **argv);
int cmd_suspend(int argc, char **argv);
int cmd_self(int argc, char **argv);
int cmd_state(int argc, char **argv);
int cmd_guard(int argc, char **argv);
int cmd_reuse(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_count(int argc, char **argv);
int cmd_raw_post(int argc, char **argv);
int cmd_forge_seq(int argc, char **argv);
int cmd_forge_huge(int argc, char **argv);
int cmd_watch_namespace(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_token_after_destroy(int argc, char **argv);
int cmd_flood_until_refused(int argc, char **argv);
int cmd_post_loop(int argc, char **argv);
int cmd_observe_namespace(int argc, char **argv);

#endif
