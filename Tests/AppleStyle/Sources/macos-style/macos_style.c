/* A program as written for macOS: only <notify.h> and <notify_keys.h>, Apple's names and status
 * codes, and a Mach-port path with a descriptor path where there are no Mach ports. */
#include <notify.h>
#include <notify_keys.h>
#include <stdio.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/select.h>

int main(void) {
    int token = NOTIFY_TOKEN_INVALID, check = 0, fd = -1, fd_token;
    uint32_t status = notify_register_check("com.example.macos", &token);
    if (status != NOTIFY_STATUS_OK) { fprintf(stderr, "register: %u\n", status); return 1; }
    if (notify_register_file_descriptor("com.example.macos", &fd, 0, &fd_token) != NOTIFY_STATUS_OK) return 2;
    /* The clock: by Mach message where there are Mach ports, else by a descriptor. */
    mach_port_t port = MACH_PORT_NULL;
    int clock_token, clock_fd = -1;
    if (notify_register_mach_port(kNotifyClockSet, &port, 0, &clock_token) == NOTIFY_STATUS_OK)
        printf("clock: mach port\n");
    else if (notify_register_file_descriptor(kNotifyClockSet, &clock_fd, 0, &clock_token) == NOTIFY_STATUS_OK)
        printf("clock: descriptor\n");
    else
        return 10;
    notify_cancel(clock_token);
    notify_check(token, &check);                      /* true on the first call */
    if (notify_post("com.example.macos") != NOTIFY_STATUS_OK) return 3;
    fd_set set;
    FD_ZERO(&set);
    FD_SET(fd, &set);
    struct timeval tv = { 20, 0 };
    if (select(fd + 1, &set, NULL, NULL, &tv) != 1) return 4;
    int got;
    if (read(fd, &got, sizeof got) != sizeof got || (int)ntohl(got) != fd_token) return 5;
    notify_check(token, &check);
    if (!check) return 6;                             /* the post happened since the last check */
    if (!notify_is_valid_token(token) || notify_cancel(token) != NOTIFY_STATUS_OK) return 7;
    if (notify_cancel(token) != NOTIFY_STATUS_INVALID_TOKEN) return 8;
    printf("ok\n");
    return notify_cancel(fd_token) == NOTIFY_STATUS_OK ? 0 : 9;
}
