/*
 * notify_keys.h: the names of the notifications Apple's system services post with notify_post(),
 * as Apple's <notify_keys.h> spells them, so that code written for Apple platforms that includes
 * it and observes them compiles unchanged (DarwinNotify).
 *
 * The names alone: which service posts which name, and when, is that service's. On Linux, in this
 * release, no service of DarwinNotify posts any of them yet (the notifyd of a later release is to
 * post those it can observe on Linux: the time zone, the clock, the host name, the network,
 * mounts). Until then an observer of one waits for a post that only another program, or
 * `notifyutil -p NAME`, makes. Observing and posting them works as for any other name.
 */
#ifndef DARWIN_NOTIFY_NOTIFY_KEYS_H
#define DARWIN_NOTIFY_NOTIFY_KEYS_H

/* Directory Service: cached directory data should be invalidated. Not posted on Linux. */
#define kNotifyDSCacheInvalidation "com.apple.system.DirectoryService.InvalidateCache"
#define kNotifyDSCacheInvalidationGroup "com.apple.system.DirectoryService.InvalidateCache.group"
#define kNotifyDSCacheInvalidationHost "com.apple.system.DirectoryService.InvalidateCache.host"
#define kNotifyDSCacheInvalidationService "com.apple.system.DirectoryService.InvalidateCache.service"
#define kNotifyDSCacheInvalidationUser "com.apple.system.DirectoryService.InvalidateCache.user"

/* File systems: a mount, an unmount, a mount's update, low disk space. Not posted on Linux yet. */
#define kNotifyVFSMount "com.apple.system.kernel.mount"
#define kNotifyVFSUnmount "com.apple.system.kernel.unmount"
#define kNotifyVFSUpdate "com.apple.system.kernel.mountupdate"
#define kNotifyVFSLowDiskSpace "com.apple.system.lowdiskspace"
#define kNotifyVFSLowDiskSpaceRootFS "com.apple.system.lowdiskspace.system"
#define kNotifyVFSLowDiskSpaceOtherFS "com.apple.system.lowdiskspace.user"

/* System configuration: the host name, the network configuration. Not posted on Linux yet. */
#define kNotifySCHostNameChange "com.apple.system.hostname"
#define kNotifySCNetworkChange "com.apple.system.config.network_change"

/* The system log's database has new messages (ASL). Not posted on Linux. */
#define kNotifyASLDBUpdate "com.apple.system.logger.message"

/* The system's time zone changed. Not posted on Linux yet. */
#define kNotifyTimeZoneChange "com.apple.system.timezone"

/* A process set the system clock (settimeofday). Not posted on Linux yet. */
#define kNotifyClockSet "com.apple.system.clock_set"

#endif
