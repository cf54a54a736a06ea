/*
 * notifyd.h: darwin-notifyd's parts. The daemon is one thread around one epoll set; each file it
 * polls carries its own callback (as dbus-broker's dispatch.h), and each event source is one file:
 * in floors, each calling only those below it:
 *   main.c      options, reloading notify.conf (SIGHUP, or its files changing), starting the sources
 *   clock.c .. paths.c (below), the sources, each on its own
 *   post.c      posting a name (and setting its state) through a center, and saying so
 *   loop.c      the epoll set, each file's callback, saying things on stderr
 *   clock.c     com.apple.system.clock_set: timerfd with TFD_TIMER_CANCEL_ON_SET
 *   paths.c     `monitor` lines (and so com.apple.system.timezone): notifyd's pathwatch, by inotify
 *   hostname.c  com.apple.system.hostname: /proc/sys/kernel/hostname, which polls on a change
 *   network.c   com.apple.system.config.network_change: rtnetlink, a burst posted once
 *   mounts.c    com.apple.system.kernel.mount/.unmount/.mountupdate: /proc/self/mountinfo
 *   disk.c      com.apple.system.lowdiskspace(.system/.user): statvfs against thresholds
 *   services.c  the same names from systemd-hostnamed and systemd-timedated (the system bus)
 */
#ifndef DARWIN_NOTIFYD_H
#define DARWIN_NOTIFYD_H

#include <stdint.h>
#include <sys/types.h>
#include "darwin_notify.h"

typedef struct nd_file nd_file;
typedef void (*nd_ready_fn)(nd_file *file, uint32_t events);
/* A polled descriptor and what to do when it is ready. Embedded first in each source's state. */
struct nd_file {
    int fd;
    nd_ready_fn ready;
};

/* loop.c: adds `file` to the loop (EPOLLIN, or EPOLLPRI|EPOLLERR when `pri`); 0 on success. */
int nd_watch(nd_file *file, int pri);
void nd_unwatch(nd_file *file);
int nd_loop_init(void);
/* Waits for ready files and runs their callbacks; -1 if the loop cannot go on. */
int nd_loop_once(void);
/* Says a line on stderr (the journal under systemd), prefixed with the daemon's name. */
void nd_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* post.c */
void nd_post_init(CNotify_center *center);
void nd_post(const char *name, const char *why);
void nd_set_state(const char *name, uint64_t value);

/* The sources: each start is called once; a 0 return means it runs. */
int nd_clock_start(void);
int nd_hostname_start(void);
int nd_network_start(int settle_ms);
int nd_mounts_start(void);
int nd_disk_start(int interval_ms, unsigned percent_free, unsigned percent_free_user);
/* services.c: hostnamed's and timedated's PropertiesChanged on the system bus (`address`, NULL:
 * the system bus). */
int nd_services_start(const char *address);
/* paths.c: the watched paths are replaced by these (the `monitor` lines); called again on reload. */
void nd_paths_set(size_t n, const char *const *names, const char *const *paths);
int nd_paths_start(void);

#endif
