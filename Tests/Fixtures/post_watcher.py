#!/usr/bin/python3
# post_watcher.py: an observer of docs/PROTOCOL.md "The signal" and "Observing" written from those
# sections alone, with python-dbus, that counts as "Bus copies, coalesced" says. Usage:
#   post_watcher.py ADDRESS NAME LAST
# adds NAME's rule (its bucket interface, arg0), prints "ready", then reads Posts of NAME until one
# numbered LAST, and prints "copies=C stands_for=S lost=L": C copies came, standing for S posts by
# their counts (absent: 1), and L posts were missing from the numbering beyond what counts cover.
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib


def bucket_interface(name):
    h = 2166136261
    for byte in name.encode("utf-8"):
        h ^= byte
        h = (h * 16777619) % 2**32
    return "org.darwinnotify.Notify.H%03x" % (h & 0xFFF)


def main():
    address, name, last = sys.argv[1], sys.argv[2], int(sys.argv[3])
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(address)
    quoted = name.replace("'", "'\\''")
    bus.add_match_string(
        "type='signal',path='/org/darwinnotify',interface='%s',member='Post',arg0='%s'" % (bucket_interface(name), quoted))
    loop = GLib.MainLoop()
    seen = {"copies": 0, "stands_for": 0, "lost": 0, "last": {}}

    def on_message(_bus, message):
        if message.get_type() != 4 or message.get_member() != "Post" or message.get_path() != "/org/darwinnotify":
            return
        args = message.get_args_list()
        if not args or str(args[0]) != name:
            return
        seq = int(args[1]) if len(args) > 1 and message.get_signature()[1:2] == "t" else None
        signature = message.get_signature()
        origin = int(args[2]) if signature.startswith("stt") else 0
        count = int(args[3]) if signature.startswith("sttu") else 1
        count = count or 1
        seen["copies"] += 1
        seen["stands_for"] += count
        if seq is not None:
            previous = seen["last"].get(origin)
            if previous is not None and seq > previous + 1:
                seen["lost"] += max(0, seq - previous - 1 - (count - 1))
            seen["last"][origin] = seq
            if seq == last:
                print("copies=%d stands_for=%d lost=%d" % (seen["copies"], seen["stands_for"], seen["lost"]), flush=True)
                loop.quit()

    bus.add_message_filter(on_message)
    print("ready", flush=True)
    loop.run()


if __name__ == "__main__":
    main()
