/*
 * no_systemd_sockets.c: the two libsystemd functions libdbus-1.a needs, for notifyutil's front
 * door, which carries libdbus inside (the Makefile links it so: loading libdbus-1.so loads
 * libsystemd and its six libraries, which is most of dbus-send's own start-up; BENCHMARKS.md,
 * "cli"). libdbus calls them only to take the listening sockets systemd passed to a bus *server*
 * (a `systemd:` address); a client never does. Here they say "no sockets were passed", so a server
 * made in this process would fail with libdbus's own "no sockets" error, never misbehave.
 * Not compiled by SwiftPM (Package.swift excludes this directory): its notifyutil links libdbus shared.
 */
int sd_listen_fds(int unset_environment);
int sd_is_socket(int fd, int family, int type, int listening);

int sd_listen_fds(int unset_environment) {
    (void)unset_environment;
    return 0;
}

int sd_is_socket(int fd, int family, int type, int listening) {
    (void)fd;
    (void)family;
    (void)type;
    (void)listening;
    return 0;
}
