/*
 * hostname.c: com.apple.system.hostname (kNotifySCHostNameChange), when the kernel's host name
 * changes (sethostname: hostnamectl, hostname(1), a UTS namespace's own). /proc/sys/kernel/hostname
 * polls with POLLERR|POLLPRI after a change (the kernel's proc_sys_poll); it is read again to tell
 * a real change from a write of the same name.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "notifyd.h"

static nd_file host_file;
static char last[256];

static int read_name(char *out, size_t len) {
    ssize_t n = pread(host_file.fd, out, len - 1, 0);
    if (n < 0) return -1;
    out[n] = '\0';
    out[strcspn(out, "\n")] = '\0';
    return 0;
}

static void host_ready(nd_file *f, uint32_t events) {
    (void)f;
    (void)events;
    char now[256];
    if (read_name(now, sizeof now) != 0 || strcmp(now, last) == 0) return;
    char why[600];
    snprintf(why, sizeof why, "the host name is now '%s', was '%s'", now, last);
    snprintf(last, sizeof last, "%s", now);
    nd_post("com.apple.system.hostname", why);
}

int nd_hostname_start(void) {
    int fd = open("/proc/sys/kernel/hostname", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        nd_say("hostname: /proc/sys/kernel/hostname: %s", strerror(errno));
        return -1;
    }
    host_file = (nd_file){ fd, host_ready };
    if (read_name(last, sizeof last) != 0) last[0] = '\0';
    return nd_watch(&host_file, 1);
}
