/* version.c: the library's version, from the top-level VERSION file (Package.swift and the
 * Makefile pass it as DARWIN_NOTIFY_VERSION), so the library, both CLIs, darwin-notify.pc, the man
 * pages and the Debian package all say the same. */
#include "base.h"

#ifndef DARWIN_NOTIFY_VERSION
#error "DARWIN_NOTIFY_VERSION is set by the build (Package.swift, Makefile) from the VERSION file"
#endif

const char *CNotify_version(void) { return DARWIN_NOTIFY_VERSION; }
