/* sockets.c: whether a process listens on a unix socket path: a connect and a close, no traffic. */
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "base.h"

int cn_socket_answers(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sa.sun_path) { close(fd); return 0; } /* no socket has so long a path */
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}
