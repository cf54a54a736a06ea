/*
 * bus_resolve.c: which bus a center talks to: "session", "system", "embedded", an address, or the
 * default (DARWIN_NOTIFY_BUS, else the system bus when installed system-wide and up, else the
 * embedded one), and the address as we keep it (without guid=).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "bus.h"

static uint32_t validate_address(const char *address, const char *origin) {
    DBusAddressEntry **entries = NULL;
    int n = 0;
    DBusError err;
    dbus_error_init(&err);
    if (!dbus_parse_address(address, &entries, &n, &err)) {
        cn_set_error("%s '%s' is not a D-Bus address (%s); use an address such as "
                     "unix:path=/run/user/1000/bus, or session, system, embedded",
                     origin, address, err.message ? err.message : "parse error");
        dbus_error_free(&err);
        return NOTIFY_STATUS_SERVER_NOT_FOUND;
    }
    dbus_address_entries_free(entries);
    return NOTIFY_STATUS_OK;
}

const char *cn_system_state_dir(void) {
    const char *dir = getenv("DARWIN_NOTIFY_SYSTEM_STATE_DIR");
    return dir && dir[0] == '/' ? dir : "/run/darwin-notify/state";
}

const char *cn_system_bus_address(void) {
    const char *address = getenv("DBUS_SYSTEM_BUS_ADDRESS");
    return address && address[0] ? address : "unix:path=/run/dbus/system_bus_socket";
}


/* Installed system-wide (the policy file and the tmpfiles.d entry that makes the shared state
 * directory) and with the system bus up, the default is the system bus, as Apple's Darwin center
 * is system-wide; otherwise the per-user embedded bus. Only unix:path= system addresses are
 * probed (a connect, no D-Bus traffic); another form counts as reachable. */
static int system_bus_is_default(void) {
    struct stat st;
    if (stat(cn_system_state_dir(), &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    const char *address = cn_system_bus_address();
    if (strncmp(address, "unix:path=", 10) != 0) return 1;
    char path[PATH_MAX];
    size_t n = strcspn(address + 10, ",;");
    if (n >= sizeof path) return 0;
    memcpy(path, address + 10, n);
    path[n] = '\0';
    return cn_socket_answers(path);
}

uint32_t cn_resolve_bus(const char *spec, cn_bus_kind *kind, char **out_address) {
    const char *origin = "bus address";
    if (spec == NULL || spec[0] == '\0') {
        spec = getenv("DARWIN_NOTIFY_BUS");
        origin = "DARWIN_NOTIFY_BUS";
        if (spec == NULL || spec[0] == '\0') spec = system_bus_is_default() ? "system" : "embedded";
    }
    *out_address = NULL;
    if (strcmp(spec, "embedded") == 0) {
        *kind = CN_BUS_EMBEDDED;
        return NOTIFY_STATUS_OK;
    }
    *kind = CN_BUS_ADDRESS;
    const char *address = spec;
    if (strcmp(spec, "session") == 0) {
        address = getenv("DBUS_SESSION_BUS_ADDRESS");
        if (address == NULL || address[0] == '\0') {
            cn_set_error("%s is 'session' but DBUS_SESSION_BUS_ADDRESS is not set", origin);
            return NOTIFY_STATUS_SERVER_NOT_FOUND;
        }
    } else if (strcmp(spec, "system") == 0) {
        address = cn_system_bus_address();
    }
    uint32_t st = validate_address(address, origin);
    if (st != NOTIFY_STATUS_OK) return st;
    *out_address = cn_address_without_guid(address);
    return *out_address ? NOTIFY_STATUS_OK : NOTIFY_STATUS_FAILED;
}

/* `address` with every guid=... key removed. A guid pins one daemon instance: libdbus refuses a
 * server with another, and a restarted dbus-daemon has a new one, so an address copied from
 * `dbus-daemon --print-address` or dbus-launch would never reconnect after a restart. We trust the
 * socket's path (and the daemon's credentials), not the instance. Malloc'd; NULL when out of memory. */
char *cn_address_without_guid(const char *address) {
    /* In an address ';' separates entries "method:key=value,..."; inside values ',' ';' and ':'
     * are always %-escaped (D-Bus specification, "Server Addresses"), so the text can be cut. */
    char *out = malloc(strlen(address) + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (const char *p = address; *p;) {
        size_t entry = strcspn(p, ";");
        const char *end = p + entry, *colon = memchr(p, ':', entry);
        const char *kv = colon ? colon + 1 : end;
        memcpy(out + o, p, (size_t)(kv - p)); /* "method:" */
        o += (size_t)(kv - p);
        int first = 1;
        while (kv < end) {
            size_t n = strcspn(kv, ",;");
            if (n > (size_t)(end - kv)) n = (size_t)(end - kv);
            if (!(n >= 5 && strncmp(kv, "guid=", 5) == 0)) {
                if (!first) out[o++] = ',';
                memcpy(out + o, kv, n);
                o += n;
                first = 0;
            }
            kv += n;
            if (kv < end && *kv == ',') kv++;
        }
        p = end;
        if (*p == ';') out[o++] = *p++;
    }
    out[o] = '\0';
    return out;
}

