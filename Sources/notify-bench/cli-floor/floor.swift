// floor.swift: the Swift start-up floor: raw_post of the last argument, nothing else (no DarwinNotify,
// no argument parsing). What it costs over floor_main.c is the Swift runtime's start-up.
import Glibc

@_silgen_name("raw_post") func rawPost(_ name: UnsafePointer<CChar>) -> Int32

let arguments = CommandLine.arguments
exit(arguments.count < 2 ? 64 : rawPost(arguments[arguments.count - 1]))
