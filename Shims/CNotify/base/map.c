/* map.c: the core's one hash table: chained, string keys (names observed by a center, 10k+ of
 * them, must stay O(1)); numbers (tokens, registration ids) are keyed by their decimal text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base.h"

static uint64_t hash_key(const char *s) { return cn_fnv1a64(s, CN_FNV64_OFFSET_BASIS); }

static cn_map_node **find(cn_map *m, const char *key, uint64_t h) {
    if (m->nbuckets == 0) return NULL;
    cn_map_node **p = &m->buckets[h & (m->nbuckets - 1)];
    for (; *p; p = &(*p)->next)
        if ((*p)->hash == h && strcmp((*p)->key, key) == 0) return p;
    return p;
}

CN_HOT void *cn_map_get(cn_map *m, const char *key) {
    cn_map_node **p = find(m, key, hash_key(key));
    return (p && *p) ? (*p)->value : NULL;
}

static int grow(cn_map *m) {
    size_t n = m->nbuckets ? m->nbuckets * 2 : 16;
    cn_map_node **b = calloc(n, sizeof *b);
    if (!b) return -1;
    for (size_t i = 0; i < m->nbuckets; i++) {
        cn_map_node *node = m->buckets[i];
        while (node) {
            cn_map_node *next = node->next;
            node->next = b[node->hash & (n - 1)];
            b[node->hash & (n - 1)] = node;
            node = next;
        }
    }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = n;
    return 0;
}

static cn_map_node *new_node(const char *key, uint64_t h, void *value) {
    size_t len = strlen(key) + 1;
    cn_map_node *node = malloc(sizeof *node + len);
    if (!node) return NULL;
    node->next = NULL;
    node->hash = h;
    node->value = value;
    memcpy(node->key, key, len);
    return node;
}

CN_HOT void **cn_map_upsert(cn_map *m, const char *key) {
    uint64_t h = hash_key(key);
    cn_map_node **p = find(m, key, h);
    if (p && *p) return &(*p)->value;
    if (m->count + 1 > m->nbuckets) {
        if (grow(m) != 0) return NULL;
    }
    p = find(m, key, h);
    cn_map_node *node = new_node(key, h, NULL);
    if (!node) return NULL;
    *p = node;
    m->count++;
    return &node->value;
}

int cn_map_put(cn_map *m, const char *key, void *value) {
    if (m->count + 1 > m->nbuckets && grow(m) != 0) return -1;
    uint64_t h = hash_key(key);
    cn_map_node **p = find(m, key, h);
    if (*p) { (*p)->value = value; return 0; }
    cn_map_node *node = new_node(key, h, value);
    if (!node) return -1;
    *p = node;
    m->count++;
    return 0;
}

void *cn_map_remove(cn_map *m, const char *key) {
    cn_map_node **p = find(m, key, hash_key(key));
    if (!p || !*p) return NULL;
    cn_map_node *node = *p;
    void *value = node->value;
    *p = node->next;
    free(node);
    m->count--;
    return value;
}

void cn_map_clear(cn_map *m, void (*free_value)(void *)) {
    for (size_t i = 0; i < m->nbuckets; i++) {
        cn_map_node *node = m->buckets[i];
        while (node) {
            cn_map_node *next = node->next;
            if (free_value) free_value(node->value);
            free(node);
            node = next;
        }
    }
    free(m->buckets);
    m->buckets = NULL;
    m->nbuckets = m->count = 0;
}

void cn_map_each(cn_map *m, void (*fn)(const char *key, void *value, void *arg), void *arg) {
    for (size_t i = 0; i < m->nbuckets; i++)
        for (cn_map_node *node = m->buckets[i]; node; node = node->next) fn(node->key, node->value, arg);
}

const char *cn_id_key(uint64_t id, char buf[CN_ID_KEY_LEN]) {
    snprintf(buf, CN_ID_KEY_LEN, "%llu", (unsigned long long)id);
    return buf;
}
