/*
 * test_map.c: the core's hash map (map.c): put, get, replace, upsert, remove, growth through many
 * keys with every one still found, iteration once per entry, clear with a free function, id keys.
 */
#include <stdio.h>
#include <string.h>
#include "../base.h"
#include "check.h"

static void count_entry(const char *key, void *value, void *arg) {
    (void)key;
    (void)value;
    (*(size_t *)arg)++;
}

static size_t freed;
static void free_value(void *value) { (void)value; freed++; }

int main(void) {
    cn_map m = { 0 };
    CHECK(cn_map_get(&m, "absent") == NULL, "an empty map found a key");
    CHECK(cn_map_remove(&m, "absent") == NULL, "an empty map removed a key");
    int a = 1, b = 2;
    CHECK(cn_map_put(&m, "a", &a) == 0 && cn_map_get(&m, "a") == &a, "put and get");
    CHECK(cn_map_put(&m, "a", &b) == 0 && cn_map_get(&m, "a") == &b && m.count == 1, "put again replaces");
    void **slot = cn_map_upsert(&m, "u");
    CHECK(slot && *slot == NULL && m.count == 2, "upsert inserts NULL");
    *slot = &a;
    CHECK(cn_map_upsert(&m, "u") == slot || *cn_map_upsert(&m, "u") == &a, "upsert finds");
    CHECK(cn_map_remove(&m, "u") == &a && cn_map_get(&m, "u") == NULL && m.count == 1, "remove");

    /* Growth: 10,000 keys, every one found afterwards with its own value. */
    static int values[10000];
    char key[32];
    for (int i = 0; i < 10000; i++) {
        values[i] = i;
        snprintf(key, sizeof key, "key.%d", i);
        CHECK(cn_map_put(&m, key, &values[i]) == 0, "put %d", i);
    }
    int lost = 0;
    for (int i = 0; i < 10000; i++) {
        snprintf(key, sizeof key, "key.%d", i);
        int *v = cn_map_get(&m, key);
        lost += !v || *v != i;
    }
    CHECK(lost == 0 && m.count == 10001, "%d keys lost, count %zu", lost, m.count);
    size_t seen = 0;
    cn_map_each(&m, count_entry, &seen);
    CHECK(seen == m.count, "each visited %zu of %zu", seen, m.count);
    cn_map_clear(&m, free_value);
    CHECK(freed == 10001 && m.count == 0 && cn_map_get(&m, "a") == NULL, "clear freed %zu", freed);

    /* Id keys: distinct numbers, distinct keys; the largest fits. */
    char k1[CN_ID_KEY_LEN], k2[CN_ID_KEY_LEN];
    CHECK(strcmp(cn_id_key(1, k1), cn_id_key(10, k2)) != 0, "ids 1 and 10 share a key");
    CHECK(strlen(cn_id_key(UINT64_MAX, k1)) < CN_ID_KEY_LEN, "the largest id overflows its key");
    return check_result("test_map");
}
