import Wormhole

struct Settings: Codable, Sendable { var theme: String }
let wormhole = try Wormhole(group: "group.com.example.app")            // transiting: .file
try wormhole.pass(Settings(theme: "dark"), identifier: "settings")
let current = try wormhole.message("settings", as: Settings.self)        // Settings?
let token = try wormhole.listen(for: "settings", as: Settings.self) { result in
    switch result {
    case .success(let settings): print(settings.theme)
    case .failure(let error): print(error)      // e.g. .corruptMessage: quarantined, listening goes on
    }
}
for await result in try wormhole.messages(for: "settings") { _ = result }  // AsyncSequence
token.cancel()

let shared = try Wormhole(group: "group.com.example.app", transiting: .coordinated)
try shared.update("sync", as: Bool.self) { needsSync in needsSync = true }  // atomic across processes
