/*
 * broker_controller: runs dbus-broker without systemd, for the dbus-broker test lane.
 *
 * dbus-broker is only the bus: a controller (normally dbus-broker-launch, which needs systemd and
 * journald) hands it the listening socket and the policy over a private D-Bus connection. This is
 * such a controller. It listens on PATH, starts `dbus-broker --controller FD` on one end of a
 * socketpair, calls org.bus1.DBus.Broker.AddListener with the socket and a policy that allows
 * every connection, name, send and receive (what our test buses' dbus-daemon configurations
 * allow), prints "unix:path=PATH" once the broker listens (the readiness handshake the tests use
 * for dbus-daemon's --print-address), and serves until SIGTERM, when it stops the broker.
 *
 *   cc broker_controller.c $(pkg-config --cflags --libs libsystemd) -o broker_controller
 *   broker_controller /tmp/x/bus
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

static pid_t broker_pid = -1;
static volatile sig_atomic_t stopping;

static void on_signal(int sig) { (void)sig; stopping = 1; }

static int die(const char *what, int r) {
    fprintf(stderr, "broker_controller: %s: %s\n", what, strerror(r < 0 ? -r : r));
    if (broker_pid > 0) kill(broker_pid, SIGTERM);
    return 1;
}

/* One policy batch (dbus-broker 33's format): allow connecting (bt: verdict, priority), owning any
 * name (a(btbs): verdict, priority, as a prefix, name ""), and sending and receiving anything
 * (a(btssssuutt) each: verdict, priority, name, path, interface, member, type, broadcast,
 * fewest and most fds). */
static int append_batch(sd_bus_message *m) {
    return sd_bus_message_append(m, "bt" "a(btbs)" "a(btssssuutt)" "a(btssssuutt)",
                                 true, UINT64_C(1),
                                 1, true, UINT64_C(1), true, "",
                                 1, true, UINT64_C(1), "", "", "", "", 0, 0, UINT64_C(0), UINT64_MAX,
                                 1, true, UINT64_C(1), "", "", "", "", 0, 0, UINT64_C(0), UINT64_MAX);
}

#define BATCH "bta(btbs)a(btssssuutt)a(btssssuutt)"
#define POLICY "a(u(" BATCH "))a(buu(" BATCH "))a(ss)bs"

/* The policy variant: one batch for every uid ((uint32_t)-1, the fall-back), no per-group or
 * uid-range batches, no SELinux names. */
static int append_policy(sd_bus_message *m) {
    int r;
    if ((r = sd_bus_message_open_container(m, 'v', "(" POLICY ")")) < 0) return r;
    if ((r = sd_bus_message_open_container(m, 'r', POLICY)) < 0) return r;
    if ((r = sd_bus_message_open_container(m, 'a', "(u(" BATCH "))")) < 0) return r;
    if ((r = sd_bus_message_open_container(m, 'r', "u(" BATCH ")")) < 0) return r;
    if ((r = sd_bus_message_append(m, "u", (uint32_t)-1)) < 0) return r;
    if ((r = sd_bus_message_open_container(m, 'r', BATCH)) < 0) return r;
    if ((r = append_batch(m)) < 0) return r;
    for (int i = 0; i < 3; i++) if ((r = sd_bus_message_close_container(m)) < 0) return r;
    if ((r = sd_bus_message_open_container(m, 'a', "(buu(" BATCH "))")) < 0) return r;
    if ((r = sd_bus_message_close_container(m)) < 0) return r;
    if ((r = sd_bus_message_open_container(m, 'a', "(ss)")) < 0) return r;
    if ((r = sd_bus_message_close_container(m)) < 0) return r;
    if ((r = sd_bus_message_append(m, "bs", false, "session")) < 0) return r; /* no AppArmor; a session bus */
    if ((r = sd_bus_message_close_container(m)) < 0) return r;
    return sd_bus_message_close_container(m);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: broker_controller SOCKET-PATH\n"); return 64; }
    const char *path = argv[1];
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sa.sun_path) { fprintf(stderr, "broker_controller: path too long\n"); return 64; }
    strcpy(sa.sun_path, path);
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    unlink(path);
    if (listener < 0 || bind(listener, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(listener, 256) != 0)
        return die("listen", errno);
    chmod(path, 0777); /* as dbus-daemon makes its socket: reachable by every uid of a shared test bus */
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0) return die("socketpair", errno);
    broker_pid = fork();
    if (broker_pid < 0) return die("fork", errno);
    if (broker_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* the broker never outlives its controller */
        int flags = fcntl(pair[1], F_GETFD);
        fcntl(pair[1], F_SETFD, flags & ~FD_CLOEXEC);
        char fd[16];
        snprintf(fd, sizeof fd, "%d", pair[1]);
        execlp("dbus-broker", "dbus-broker", "--controller", fd, "--machine-id", "0123456789abcdef0123456789abcdef",
               "--max-matches", "100000", "--max-objects", "100000", (char *)NULL);
        fprintf(stderr, "broker_controller: cannot run dbus-broker: %s\n", strerror(errno));
        _exit(127);
    }
    close(pair[1]);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    sd_bus *bus = NULL;
    sd_bus_message *call = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    int r;
    if ((r = sd_bus_new(&bus)) < 0) return die("sd_bus_new", r);
    if ((r = sd_bus_set_fd(bus, pair[0], pair[0])) < 0) return die("sd_bus_set_fd", r);
    if ((r = sd_bus_start(bus)) < 0) return die("sd_bus_start", r);
    if ((r = sd_bus_message_new_method_call(bus, &call, NULL, "/org/bus1/DBus/Broker", "org.bus1.DBus.Broker", "AddListener")) < 0)
        return die("new AddListener", r);
    if ((r = sd_bus_message_append(call, "oh", "/org/bus1/DBus/Listener/0", listener)) < 0) return die("append", r);
    if ((r = append_policy(call)) < 0) return die("policy", r);
    if ((r = sd_bus_call(bus, call, 10 * 1000 * 1000, &error, NULL)) < 0) {
        fprintf(stderr, "broker_controller: AddListener: %s\n", error.message ? error.message : strerror(-r));
        kill(broker_pid, SIGTERM);
        return 1;
    }
    sd_bus_message_unref(call);
    close(listener); /* the broker has its own copy */
    printf("unix:path=%s\n", path);
    fflush(stdout);
    /* Serve the broker's calls (none are expected) until told to stop or the broker dies. */
    while (!stopping) {
        int status;
        if (waitpid(broker_pid, &status, WNOHANG) == broker_pid) {
            fprintf(stderr, "broker_controller: dbus-broker exited (status %d)\n", status);
            return 1;
        }
        r = sd_bus_process(bus, NULL);
        if (r < 0) break;
        if (r == 0) sd_bus_wait(bus, 200 * 1000);
    }
    kill(broker_pid, SIGTERM);
    waitpid(broker_pid, NULL, 0);
    sd_bus_flush_close_unref(bus);
    unlink(path);
    return 0;
}
