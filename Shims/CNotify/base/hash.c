/* hash.c: FNV-1a, the one hash of the core: 32-bit for bucket interfaces, 64-bit (with the offset
 * basis given) for state file names and the map. Its own file, below both protocol.c and map.c,
 * which use it (docs/PROTOCOL.md gives the constants). */
#include "base.h"

uint32_t cn_fnv1a32(const char *s) {
    uint32_t h = 2166136261u; /* the 32-bit offset basis */
    for (; *s; s++) { h ^= (unsigned char)*s; h *= 16777619u; }
    return h;
}

uint64_t cn_fnv1a64(const char *s, uint64_t basis) {
    uint64_t h = basis;
    for (; *s; s++) { h ^= (unsigned char)*s; h *= 1099511628211ull; }
    return h;
}
