#!/usr/bin/python3
# distributed_client.py: a client of docs/PROTOCOL.md "Distributed notifications" written from that
# section alone, with python-dbus: it posts, watches, and sends the hostile payloads the tests
# expect receivers to drop. Usage:
#   distributed_client.py post ADDRESS NAME       a post with every property-list type in its userInfo
#   distributed_client.py watch ADDRESS NAME      prints "ready", then the first post of NAME as JSON
#   distributed_client.py hostile ADDRESS         20 malformed posts, then a valid one named hostile.end
import json
import math
import os
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

PATH = "/org/darwinnotify"
INTERFACE = "org.darwinnotify.Distributed"
MEMBER = "Post"


def connect(address):
    bus = dbus.bus.BusConnection(address)
    return bus


def signal(signature, *args):
    message = dbus.lowlevel.SignalMessage(PATH, INTERFACE, MEMBER)
    message.append(*args, signature=signature)
    return message


def post(address, name):
    bus = connect(address)
    info = dbus.Dictionary({
        "string": dbus.String("héllo"),
        "int32": dbus.Int32(-7),
        "int64": dbus.Int64(2**40),
        "byte": dbus.Byte(200),
        "uint32": dbus.UInt32(4000000000),
        "double": dbus.Double(2.5),
        "true": dbus.Boolean(True),
        "data": dbus.ByteArray(b"\x00\x01\xff"),
        "date": dbus.Struct((dbus.Double(1700000000.25),), signature="d"),
        "strings": dbus.Array(["a", "b"], signature="s"),
        "mixed": dbus.Array([dbus.Int64(1), dbus.String("two")], signature="v"),
        "nested": dbus.Dictionary({"k": dbus.String("v")}, signature="sv"),
    }, signature="sv")
    # name, object, userInfo: the sequence, origin and options are optional for foreign posters.
    bus.send_message(signal("ssa{sv}", name, "python", info))
    bus.flush()


def plain(value):
    """The userInfo as JSON, with each value's D-Bus type, to compare in the test."""
    if isinstance(value, dbus.Boolean):
        return {"b": bool(value)}
    if isinstance(value, (dbus.Int16, dbus.Int32, dbus.Int64, dbus.Byte, dbus.UInt16, dbus.UInt32, dbus.UInt64)):
        return {"i": int(value)}
    if isinstance(value, dbus.Double):
        return {"d": float(value)}
    if isinstance(value, dbus.String):
        return {"s": str(value)}
    if isinstance(value, dbus.Struct):
        return {"date": float(value[0])}
    if isinstance(value, dbus.ByteArray) or (isinstance(value, dbus.Array) and value.signature == "y"):
        return {"data": bytes(bytearray(value)).hex()}
    if isinstance(value, dbus.Dictionary):
        return {"dict": {str(k): plain(v) for k, v in value.items()}}
    if isinstance(value, dbus.Array):
        return {"array": [plain(v) for v in value]}
    return {"unknown": repr(value)}


def watch(address, name):
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(address)
    loop = GLib.MainLoop()

    def on_post(*args, **kw):
        if str(args[0]) != name:
            return
        out = {"name": str(args[0]), "object": str(args[1]), "userInfo": plain(args[2])}
        if len(args) > 3:
            out["sequence"] = int(args[3])
        print(json.dumps(out, sort_keys=True), flush=True)
        loop.quit()

    bus.add_signal_receiver(on_post, signal_name=MEMBER, dbus_interface=INTERFACE, path=PATH, byte_arrays=True)
    # add_signal_receiver's AddMatch is sent without a reply; a round trip after it means the bus has it.
    bus.call_blocking("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId", "", ())
    print("ready", flush=True)
    GLib.timeout_add_seconds(20, loop.quit)
    loop.run()


def hostile(address):
    bus = connect(address)
    sv = lambda d: dbus.Dictionary(d, signature="sv")
    with open("/dev/null", "rb") as devnull:
        fd = dbus.types.UnixFd(devnull)
    cases = [
        ("", ()),                                                            # 1 no arguments
        ("s", ("only.name",)),                                               # 2 no object
        ("is", (dbus.Int32(5), "obj")),                                      # 3 a name that is no string
        ("ssa{sv}", ("", "obj", sv({}))),                                    # 4 an empty name
        ("ssa{sv}", ("n" * 600, "obj", sv({}))),                             # 5 a name past 512 bytes
        ("sia{sv}", ("h.name", dbus.Int32(1), sv({}))),                      # 6 an object that is no string
        ("sss", ("h.name", "obj", "not a dictionary")),                      # 7 a userInfo that is no dictionary
        ("ssa{iv}", ("h.name", "obj", dbus.Dictionary({1: dbus.String("x")}, signature="iv"))),  # 8 integer keys
        ("ssa{sv}", ("h.name", "obj", sv({"k": dbus.ObjectPath("/x")}))),   # 9 an object path
        ("ssa{sv}", ("h.name", "obj", sv({"k": dbus.Signature("s")}))),     # 10 a signature
        ("ssa{sv}", ("h.name", "obj", sv({"k": fd}))),                      # 11 a file descriptor
        ("ssa{sv}", ("h.name", "obj", sv({"k": dbus.Array([dbus.Int32(1)], signature="v", variant_level=2)}))),  # 12 a variant in a variant
        ("ssa{sv}", ("h.name", "obj", sv({"k": dbus.Struct(("a", dbus.Int32(1)), signature="si")}))),  # 13 a struct (si)
        ("ssa{sv}", ("h.name", "obj", sv({"k": dbus.Struct((1.0, 2.0), signature="dd")}))),  # 14 a struct (dd)
        ("ssa{sv}", ("h.name", "obj", sv({"k": dbus.Struct((float("nan"),), signature="d")}))),  # 15 a NaN date
        ("ssa{sv}", ("h.name", "obj", sv({"k": dbus.Double(math.inf)}))),   # 16 an infinite real
        ("ssa{sv}", ("h.name", "obj", sv({"k": dbus.UInt64(2**64 - 1)}))),  # 17 an integer past 2^63-1
        ("ssa{sv}", ("h.name", "obj", sv({"k": dbus.ByteArray(b"\0" * 70000)}))),  # 18 data past 64 KiB
        ("ssa{sv}", ("h.name", "obj", sv({"k": "x" * 70000}))),             # 19 a string past 64 KiB
        ("ssa{sv}", ("h.name", "obj", sv({"k%d" % i: dbus.Int64(i) for i in range(9000)}))),  # 20 9,000 values
    ]
    for signature, args in cases:
        bus.send_message(signal(signature, *args))
    bus.send_message(signal("ssa{sv}", "hostile.end", "", sv({"ok": True})))
    bus.flush()
    print(len(cases), flush=True)


if __name__ == "__main__":
    mode, address = sys.argv[1], sys.argv[2]
    if mode == "post":
        post(address, sys.argv[3])
    elif mode == "watch":
        watch(address, sys.argv[3])
    elif mode == "hostile":
        hostile(address)
    else:
        sys.exit("unknown mode " + mode)
