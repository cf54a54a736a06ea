/* version.c: the library's version, from the top-level VERSION file (the Makefile and the plain cc
 * lines pass it as DARWIN_NOTIFY_VERSION; SwiftPM builds take version_number.h, which must say the
 * same), so the library, the CLIs, darwin-notify.pc, the man pages and the Debian package agree. */
#include "base.h"
#include "version_number.h"

const char *CNotify_version(void) { return DARWIN_NOTIFY_VERSION; }
