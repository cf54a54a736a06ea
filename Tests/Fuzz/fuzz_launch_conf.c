/*
 * fuzz_launch_conf.c: darwin-notify-launch(5)'s parser (Sources/darwin-notifyd/launch_conf.c)
 * under libFuzzer. The first byte picks a label (valid or not); the rest is the file. Asserts: no
 * fault; a refused file names a line within the input and says why; an accepted one has a job, a
 * name, valid names and namespaces, and no name covered twice.
 */
#include <assert.h>
#include <stdint.h>
#include <string.h>
#include "../../Sources/darwin-notifyd/launch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const char *const labels[] = { "com.example.job", "job@1", "", ".hidden", "a b", "x" };
    const char *label = labels[data[0] % 6];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    nd_decl d;
    unsigned line = 0;
    char why[512] = "";
    int lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    if (nd_decl_parse(label, text, len, &d, &line, why, sizeof why) != 0) {
        assert(why[0]);
        assert(line <= (unsigned)lines);
    } else {
        assert(d.kind == ND_JOB_SERVICE || d.kind == ND_JOB_EXEC);
        assert(d.target[0] && d.n_names >= 1 && d.n_names <= ND_DECL_NAMES);
        assert(nd_label_valid(d.label));
        for (size_t i = 0; i < d.n_names; i++) {
            assert((d.is_namespace[i] ? CNotify_validate_namespace(d.names[i]) : CNotify_validate_name(d.names[i])) == NOTIFY_STATUS_OK);
            for (size_t k = 0; k < i; k++) assert(strcmp(d.names[i], d.names[k]) || d.is_namespace[i] != d.is_namespace[k]);
        }
        if (d.kind == ND_JOB_EXEC) assert(d.target[0] == '/');
        if (d.user[0]) assert(d.kind == ND_JOB_EXEC);
    }
    nd_decl_free(&d);
    return 0;
}
