// CFNotificationCenter.swift: Core Foundation's notification centers as Swift on Apple platforms
// calls them (CFNotificationCenter.h): the Darwin center over notify(3), the distributed center
// over DistributedNotificationCenter, the local center in this process. Linux's Foundation
// declares none of it usable (the toolchain's CoreFoundation headers name these functions, and no
// library defines them), so this module gives the same names, labels and types, with stand-ins for
// the CF types Linux Swift cannot bridge a String or a Dictionary to.
import DarwinNotify
import Dispatch
import Foundation
import Synchronization

/// Core Foundation's string type as this module's functions take it: a Swift `String`, so Apple's
/// spellings (`"name" as CFString`, `name as CFString`, `cfName as String`) compile and mean the
/// same. Linux Swift has no bridge from `String` to the toolchain's `CFString` class.
public typealias CFString = String
/// Core Foundation's dictionary type as this module's functions take it: `NSDictionary`, so
/// `userInfo as CFDictionary` (a Swift dictionary) and `userInfo as? [String: Any]` in a callback
/// compile and mean what they mean on Apple platforms.
public typealias CFDictionary = NSDictionary
/// Core Foundation's option bits (`unsigned long`).
public typealias CFOptionFlags = UInt

/// A notification's name (Apple's `CFNotificationName`, an extensible string enum).
public struct CFNotificationName: RawRepresentable, Hashable, Sendable {
    public var rawValue: CFString
    public init(rawValue: CFString) { self.rawValue = rawValue }
    public init(_ rawValue: CFString) { self.rawValue = rawValue }
}

/// What happens to a distributed center's notifications while the process is suspended
/// (``DistributedNotificationCenter/suspended``). The Darwin center ignores it, as Apple's does.
public enum CFNotificationSuspensionBehavior: Int, Sendable {
    case drop = 1
    case coalesce = 2
    case hold = 3
    case deliverImmediately = 4
}

/// `CFNotificationCenterPostNotificationWithOptions`: delivered at once, suspended or not.
public let kCFNotificationDeliverImmediately: CFOptionFlags = 1 << 0
/// `CFNotificationCenterPostNotificationWithOptions`: to every user's session (the system bus).
public let kCFNotificationPostToAllSessions: CFOptionFlags = 1 << 1

/// The function a center calls for each notification an observer registered for: the center, the
/// observer pointer given to `CFNotificationCenterAddObserver`, the name, the object and the
/// userInfo. For the Darwin center, object and userInfo are nil. For the distributed center the
/// object, when there is one, points to the object string as a NUL-terminated UTF-8 C string,
/// valid during the call (on Apple platforms it is a `CFString`; read it with
/// `String(cString: object.assumingMemoryBound(to: CChar.self))`).
public typealias CFNotificationCallback = (CFNotificationCenter?, UnsafeMutableRawPointer?, CFNotificationName?,
                                           UnsafeRawPointer?, CFDictionary?) -> Void

/// A Core Foundation notification center: one of the three a process has
/// (``CFNotificationCenterGetDarwinNotifyCenter()``, ``CFNotificationCenterGetDistributedCenter()``,
/// ``CFNotificationCenterGetLocalCenter()``). Observers are identified by their pointer, as in CF.
///
/// The Darwin and distributed centers call back on the main thread, as Apple's do ("the main
/// thread's run loop must be running"): a program with no run loop of its own runs
/// `RunLoop.main.run()` or `dispatchMain()`. The local center calls back on the posting thread,
/// before the post returns.
///
/// Apple's functions return nothing and cannot fail; here a center can (no bus, a name notify(3)
/// refuses). Such a failure is reported to ``NotificationFailures`` (a line on standard error by
/// default, a handler of your own, a count), never thrown, never a crash.
public final class CFNotificationCenter: @unchecked Sendable, CustomStringConvertible {
    // @unchecked Sendable: `kind` is let; the registrations are behind a Mutex.
    enum Kind: String { case darwin, distributed, local }
    let kind: Kind
    private let registrations = Mutex<[Registration]>([])

    private struct Registration: @unchecked Sendable {
        // @unchecked Sendable: the callback is a C-style function with no captures on Apple
        // platforms (here: any closure), called only where the center calls back.
        let observer: UInt
        let name: String?
        let object: UnsafeRawPointer?
        let callback: CFNotificationCallback
        let behavior: CFNotificationSuspensionBehavior
        /// What stops it: a Darwin observation, a distributed registration; nil for the local center.
        let stop: (@Sendable () -> Void)?
    }

