/*
 * reload_daemon: a daemon that reloads its configuration whenever anyone posts
 * "com.example.reload" (notify_post from C, `notifyutil -p com.example.reload` from a shell).
 * Written as for macOS: only <notify.h>, and a file-descriptor registration in its poll loop.
 * Build it with the README's plain cc line (Examples/README.md), then:
 *     ./reload_daemon /etc/example.conf [RELOADS]     (exits after RELOADS reloads, if given)
 */
#include <arpa/inet.h>
#include <notify.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void load(const char *path) {
    char buf[4096] = {0};
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = '\0';
    if (f) printf("config: %s\n", buf);
    else printf("config: cannot read %s\n", path);
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: reload_daemon CONFIG [RELOADS]\n"); return 64; }
    long reloads = argc > 2 ? atol(argv[2]) : -1;
    int fd = -1, token = NOTIFY_TOKEN_INVALID;
    uint32_t status = notify_register_file_descriptor("com.example.reload", &fd, 0, &token);
    if (status != NOTIFY_STATUS_OK) { fprintf(stderr, "reload_daemon: register: %u\n", status); return 1; }
    load(argv[1]);
    printf("ready\n");
    fflush(stdout);
    while (reloads != 0) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, -1) < 0) continue;
        int posted;
        if (read(fd, &posted, sizeof posted) != sizeof posted || (int)ntohl((uint32_t)posted) != token) continue;
        load(argv[1]);
        if (reloads > 0) reloads--;
    }
    notify_cancel(token);
    return 0;
}
