/*
 * network.c: com.apple.system.config.network_change (kNotifySCNetworkChange), when the kernel's
 * network configuration changes: a link appears, goes or changes state, an address is added or
 * removed, a route changes. By rtnetlink (RTMGRP_LINK, IPv4 and IPv6 addresses and routes). A
 * burst (an interface coming up brings a link, addresses and routes) is posted once: the first
 * message arms a timer, and the post comes when it fires, covering everything until then.
 */
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include "notifyd.h"

static nd_file netlink_file, settle_file;
static int settle_ms, pending;
static unsigned changes;

static void settle_ready(nd_file *f, uint32_t events) {
    (void)events;
    uint64_t expirations;
    if (read(f->fd, &expirations, sizeof expirations) != sizeof expirations || !pending) return;
    char why[64];
    snprintf(why, sizeof why, "%u rtnetlink change%s", changes, changes == 1 ? "" : "s");
    pending = 0;
    changes = 0;
    nd_post("com.apple.system.config.network_change", why);
}

static void netlink_ready(nd_file *f, uint32_t events) {
    (void)events;
    char buf[16384] __attribute__((aligned(__alignof__(struct nlmsghdr))));
    unsigned seen = 0;
    for (;;) {
        ssize_t n = recv(f->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && errno == ENOBUFS) { seen++; continue; } /* the kernel dropped some: a change still */
        if (n <= 0) break;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (unsigned)n); h = NLMSG_NEXT(h, n))
            if (h->nlmsg_type >= RTM_NEWLINK && h->nlmsg_type <= RTM_DELROUTE) seen++;
    }
    if (!seen) return;
    changes += seen;
    if (pending) return;
    pending = 1;
    struct itimerspec once = { .it_value = { .tv_sec = settle_ms / 1000, .tv_nsec = (long)(settle_ms % 1000) * 1000000 } };
    if (once.it_value.tv_sec == 0 && once.it_value.tv_nsec == 0) once.it_value.tv_nsec = 1;
    timerfd_settime(settle_file.fd, 0, &once, NULL);
}

int nd_network_start(int settle) {
    settle_ms = settle;
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
    struct sockaddr_nl sa = { .nl_family = AF_NETLINK,
                              .nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE |
                                           RTMGRP_IPV6_ROUTE };
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        nd_say("network: rtnetlink: %s", strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (tfd < 0) {
        nd_say("network: timerfd: %s", strerror(errno));
        close(fd);
        return -1;
    }
    netlink_file = (nd_file){ fd, netlink_ready };
    settle_file = (nd_file){ tfd, settle_ready };
    return nd_watch(&netlink_file, 0) || nd_watch(&settle_file, 0);
}
