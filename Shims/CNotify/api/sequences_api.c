/*
 * sequences_api.c: the receiver's rule for the numbers of posts that come by the bus alone
 * (docs/PROTOCOL.md "Origins"), offered whole (CNotify_sequences_*, darwin_notify.h) so that a
 * monitor or another implementation counts gaps and duplicates as every center does, with the
 * same bounds, instead of a copy of the rule: center/received.c is the one place it lives.
 */
#include <stdlib.h>
#include "api.h"

struct CNotify_sequences {
    cn_received received;
};

CNotify_sequences *CNotify_sequences_create(void) {
    cn_clear_error();
    CNotify_sequences *s = calloc(1, sizeof *s);
    if (!s) cn_set_error("out of memory");
    return s;
}

uint32_t CNotify_sequences_note(CNotify_sequences *s, const char *sender, uint64_t origin, const char *name, uint64_t seq,
                                uint32_t count, int *out_duplicate, uint64_t *out_gaps) {
    cn_clear_error();
    CN_RETURN_IF_NULL(s, "sequences");
    CN_RETURN_IF_NULL(sender, "sender");
    CN_RETURN_IF_NULL(out_duplicate, "duplicate pointer");
    CN_RETURN_IF_NULL(out_gaps, "gaps pointer");
    uint32_t st = CNotify_validate_name(name);
    if (st != NOTIFY_STATUS_OK) return st;
    cn_received_post post = { .name = name, .sender = sender, .origin = origin, .seq = seq, .has_seq = 1,
                              .coalesced = count > 1 ? count - 1 : 0 };
    *out_duplicate = cn_received_note(&s->received, &post, out_gaps) == CN_POST_DUPLICATE;
    return NOTIFY_STATUS_OK;
}

void CNotify_sequences_destroy(CNotify_sequences *s) {
    if (!s) return;
    cn_received_forget(&s->received);
    free(s);
}