    fileprivate init(_ kind: Kind) { self.kind = kind }

    static let darwin = CFNotificationCenter(.darwin)
    static let distributed = CFNotificationCenter(.distributed)
    static let local = CFNotificationCenter(.local)

    public var description: String { "<CFNotificationCenter \(kind.rawValue)>" }

    fileprivate func add(observer: UnsafeRawPointer?, callback: CFNotificationCallback?, name: String?,
                         object: UnsafeRawPointer?, behavior: CFNotificationSuspensionBehavior) {
        let function = "CFNotificationCenterAddObserver"
        guard let callback else { return NotificationFailures.report(function, name: name, "the callback is NULL") }
        let observerBits = UInt(bitPattern: observer)
        var stop: (@Sendable () -> Void)?
        switch kind {
        case .darwin:
            guard let name else {
                return NotificationFailures.report(function, name: nil, "a Darwin notification center observes names, and this one is NULL")
            }
            let callbackBox = UncheckedTransfer(callback)
            do throws(NotifyError) {
                let observation = try NotifyCenter.default.observe(name, queue: .main) { posted in
                    callbackBox.value(CFNotificationCenter.darwin, UnsafeMutableRawPointer(bitPattern: observerBits),
                                      CFNotificationName(posted), nil, nil)
                }
                stop = { observation.cancel() }
            } catch {
                return NotificationFailures.report(function, name: name, error)
            }
        case .distributed:
            let objectString = object.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) }
            let callbackBox = UncheckedTransfer(callback)
            let token = DistributedNotificationCenter.default().addObserver(
                forName: name.map { Notification.Name($0) }, object: objectString,
                suspensionBehavior: behavior.distributed, queue: nil) { note in
                let info = note.userInfo.map { NSDictionary(dictionary: $0) }
                let deliver = { (object: UnsafeRawPointer?) in
                    callbackBox.value(CFNotificationCenter.distributed, UnsafeMutableRawPointer(bitPattern: observerBits),
                                      CFNotificationName(note.name.rawValue), object, info)
                }
                if let object = note.object as? String { object.withCString { deliver(UnsafeRawPointer($0)) } } else { deliver(nil) }
            }
            let tokenBox = UncheckedTransfer(token as AnyObject)
            stop = { DistributedNotificationCenter.default().removeObserver(tokenBox.value) }
        case .local:
            break
        }
        registrations.withLock {
            $0.append(Registration(observer: observerBits, name: name, object: object, callback: callback, behavior: behavior, stop: stop))
        }
    }

    /// Removes the observer's registrations of `name` (nil: every name) and `object` (nil: any;
    /// ignored by the Darwin center). Once this returns, none of them is called again.
    fileprivate func remove(observer: UnsafeRawPointer?, name: String?, object: UnsafeRawPointer?, every: Bool) {
        let observerBits = UInt(bitPattern: observer)
        let removed = registrations.withLock { list -> [Registration] in
            var removed: [Registration] = []
            list.removeAll { r in
                let matches = r.observer == observerBits
                    && (every || name == nil || r.name == name)
                    && (every || kind == .darwin || object == nil || r.object == object)
                if matches { removed.append(r) }
                return matches
            }
            return removed
        }
        for r in removed { r.stop?() }
    }

    fileprivate func post(name: String?, object: UnsafeRawPointer?, userInfo: CFDictionary?, options: CFOptionFlags, function: String) {
        guard let name else { return NotificationFailures.report(function, name: nil, "the name is NULL") }
        switch kind {
        case .darwin:
            // object, userInfo and options are ignored, as Apple's Darwin center ignores them.
            do throws(NotifyError) { try NotifyCenter.default.post(name) } catch {
                NotificationFailures.report(function, name: name, error)
            }
        case .distributed:
            let objectString = object.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) }
            var distributedOptions: DistributedNotificationCenter.Options = []
            if options & kCFNotificationDeliverImmediately != 0 { distributedOptions.insert(.deliverImmediately) }
            if options & kCFNotificationPostToAllSessions != 0 { distributedOptions.insert(.postToAllSessions) }
            DistributedNotificationCenter.default().postNotificationName(
                Notification.Name(name), object: objectString, userInfo: userInfo.map { $0 as? [AnyHashable: Any] ?? [:] },
                options: distributedOptions)
        case .local:
            let matching = registrations.withLock { list in
                list.filter { ($0.name == nil || $0.name == name) && ($0.object == nil || $0.object == object) }
            }
            for r in matching {
                r.callback(self, UnsafeMutableRawPointer(bitPattern: r.observer), CFNotificationName(name), object, userInfo)
            }
        }
    }
}

