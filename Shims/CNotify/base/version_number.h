/* version_number.h: the version for builds that do not pass DARWIN_NOTIFY_VERSION (SwiftPM). It
 * must equal the top-level VERSION file: the Makefile refuses to build when they differ, and the
 * tests compare `--version` with VERSION. Not passed from Package.swift: SwiftPM caches a
 * manifest's result by its text, so a manifest that read VERSION kept the old number after a bump. */
#ifndef DARWIN_NOTIFY_VERSION
#define DARWIN_NOTIFY_VERSION "0.11.3"
#endif
