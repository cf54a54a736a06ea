import DarwinNotify

let center = NotifyCenter.default                   // or: try NotifyCenter(bus: "unix:path=…")
let observation = try center.observe("com.example.changed", queue: .main) { name in
    print("changed:", name)
}                                                   // cancel() it, or let it go
try center.post("com.example.changed")

for await note in try center.notifications(named: "com.example.changed") {
    print(note.name)                                // ending the loop cancels the observation
}