extension CFNotificationSuspensionBehavior {
    var distributed: DistributedNotificationCenter.SuspensionBehavior {
        switch self {
        case .drop: return .drop
        case .coalesce: return .coalesce
        case .hold: return .hold
        case .deliverImmediately: return .deliverImmediately
        }
    }
}

/// The application's Darwin notification center (notify(3)): names only, system-wide on the bus
/// `NotifyCenter.default` uses. The same value each time.
public func CFNotificationCenterGetDarwinNotifyCenter() -> CFNotificationCenter! { CFNotificationCenter.darwin }

/// The distributed notification center: ``DistributedNotificationCenter/default()``'s bus, with
/// object strings and property-list userInfo.
public func CFNotificationCenterGetDistributedCenter() -> CFNotificationCenter! { CFNotificationCenter.distributed }

/// The local notification center: this process only, delivered on the posting thread.
public func CFNotificationCenterGetLocalCenter() -> CFNotificationCenter! { CFNotificationCenter.local }

/// Registers `callBack` for `observer` (any pointer, or nil) for the notifications named `name`
/// (nil: any, except on the Darwin center, which needs a name) and posted with `object` (the
/// Darwin center ignores it; on the distributed center it is a NUL-terminated C string, which a
/// Swift `String` argument becomes). `suspensionBehavior` applies to the distributed center.
public func CFNotificationCenterAddObserver(_ center: CFNotificationCenter!, _ observer: UnsafeRawPointer!,
                                            _ callBack: CFNotificationCallback!, _ name: CFString!, _ object: UnsafeRawPointer!,
                                            _ suspensionBehavior: CFNotificationSuspensionBehavior) {
    guard let center else { return NotificationFailures.report("CFNotificationCenterAddObserver", name: name, "the center is NULL") }
    center.add(observer: observer, callback: callBack, name: name, object: object, behavior: suspensionBehavior)
}

/// Removes `observer`'s registrations for `name` (nil: all) and `object` (nil: any; ignored by
/// the Darwin center).
public func CFNotificationCenterRemoveObserver(_ center: CFNotificationCenter!, _ observer: UnsafeRawPointer!,
                                               _ name: CFNotificationName!, _ object: UnsafeRawPointer!) {
    center?.remove(observer: observer, name: name?.rawValue, object: object, every: false)
}

/// Removes every registration of `observer`.
public func CFNotificationCenterRemoveEveryObserver(_ center: CFNotificationCenter!, _ observer: UnsafeRawPointer!) {
    center?.remove(observer: observer, name: nil, object: nil, every: true)
}

/// Posts `name`. The Darwin center ignores `object`, `userInfo` and `deliverImmediately`, as
/// Apple's does.
public func CFNotificationCenterPostNotification(_ center: CFNotificationCenter!, _ name: CFNotificationName!,
                                                 _ object: UnsafeRawPointer!, _ userInfo: CFDictionary!, _ deliverImmediately: Bool) {
    let function = "CFNotificationCenterPostNotification"
    guard let center else { return NotificationFailures.report(function, name: name?.rawValue, "the center is NULL") }
    center.post(name: name?.rawValue, object: object, userInfo: userInfo,
                options: deliverImmediately ? kCFNotificationDeliverImmediately : 0, function: function)
}

/// Posts `name` with `options` (``kCFNotificationDeliverImmediately``,
/// ``kCFNotificationPostToAllSessions``). The Darwin center ignores `object`, `userInfo` and
/// `options`, as Apple's does.
public func CFNotificationCenterPostNotificationWithOptions(_ center: CFNotificationCenter!, _ name: CFNotificationName!,
                                                            _ object: UnsafeRawPointer!, _ userInfo: CFDictionary!,
                                                            _ options: CFOptionFlags) {
    let function = "CFNotificationCenterPostNotificationWithOptions"
    guard let center else { return NotificationFailures.report(function, name: name?.rawValue, "the center is NULL") }
    center.post(name: name?.rawValue, object: object, userInfo: userInfo, options: options, function: function)
}
