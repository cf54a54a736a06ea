// DarwinNotificationCenter.swift: a Swift wrapper of the CF Darwin notify center, written as it is
// written for iOS and macOS (the usual pattern: CFNotificationCenterGetDarwinNotifyCenter, a
// C-style callback that finds `self` through Unmanaged, names as CFString).
import Foundation
#if os(Linux)
import DarwinNotifyFoundation
#endif

/// A system-wide notification: a name, nothing more.
public struct DarwinNotification: Equatable {
    public struct Name: Equatable, Hashable {
        fileprivate var rawValue: CFString

        public init(_ rawValue: String) {
            self.rawValue = rawValue as CFString
        }

        init(_ cfNotificationName: CFNotificationName) {
            rawValue = cfNotificationName.rawValue
        }

        public var string: String { rawValue as String }
    }

    public let name: Name
}

/// Observes and posts Darwin notifications, calling back on the main thread.
public final class DarwinNotificationCenter {
    public static let shared = DarwinNotificationCenter()

    private let center = CFNotificationCenterGetDarwinNotifyCenter()
    private var handlers: [DarwinNotification.Name: [(DarwinNotification) -> Void]] = [:]

    public init() {}

    deinit {
        CFNotificationCenterRemoveEveryObserver(center, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Calls `handler` on the main thread for each post of `name`, from any process.
    public func addObserver(for name: DarwinNotification.Name, using handler: @escaping (DarwinNotification) -> Void) {
        if handlers[name] == nil {
            let callback: CFNotificationCallback = { _, observer, name, _, _ in
                guard let observer = observer, let name = name else { return }
                let center = Unmanaged<DarwinNotificationCenter>.fromOpaque(observer).takeUnretainedValue()
                center.received(DarwinNotification.Name(name))
            }
            CFNotificationCenterAddObserver(center,
                                            Unmanaged.passUnretained(self).toOpaque(),
                                            callback,
                                            name.rawValue,
                                            nil,
                                            .deliverImmediately)
        }
        handlers[name, default: []].append(handler)
    }

    /// Stops every handler of `name`.
    public func removeObserver(for name: DarwinNotification.Name) {
        handlers[name] = nil
        CFNotificationCenterRemoveObserver(center,
                                           Unmanaged.passUnretained(self).toOpaque(),
                                           CFNotificationName(rawValue: name.rawValue),
                                           nil)
    }

    /// Posts `name` to every process.
    public func post(_ name: DarwinNotification.Name) {
        CFNotificationCenterPostNotification(center, CFNotificationName(name.rawValue), nil, nil, true)
    }

    private func received(_ name: DarwinNotification.Name) {
        for handler in handlers[name] ?? [] {
            handler(DarwinNotification(name: name))
        }
    }
}
