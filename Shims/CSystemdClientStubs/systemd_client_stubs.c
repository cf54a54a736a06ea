/*
 * Why this shim exists: notifyutil is linked statically (Package.swift), and libdbus-1.a refers to
 * two libsystemd functions that only its server side uses, to take over sockets systemd opened
 * for a bus daemon (dbus-daemon's socket activation). Debian ships no libsystemd.a, and a client
 * never listens, so these answer "systemd passed no sockets", which is what libsystemd itself says
 * to a process systemd did not start.
 *
 * Hidden: in a static link they satisfy libdbus-1.a; in a dynamic one (the test bundle links
 * notifyutil's code too) they are not exported, so they never shadow the real libsystemd.
 */
#define CSTUB_HIDDEN __attribute__((visibility("hidden")))

CSTUB_HIDDEN int sd_listen_fds(int unset_environment) {
    (void)unset_environment;
    return 0; /* no sockets passed */
}

CSTUB_HIDDEN int sd_is_socket(int fd, int family, int type, int listening) {
    (void)fd; (void)family; (void)type; (void)listening;
    return 0; /* not one of ours: never reached, as sd_listen_fds passes none */
}
