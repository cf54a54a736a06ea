/*
 * base/tests/check.h: the unit tests' one assertion (beside each module, as dbus-broker's
 * test-*.c): CHECK(cond, fmt, ...) says what failed, with file and line, and counts it; a test's
 * main returns check_result(), which prints "NAME: N checks, all passed" or exits 1. Built and run
 * by .ci/unit with the core's sources (never by SwiftPM or make: Package.swift excludes tests/).
 */
#ifndef CNOTIFY_TEST_CHECK_H
#define CNOTIFY_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>

static int check_count, check_failed;
#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        check_count++;                                                                \
        if (!(cond)) {                                                                \
            check_failed++;                                                           \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

static int check_result(const char *name) {
    if (check_failed) {
        fprintf(stderr, "%s: %d of %d checks failed\n", name, check_failed, check_count);
        return 1;
    }
    printf("%s: %d checks, all passed\n", name, check_count);
    return 0;
}
#endif
