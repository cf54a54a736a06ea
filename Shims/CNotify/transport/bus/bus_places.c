/*
 * bus_places.c: where things of a bus are: its address as a user asks for it (CNotify_bus_address,
 * CNotify_default_bus) and its state directory (docs/PROTOCOL.md "State files").
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "bus.h"

static void copy_out(char *out, size_t len, const char *s) {
    if (out && len) snprintf(out, len, "%s", s);
}

uint32_t CNotify_default_bus(char *out_scope, size_t scope_len, char *out_address, size_t address_len) {
    cn_clear_error();
    const char *env = getenv("DARWIN_NOTIFY_BUS");
    cn_bus_kind kind;
    char *address = NULL;
    uint32_t st = cn_resolve_bus(NULL, &kind, &address); /* decides system or embedded, once */
    if (st != NOTIFY_STATUS_OK) return st;
    copy_out(out_scope, scope_len, env && env[0] ? "DARWIN_NOTIFY_BUS" : kind == CN_BUS_EMBEDDED ? "embedded" : "system");
    if (kind == CN_BUS_EMBEDDED) {
        char dir[PATH_MAX], sock[PATH_MAX + 8];
        if ((st = cn_embedded_paths(dir, sizeof dir, sock, sizeof sock, 0)) != NOTIFY_STATUS_OK) return st;
        char addr[PATH_MAX + 32];
        snprintf(addr, sizeof addr, "unix:path=%s", sock);
        copy_out(out_address, address_len, addr);
    } else {
        copy_out(out_address, address_len, address);
    }
    free(address);
    return NOTIFY_STATUS_OK;
}

uint32_t CNotify_bus_address(const char *bus, char *out, size_t len) {
    cn_clear_error();
    if (!out || !len) { cn_set_error("output buffer is NULL"); return NOTIFY_STATUS_NULL_INPUT; }
    cn_bus_kind kind;
    char *address = NULL;
    uint32_t st = cn_resolve_bus(bus, &kind, &address);
    if (st == NOTIFY_STATUS_OK && kind == CN_BUS_EMBEDDED) st = cn_embedded_ensure(&address);
    if (st == NOTIFY_STATUS_OK) copy_out(out, len, address);
    free(address);
    return st;
}


/* Where the state directory of bus `spec` is (docs/PROTOCOL.md, "State files"): DARWIN_NOTIFY_STATE_DIR;
 * the embedded bus's runtime directory; /run/darwin-notify/state (installed with the policy) or a
 * sticky /tmp directory for the system bus; a sticky /tmp directory named after any other address.
 * *place says who may have made it: we (private), the installation, or anyone (predictable). */
uint32_t cn_bus_state_dir(const char *spec, char *out, size_t len, cn_state_place *place) {
    const char *env = getenv("DARWIN_NOTIFY_STATE_DIR");
    if (env && env[0] == '/') {
        snprintf(out, len, "%s", env);
        *place = CN_STATE_PRIVATE;
        return NOTIFY_STATUS_OK;
    }
    cn_bus_kind kind;
    char *address = NULL;
    uint32_t rc = cn_resolve_bus(spec, &kind, &address);
    if (rc != NOTIFY_STATUS_OK) return rc;
    if (kind == CN_BUS_EMBEDDED) {
        char runtime[PATH_MAX];
        if ((rc = cn_embedded_runtime_dir(runtime, sizeof runtime, 1)) != NOTIFY_STATUS_OK) return rc;
        snprintf(out, len, "%s/state", runtime);
        *place = CN_STATE_PRIVATE;
        return NOTIFY_STATUS_OK;
    }
    int is_system = strcmp(address, cn_system_bus_address()) == 0;
    *place = CN_STATE_PREDICTABLE;
    if (is_system && access(cn_system_state_dir(), F_OK) == 0) {
        snprintf(out, len, "%s", cn_system_state_dir());
        *place = CN_STATE_INSTALLED;
    } else if (is_system) {
        snprintf(out, len, "/tmp/darwin-notify-state-system");
    } else { /* the address without guid= (cn_resolve_bus): every form of it finds the same one */
        snprintf(out, len, "/tmp/darwin-notify-state-%016llx", (unsigned long long)cn_fnv1a64(address, CN_FNV64_OFFSET_BASIS));
    }
    free(address);
    return NOTIFY_STATUS_OK;
}

