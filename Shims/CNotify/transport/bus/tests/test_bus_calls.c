/*
 * test_bus_calls.c: calls to the bus and their replies (bus_calls.c), on a real dbus-daemon this
 * test starts (its child, killed with it).
 *  1. The list: a reply is handed to its call once, and only when the bus sent it; a dropped
 *     connection and a passed deadline answer with none.
 *  2. A sender the bus is asked about (a guarded name posted with no credential, as dbus-send
 *     does): the loop does not wait for the answer, and the sender's later signals wait behind
 *     that post, so its posts arrive in the order it sent them.
 *  3. The crash it exists for: posts and registrations from eight threads while the bus is killed
 *     and started again, 100 times. With libdbus's pending calls on the shared connection this
 *     crashed in _dbus_list_prepend_link (2 runs in 3); then a post after the restarts arrives.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../bus.h"
#include "../../../include/darwin_notify.h"
#include "../../../base/tests/check.h"

static char dir[128], conf[192], address[256];

/* Starts dbus-daemon in the foreground as our child (dying with us), and waits for its address. */
static pid_t start_bus(void) {
    int p[2];
    if (pipe(p) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(p[0]);
        char fd[32], cf[220];
        snprintf(fd, sizeof fd, "--print-address=%d", p[1]);
        snprintf(cf, sizeof cf, "--config-file=%s", conf);
        execlp("dbus-daemon", "dbus-daemon", cf, "--nofork", "--nosyslog", fd, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char line[256] = { 0 };
    ssize_t n = 0, got;
    while (n < (ssize_t)sizeof line - 1 && (got = read(p[0], line + n, sizeof line - 1 - (size_t)n)) > 0) {
        n += got;
        if (memchr(line, '\n', (size_t)n)) break;
    }
    close(p[0]);
    if (n <= 0) return -1;
    return pid;
}

static void stop_bus(pid_t pid, int sig) {
    kill(pid, sig);
    waitpid(pid, NULL, 0);
}

/* ---- 1. the list ---- */

typedef struct { int calls; int with_reply; } answers;
static void note(cn_bus *b, void *ctx, DBusMessage *reply) {
    (void)b;
    answers *a = ctx;
    a->calls++;
    a->with_reply += reply != NULL;
}

static DBusMessage *reply_from(const char *sender, dbus_uint32_t serial) {
    DBusMessage *m = dbus_message_new(DBUS_MESSAGE_TYPE_METHOD_RETURN);
    dbus_message_set_reply_serial(m, serial);
    dbus_message_set_sender(m, sender);
    return m;
}

static void test_list(void) {
    static cn_loop loop;
    CHECK(cn_loop_init(&loop, (cn_loop_owner){ 0 }) == 0, "loop");
    cn_bus *b = calloc(1, sizeof *b);
    b->loop = &loop;
    cn_gate_init(b);
    cn_calls_init(b);
    DBusConnection *conn = dbus_connection_open_private(address, NULL);
    CHECK(conn && dbus_bus_register(conn, NULL), "connected");
    DBusMessage *call = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS, DBUS_INTERFACE_DBUS, "GetId");
    answers a = { 0 }, late = { 0 };
    CHECK(cn_calls_send(b, conn, call, 30000, note, &a) == 1, "sent");
    dbus_uint32_t serial = dbus_message_get_serial(call);
    /* Anyone may send us a reply with that number: only the bus's is taken. */
    DBusMessage *forged = reply_from(":1.99", serial), *other = reply_from(DBUS_SERVICE_DBUS, serial + 1000);
    CHECK(cn_calls_receive(b, forged) == 0 && a.calls == 0, "a reply from another peer is not the call's");
    CHECK(cn_calls_receive(b, other) == 0 && a.calls == 0, "a reply to another serial is not the call's");
    DBusMessage *real = NULL;
    for (int i = 0; i < 500 && !real; i++) {
        dbus_connection_read_write(conn, 10);
        DBusMessage *m;
        while ((m = dbus_connection_pop_message(conn))) {
            if (!real && dbus_message_get_reply_serial(m) == serial) real = m;
            else dbus_message_unref(m);
        }
    }
    CHECK(real != NULL, "the bus answered GetId");
    if (real) {
        CHECK(cn_calls_receive(b, real) == 1 && a.calls == 1 && a.with_reply == 1, "the bus's reply is handed over");
        CHECK(cn_calls_receive(b, real) == 0 && a.calls == 1, "and once only");
        dbus_message_unref(real);
    }
    /* No reply: the deadline, then the connection's drop, answer with none, once each. */
    CHECK(cn_calls_send(b, conn, call, 0, note, &late) == 1, "sent again");
    CHECK(cn_calls_send(b, conn, call, 60000, note, &a) == 1, "and once more");
    int timeout = -1;
    cn_calls_expire(b, &timeout);
    CHECK(late.calls == 1 && late.with_reply == 0, "past its deadline: answered with none");
    CHECK(timeout > 50000 && timeout <= 60000, "the loop sleeps until the next deadline (%d ms)", timeout);
    cn_calls_drop_all(b);
    CHECK(a.calls == 2 && a.with_reply == 1, "the drop answers the rest with none");
    cn_calls_drop_all(b);
    CHECK(a.calls == 2 && late.calls == 1, "nothing is answered twice");
    /* More than one batch of the answering pass (64): 150 past their deadline among 300. */
    answers many_late = { 0 }, many = { 0 };
    int listed = 0;
    for (int i = 0; i < 300; i++) listed += cn_calls_send(b, conn, call, i % 2 ? 0 : 60000, note, i % 2 ? &many_late : &many);
    CHECK(listed == 300, "300 listed");
    timeout = -1;
    cn_calls_expire(b, &timeout);
    CHECK(many_late.calls == 150 && many.calls == 0, "the 150 past their deadline answered, the rest not (%d, %d)",
          many_late.calls, many.calls);
    CHECK(timeout > 50000 && timeout <= 60000, "then the loop sleeps until the next deadline (%d ms)", timeout);
    cn_calls_drop_all(b);
    CHECK(many.calls == 150 && many_late.calls == 150 && b->calls.n == 0, "the drop answers the other 150, once each (%d)",
          many.calls);
    dbus_message_unref(call);
    dbus_message_unref(forged);
    dbus_message_unref(other);
    dbus_connection_close(conn);
    dbus_connection_unref(conn);
    cn_calls_free(b);
    cn_gate_free(b);
    free(b);
    cn_loop_free(&loop);
}

/* ---- 2. a sender asked about ---- */

static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;
static char order[8][64];
static int norder;
static void record(void *context, const char *name) {
    (void)context;
    pthread_mutex_lock(&order_lock);
    if (norder < 8) snprintf(order[norder++], sizeof order[0], "%s", name);
    pthread_mutex_unlock(&order_lock);
}

static void test_asked(void) {
    uint32_t st = 0;
    CNotify_center *c = CNotify_center_create(address, &st);
    CHECK(c != NULL, "center (%u)", st);
    if (!c) return;
    const char *names[] = { "user.uid.0.asked", "asked.after", "user.uid.0.asked", "asked.last" };
    uint64_t id;
    for (int i = 0; i < 4; i++)
        if (i != 2) CHECK(CNotify_center_add_handler(c, names[i], record, NULL, NULL, &id) == NOTIFY_STATUS_OK, "observe %s", names[i]);
    /* A foreign poster: a plain connection, its posts carrying no credential. */
    DBusConnection *raw = dbus_connection_open_private(address, NULL);
    CHECK(raw && dbus_bus_register(raw, NULL), "foreign poster connected");
    for (int i = 0; raw && i < 4; i++) {
        DBusMessage *m = cn_wire_build(names[i], (uint64_t)i + 1, -1, 0, 1);
        CHECK(m && dbus_connection_send(raw, m, NULL), "sent %s", names[i]);
        if (m) dbus_message_unref(m);
    }
    if (raw) dbus_connection_flush(raw);
    for (int i = 0; i < 400; i++) {
        pthread_mutex_lock(&order_lock);
        int n = norder;
        pthread_mutex_unlock(&order_lock);
        if (n >= 4) break;
        usleep(10000);
    }
    pthread_mutex_lock(&order_lock);
    CHECK(norder == 4, "every post arrived (%d)", norder);
    for (int i = 0; i < norder && i < 4; i++)
        CHECK(strcmp(order[i], names[i]) == 0, "in the order sent: #%d is %s, not %s", i, order[i], names[i]);
    pthread_mutex_unlock(&order_lock);
    if (raw) {
        dbus_connection_close(raw);
        dbus_connection_unref(raw);
    }
    CNotify_center_destroy(c);
}

/* ---- 3. restarts under load ---- */

static CNotify_center *center;
static atomic_int stop, posts, registrations, arrived;
static void handler(void *context, const char *name) { (void)context; (void)name; atomic_fetch_add(&arrived, 1); }

static void *worker(void *arg) {
    long w = (long)arg;
    char name[64];
    for (int i = 0; !atomic_load(&stop); i++) {
        snprintf(name, sizeof name, "stress.%ld.%d", w / 2, i % 7);
        if (w % 2 == 0) {
            if (CNotify_center_post(center, name) == NOTIFY_STATUS_OK) atomic_fetch_add(&posts, 1);
        } else {
            uint64_t id;
            if (CNotify_center_add_handler(center, name, handler, NULL, NULL, &id) == NOTIFY_STATUS_OK) {
                atomic_fetch_add(&registrations, 1);
                CNotify_center_remove_handler(center, id);
            }
        }
    }
    return NULL;
}

static void test_restarts(pid_t *bus) {
    uint32_t st = 0;
    center = CNotify_center_create(address, &st);
    CHECK(center != NULL, "center (%u)", st);
    if (!center) return;
    pthread_t threads[8];
    for (long i = 0; i < 8; i++) pthread_create(&threads[i], NULL, worker, (void *)i);
    unsigned seed = 36;
    for (int round = 0; round < 100; round++) {
        /* Load, not synchronisation: the bus dies mid-flight, and stays away a while. */
        usleep(20000 + (unsigned)rand_r(&seed) % 60000);
        stop_bus(*bus, round % 2 ? SIGKILL : SIGTERM);
        usleep((unsigned)rand_r(&seed) % 20000);
        *bus = start_bus();
        CHECK(*bus > 0, "bus restarted (round %d)", round);
        if (*bus <= 0) break;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 8; i++) pthread_join(threads[i], NULL);
    CHECK(atomic_load(&posts) > 0 && atomic_load(&registrations) > 0, "work was done (%d posts, %d registrations)",
          atomic_load(&posts), atomic_load(&registrations));
    /* And the center still works end to end. */
    uint64_t id = 0;
    atomic_store(&arrived, 0);
    for (int i = 0; i < 400 && CNotify_center_add_handler(center, "stress.after", handler, NULL, NULL, &id) != NOTIFY_STATUS_OK; i++)
        usleep(25000);
    for (int i = 0; i < 400 && atomic_load(&arrived) == 0; i++) {
        CNotify_center_post(center, "stress.after");
        usleep(25000);
    }
    CHECK(atomic_load(&arrived) > 0, "a post after the restarts arrived");
    CNotify_center_destroy(center);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/cnotify-test-calls-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    snprintf(conf, sizeof conf, "%s/bus.conf", dir);
    snprintf(address, sizeof address, "unix:path=%s/bus", dir);
    FILE *f = fopen(conf, "w");
    fprintf(f, "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\" "
               "\"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n<busconfig><type>session</type>"
               "<listen>unix:path=%s/bus</listen><auth>EXTERNAL</auth><policy context=\"default\">"
               "<allow send_destination=\"*\" eavesdrop=\"true\"/><allow eavesdrop=\"true\"/><allow own=\"*\"/></policy></busconfig>\n", dir);
    fclose(f);
    pid_t bus = start_bus();
    CHECK(bus > 0, "dbus-daemon started");
    if (bus > 0) {
        test_list();
        test_asked();
        test_restarts(&bus);
        if (bus > 0) stop_bus(bus, SIGTERM);
    }
    char path[256];
    snprintf(path, sizeof path, "%s/bus", dir);
    unlink(path);
    unlink(conf);
    rmdir(dir);
    return check_result("test_bus_calls");
}
