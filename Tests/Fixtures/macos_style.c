/* A program as written for macOS: only <notify.h>, Apple's names and status codes. */
#include <notify.h>
#include <stdio.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/select.h>

int main(void) {
    int token = NOTIFY_TOKEN_INVALID, check = 0, fd = -1, fd_token;
    uint32_t status = notify_register_check("com.example.macos", &token);
    if (status != NOTIFY_STATUS_OK) { fprintf(stderr, "register: %u\n", status); return 1; }
    if (notify_register_file_descriptor("com.example.macos", &fd, 0, &fd_token) != NOTIFY_STATUS_OK) return 2;
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
