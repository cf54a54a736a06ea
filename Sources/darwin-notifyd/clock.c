/*
 * clock.c: com.apple.system.clock_set (kNotifyClockSet), when the realtime clock is set. A timerfd
 * armed far in the future with TFD_TIMER_CANCEL_ON_SET is cancelled by the kernel whenever
 * CLOCK_REALTIME is set discontinuously (settimeofday, clock_settime, NTP's step): its read fails
 * with ECANCELED, and it is armed again.
 */
#include <errno.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include "notifyd.h"

static nd_file clock_file;

static int arm(int fd) {
    struct itimerspec far = { .it_value = { .tv_sec = (time_t)1 << 40 } }; /* absolute: never reached */
    return timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &far, NULL);
}

static void clock_ready(nd_file *f, uint32_t events) {
    (void)events;
    uint64_t expirations;
    ssize_t r = read(f->fd, &expirations, sizeof expirations);
    if (r < 0 && errno == ECANCELED) nd_post("com.apple.system.clock_set", "the realtime clock was set");
    if (arm(f->fd) != 0) nd_say("cannot arm the clock timer again: %s", strerror(errno));
}

int nd_clock_start(void) {
    int fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0 || arm(fd) != 0) {
        nd_say("clock: timerfd: %s", strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    clock_file = (nd_file){ fd, clock_ready };
    return nd_watch(&clock_file, 0);
}
