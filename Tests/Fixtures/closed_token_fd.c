/* A program that closes the descriptor notify_register_file_descriptor gave it (instead of
 * notify_cancel), then has its name posted, must live on, as on a shell's default SIGPIPE: the
 * library's write to the descriptor's pipe must not kill it. Prints "alive" and exits 0. */
#include <notify.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
    /* As started from a shell: nothing blocked, SIGPIPE's default action (terminate). */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    int fd = -1, token, done;
    if (notify_register_file_descriptor("com.example.closed", &fd, 0, &token) != NOTIFY_STATUS_OK) return 2;
    if (notify_register_check("com.example.closed.done", &done) != NOTIFY_STATUS_OK) return 2;
    int changed = 0;
    notify_check(done, &changed); /* the first call says 1 (Apple's): taken before posting */
    close(fd);
    if (notify_post("com.example.closed") != NOTIFY_STATUS_OK) return 2;
    /* One poster's posts arrive in order: once the second is seen, the first was delivered. */
    if (notify_post("com.example.closed.done") != NOTIFY_STATUS_OK) return 2;
    changed = 0;
    for (int i = 0; i < 5000 && !changed; i++) {
        notify_check(done, &changed);
        usleep(1000);
    }
    if (!changed) return 3;
    printf("alive\n");
    return 0;
}
