/*
 * fuzz_notify_conf.c: libFuzzer over notify.conf(5)'s parser (base/notify_conf.c). A
 * configuration file is root's, but a process reads the one $DARWIN_NOTIFY_CONF names, and the
 * daemon reads whatever an administrator wrote: every input must parse without a fault, report a
 * line number within the input for each problem, keep the reserves in notifyd's order (descending
 * byte order, so the deepest prefix decides), and give answers that follow the reserve that
 * decides. Built and run by .ci/fuzz under ASan+UBSan.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../../Shims/CNotify/base/base.h"

static size_t lines_in;

static void report(void *ctx, const char *file, unsigned line, const char *why) {
    (void)ctx;
    (void)file;
    if (line == 0 || line > lines_in || !why || !*why) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lines_in = 1;
    for (size_t i = 0; i < size; i++) lines_in += data[i] == '\n';
    cn_conf conf;
    cn_conf_init(&conf);
    size_t bad = cn_conf_parse(&conf, (const char *)data, size, "fuzz", report, NULL);
    if (bad > lines_in) abort();
    for (size_t i = 1; i < conf.nreserves; i++)
        if (strcmp(conf.reserves[i - 1].prefix, conf.reserves[i].prefix) <= 0) abort(); /* order, no duplicates */
    for (size_t i = 0; i < conf.nreserves; i++) {
        const cn_conf_reserve *r = &conf.reserves[i];
        if (CNotify_validate_name(r->prefix) != NOTIFY_STATUS_OK || (r->access & ~0x333u)) abort();
        /* The reserve found for its own prefix is itself or a deeper one covering it. */
        const cn_conf_reserve *d = cn_conf_reserve_of(&conf, r->prefix);
        if (!d || strncmp(d->prefix, r->prefix, strlen(d->prefix)) != 0 || strlen(d->prefix) > strlen(r->prefix)) abort();
        gid_t g = r->gid;
        if (!cn_conf_allows(d, 0, NULL, 0, CNOTIFY_ACCESS_WRITE)) abort(); /* root may do anything */
        int owner = cn_conf_allows(d, d->uid ? d->uid : 1, &g, 0, CNOTIFY_ACCESS_WRITE);
        if (d->uid && owner != ((d->access & 0x202u) != 0)) abort();
    }
    for (size_t i = 0; i < conf.nmonitors; i++)
        if (conf.monitors[i].path[0] != '/' || CNotify_validate_name(conf.monitors[i].name) != NOTIFY_STATUS_OK) abort();
    cn_conf_free(&conf);
    return 0;
}
