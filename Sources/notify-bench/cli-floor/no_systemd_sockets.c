/*
 * no_systemd_sockets.c: linking libdbus-1.a needs libsystemd's sd_listen_fds and sd_is_socket,
 * which only a bus *server* started by systemd socket activation calls. A client never does; these
 * say "no sockets were passed", so the floors need not load libsystemd and its six libraries.
 */
int sd_listen_fds(int unset_environment) { (void)unset_environment; return 0; }
int sd_is_socket(int fd, int family, int type, int listening) { (void)fd; (void)family; (void)type; (void)listening; return 0; }
