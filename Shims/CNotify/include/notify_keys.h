/*
 * notify_keys.h: the names of the notifications Apple's system services post with notify_post(),
 * as Apple's <notify_keys.h> spells them, so that code written for Apple platforms that includes
 * it and observes them compiles unchanged (DarwinNotify).
 *
 * On Linux, darwin-notifyd(8) posts those it can observe from the kernel, as root on the system
 * bus, where the shipped notify.conf(5) reserves `com.apple.system.` for root: a post of one of them
 * by anyone else is dropped by every receiver. Each name says below what posts it on Linux, or
 * that nothing does (an observer of such a name waits for a post that only another program, or
 * `notifyutil -p NAME` as root, makes). With no darwin-notifyd running, nothing posts any of them.
 */
#ifndef DARWIN_NOTIFY_NOTIFY_KEYS_H
#define DARWIN_NOTIFY_NOTIFY_KEYS_H

/* Directory Service: cached directory data should be invalidated. Nothing posts them on Linux
 * (nscd and sssd have no notification of their own to relay). */
#define kNotifyDSCacheInvalidation "com.apple.system.DirectoryService.InvalidateCache"
#define kNotifyDSCacheInvalidationGroup "com.apple.system.DirectoryService.InvalidateCache.group"
#define kNotifyDSCacheInvalidationHost "com.apple.system.DirectoryService.InvalidateCache.host"
#define kNotifyDSCacheInvalidationService "com.apple.system.DirectoryService.InvalidateCache.service"
#define kNotifyDSCacheInvalidationUser "com.apple.system.DirectoryService.InvalidateCache.user"

/* File systems. darwin-notifyd posts a mount, an unmount and a mount's update (a remount) when
 * its mount namespace's table changes (/proc/self/mountinfo polls), and low disk space when a
 * writable file system's free space falls under a threshold (statvfs, once a minute):
 * .system for the root file system, .user for any other, each with the plain name too. */
#define kNotifyVFSMount "com.apple.system.kernel.mount"
#define kNotifyVFSUnmount "com.apple.system.kernel.unmount"
#define kNotifyVFSUpdate "com.apple.system.kernel.mountupdate"
#define kNotifyVFSLowDiskSpace "com.apple.system.lowdiskspace"
#define kNotifyVFSLowDiskSpaceRootFS "com.apple.system.lowdiskspace.system"
#define kNotifyVFSLowDiskSpaceOtherFS "com.apple.system.lowdiskspace.user"

/* System configuration. darwin-notifyd posts the host name when the kernel's changes
 * (sethostname: hostnamectl, hostname(1)) or systemd-hostnamed's static or pretty name does, and
 * the network configuration when a link, an address
 * or a route changes (rtnetlink; a burst of changes is posted once). */
#define kNotifySCHostNameChange "com.apple.system.hostname"
#define kNotifySCNetworkChange "com.apple.system.config.network_change"

/* The system log's database has new messages (ASL). Nothing posts it on Linux (the journal has
 * its own readers' wake-up: sd_journal_get_fd). */
#define kNotifyASLDBUpdate "com.apple.system.logger.message"

/* The system's time zone changed. darwin-notifyd posts it for the shipped notify.conf's
 * `monitor com.apple.system.timezone /etc/localtime`, as notifyd does: when the link is replaced
 * (timedatectl set-timezone) or the file changes; and when systemd-timedated says its Timezone
 * changed. */
#define kNotifyTimeZoneChange "com.apple.system.timezone"

/* A process set the system clock. darwin-notifyd posts it when CLOCK_REALTIME is set
 * discontinuously (settimeofday, clock_settime, an NTP step: timerfd's TFD_TIMER_CANCEL_ON_SET). */
#define kNotifyClockSet "com.apple.system.clock_set"

#endif
