// Why this shim exists: SwiftPM system-library targets need a header that pulls in the
// library's umbrella include; libdbus's is <dbus/dbus.h> under pkg-config's -I path.
#ifndef CDBUS_SHIM_H
#define CDBUS_SHIM_H
#include <dbus/dbus.h>
#endif
