/* Bad input to every notify(3) call, with what Libnotify answers (notify_client.c of
 * Libnotify-327.0.5, read call by call: each call checks its arguments in the order below). Run by
 * CProgramTests; prints "same (0 differences)" or a DIFF line per difference. */
#include <notify.h>
#include <stdio.h>
#include <signal.h>
#include <stdbool.h>
static int fails;
#define EXPECT(expr, want) do { long got = (long)(expr); if (got != (long)(want)) { printf("DIFF %s: got %ld, Libnotify %ld\n", #expr, got, (long)(want)); fails++; } } while (0)
int main(void) {
    int t = 0, fd = -1, c = 0, valid;
    uint64_t s = 0;
    mach_port_t p = MACH_PORT_NULL;
    EXPECT(notify_post(NULL), NOTIFY_STATUS_INVALID_NAME);
    EXPECT(notify_register_check(NULL, &t), NOTIFY_STATUS_INVALID_NAME);
    EXPECT(notify_register_check("com.example.edge", NULL), NOTIFY_STATUS_NULL_INPUT);
    EXPECT(notify_register_check(NULL, NULL), NOTIFY_STATUS_INVALID_NAME);
    EXPECT(notify_register_file_descriptor(NULL, &fd, 0, &t), NOTIFY_STATUS_INVALID_NAME);
    EXPECT(notify_register_file_descriptor("com.example.edge", NULL, 0, &t), NOTIFY_STATUS_INVALID_FILE);
    fd = 12345;
    EXPECT(notify_register_file_descriptor("com.example.edge", &fd, NOTIFY_REUSE, &t), NOTIFY_STATUS_INVALID_FILE);
    EXPECT(notify_register_signal(NULL, SIGUSR1, &t), NOTIFY_STATUS_INVALID_NAME);
    EXPECT(notify_register_signal(NULL, 0, &t), NOTIFY_STATUS_INVALID_NAME); /* the name before the signal */
    EXPECT(notify_register_mach_port(NULL, &p, 0, &t), NOTIFY_STATUS_INVALID_NAME);
    EXPECT(notify_register_mach_port("com.example.edge", NULL, 0, &t), NOTIFY_STATUS_INVALID_PORT);
    EXPECT(notify_register_mach_port("com.example.edge", &p, 0, &t), NOTIFY_STATUS_INVALID_PORT); /* no Mach ports */
    EXPECT(notify_check(987654, &c), NOTIFY_STATUS_INVALID_TOKEN);
    EXPECT(notify_check(987654, NULL), NOTIFY_STATUS_NULL_INPUT);
    EXPECT(notify_cancel(987654), NOTIFY_STATUS_INVALID_TOKEN);
    EXPECT(notify_suspend(987654), NOTIFY_STATUS_INVALID_TOKEN);
    EXPECT(notify_resume(987654), NOTIFY_STATUS_INVALID_TOKEN);
    EXPECT(notify_get_state(987654, &s), NOTIFY_STATUS_INVALID_TOKEN);
    EXPECT(notify_set_state(987654, 1), NOTIFY_STATUS_INVALID_TOKEN);
    EXPECT(notify_is_valid_token(987654), false);
    EXPECT(notify_register_check("com.example.edge", &t), NOTIFY_STATUS_OK);
    EXPECT(notify_is_valid_token(t), true);
    EXPECT(notify_check(t, NULL), NOTIFY_STATUS_NULL_INPUT);
    EXPECT(notify_resume(t), NOTIFY_STATUS_OK);
    EXPECT(notify_cancel(t), NOTIFY_STATUS_OK);
    EXPECT(notify_is_valid_token(t), false);
    EXPECT(notify_cancel(t), NOTIFY_STATUS_INVALID_TOKEN);
    valid = fails == 0;
    printf("%s (%d differences)\n", valid ? "same" : "differs", fails);
    return !valid;
}
