#!/usr/bin/python3
# fake_systemd_service.py: PropertiesChanged as systemd-hostnamed or systemd-timedated sends it, for
# darwin-notifyd's tests (python-dbus, on a test bus). Usage:
#   fake_systemd_service.py ADDRESS own SERVICE PATH KEY VALUE    owns SERVICE, prints "ready", then
#       emits the change for each line read on stdin ("emitted N"), until stdin closes
#   fake_systemd_service.py ADDRESS forge SERVICE PATH KEY VALUE  emits it once without owning
#       SERVICE, waits until the bus has handled it, prints "forged", exits
import sys

import dbus


def change(path, service, key, value):
    message = dbus.lowlevel.SignalMessage(path, "org.freedesktop.DBus.Properties", "PropertiesChanged")
    message.append(service, dbus.Dictionary({key: dbus.String(value, variant_level=1)}, signature="sv"),
                   dbus.Array([], signature="s"), signature="sa{sv}as")
    return message


def main():
    address, mode, service, path, key, value = sys.argv[1:7]
    bus = dbus.bus.BusConnection(address)
    if mode == "own":
        if bus.request_name(service, dbus.bus.NAME_FLAG_DO_NOT_QUEUE) != dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER:
            print("cannot own " + service, flush=True)
            return 1
        print("ready", flush=True)
        count = 0
        for _ in sys.stdin:
            bus.send_message(change(path, service, key, value))
            bus.get_unique_name()  # a round trip: the bus has the signal
            bus.get_name_owner(service)
            count += 1
            print("emitted %d" % count, flush=True)
        return 0
    bus.send_message(change(path, service, key, value))
    bus.get_name_owner("org.freedesktop.DBus")  # a round trip after it: the bus has handled it
    print("forged", flush=True)
    return 0


sys.exit(main())
