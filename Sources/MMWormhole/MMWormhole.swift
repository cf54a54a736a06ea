// MMWormhole.swift: MMWormhole's class, with its Swift names, over the Wormhole module. Code that
// does `import MMWormhole` on iOS builds unchanged: a wormhole in an app group container, NSCoding
// message objects archived with NSKeyedArchiver, a listener per identifier called on the main
// queue. What differs: the message files are Wormhole's (a Wormhole listener and the `wormhole`
// CLI read them: the payload is the keyed archive's bytes), and an archive is decoded only if
// every class it names is allowed (SafeUnarchiver.swift), where MMWormhole decoded anything.
import DarwinNotify
import DarwinNotifyFoundation
import Dispatch
import Foundation
import Synchronization
import Wormhole

/// How messages travel (MMWormhole's `MMWormholeTransitingType`).
public enum MMWormholeTransitingType: Int, Sendable {
    /// One message per identifier, replaced atomically (Wormhole's `.file`).
    case file = 0
    /// As `file`, under a lock shared by every process (Wormhole's `.coordinated`).
    case coordinatedFile
    /// WatchConnectivity's application context: there is no Apple Watch on Linux. A wormhole of
    /// this type passes nothing and reports every call (``NotificationFailures``).
    case sessionContext
    /// WatchConnectivity's messages: as `sessionContext`.
    case sessionMessage
    /// WatchConnectivity's file transfers: as `sessionContext`.
    case sessionFile
}

/// A wormhole between an app and its extensions (MMWormhole): message objects passed by
/// identifier through the group container, announced by a Darwin notification.
///
/// As MMWormhole: one listener per identifier (listening again replaces it), called on the main
/// queue with the message object; the wormhole keeps its listeners, and they stop when it goes.
/// A message object is any `NSCoding` object; `nil` passes an empty message, which listeners
/// receive as `nil`.
///
/// Failures that MMWormhole cannot report (an invalid group, an unusable container, an object
/// that does not archive, an archive refused) go to ``NotificationFailures``: a line on standard
/// error by default, never a crash.
///
/// Archives are read safely: a message is decoded only if every class its archive names is
/// Foundation's value classes (strings, numbers, data, dates, arrays, dictionaries, sets, null,
/// URLs, UUIDs) or an `NSCoding` class of the application's own modules (or, when
/// ``allowedMessageClasses`` is set, one of those), its objects nest at most 256 deep, and none
/// refers back to an object that contains it. Anything else is refused unread.
open class MMWormhole: NSObject, @unchecked Sendable {
    // @unchecked Sendable: `wormhole` is let; the listeners are behind a Mutex.
    private let wormhole: Wormhole?
    private let listeners = Mutex<[String: WormholeListener]>([:])
    private let allowed = Mutex<[AnyClass]?>(nil)

    /// The classes a message may be made of besides Foundation's value classes; nil (the default):
    /// any `NSCoding` class of the application's own modules. Beyond MMWormhole's API.
    public var allowedMessageClasses: [AnyClass]? {
        get { allowed.withLock { $0 } }
        set { allowed.withLock { $0 = newValue } }
    }

    /// A wormhole in the container of the app group `identifier`, in `directory` inside it
    /// (nil: `wormhole`). The container is Wormhole's `GroupContainer` of that group.
    public convenience init(applicationGroupIdentifier identifier: String?, optionalDirectory directory: String?) {
        self.init(applicationGroupIdentifier: identifier, optionalDirectory: directory, transitingType: .file)
    }

    /// As ``init(applicationGroupIdentifier:optionalDirectory:)``, with a transiting type.
    public init(applicationGroupIdentifier identifier: String?, optionalDirectory directory: String?,
                transitingType: MMWormholeTransitingType) {
        let transiting: Transiting?
        switch transitingType {
        case .file: transiting = .file
        case .coordinatedFile: transiting = .coordinated
        case .sessionContext, .sessionMessage, .sessionFile: transiting = nil
        }
        var made: Wormhole?
        if let transiting {
            do throws(WormholeError) {
                made = try Wormhole(group: identifier ?? "", directory: directory ?? "wormhole", transiting: transiting)
            } catch {
                NotificationFailures.report("MMWormhole(applicationGroupIdentifier:optionalDirectory:)", name: identifier, error)
            }
        } else {
            NotificationFailures.report("MMWormhole(applicationGroupIdentifier:optionalDirectory:transitingType:)", name: identifier,
                                        "WatchConnectivity transiting (\(transitingType)) does not exist on Linux: this wormhole passes nothing")
        }
        wormhole = made
        super.init()
    }

    deinit {
        for listener in listeners.withLock({ $0.values }) { listener.cancel() }
    }

    /// Archives `messageObject` (NSKeyedArchiver) and passes it for `identifier`; its listeners, in
    /// any process of the group, are called.
    open func passMessageObject(_ messageObject: NSCoding?, identifier: String?) {
        let function = "passMessageObject(_:identifier:)"
        guard let wormhole = usable(function, identifier), let identifier else { return }
        let data: Data
        if let messageObject {
            do { data = try NSKeyedArchiver.archivedData(withRootObject: messageObject, requiringSecureCoding: false) } catch {
                return NotificationFailures.report(function, name: identifier, "the message object does not archive: \(error)")
            }
        } else {
            data = Data()
        }
        do throws(WormholeError) { try wormhole.pass(data: data, identifier: identifier) } catch {
            NotificationFailures.report(function, name: identifier, error)
        }
    }

    /// The message object last passed for `identifier`, or nil (none, cleared, or refused).
    open func message(withIdentifier identifier: String?) -> Any? {
        let function = "message(withIdentifier:)"
        guard let wormhole = usable(function, identifier), let identifier else { return nil }
        do throws(WormholeError) {
            guard let message = try wormhole.message(identifier) else { return nil }
            return decode(message.payload, function, identifier)
        } catch {
            NotificationFailures.report(function, name: identifier, error)
            return nil
        }
    }

    /// Removes the message of `identifier`.
    open func clearMessageContents(forIdentifier identifier: String?) {
        let function = "clearMessageContents(forIdentifier:)"
        guard let wormhole = usable(function, identifier), let identifier else { return }
        do throws(WormholeError) { try wormhole.clear(identifier) } catch { NotificationFailures.report(function, name: identifier, error) }
    }

    /// Removes every message of this wormhole's directory.
    open func clearAllMessageContents() {
        let function = "clearAllMessageContents()"
        guard let wormhole = usable(function, nil) else { return }
        do throws(WormholeError) { try wormhole.clearAll() } catch { NotificationFailures.report(function, name: nil, error) }
    }

    /// Calls `listener` on the main queue with the message object of each message passed for
    /// `identifier` from now on, until ``stopListeningForMessage(withIdentifier:)`` or until the
    /// wormhole goes. One listener per identifier: this one replaces the last.
    open func listenForMessage(withIdentifier identifier: String?, listener: ((Any?) -> Void)?) {
        let function = "listenForMessage(withIdentifier:listener:)"
        guard let identifier else { return }
        stopListeningForMessage(withIdentifier: identifier)
        guard let listener, let wormhole = usable(function, identifier) else { return }
        let call = UncheckedTransfer(listener) // MMWormhole's block: called only on the main queue
        let weakSelf = WeakTransfer(self) // a listener does not keep its wormhole alive
        do throws(WormholeError) {
            let token = try wormhole.listen(for: identifier, queue: .main) { result in
                guard let self = weakSelf.value else { return }
                switch result {
                case .success(let message): call.value(self.decode(message.payload, function, identifier))
                case .failure(let error): NotificationFailures.report(function, name: identifier, error)
                }
            }
            listeners.withLock { $0[identifier] = token }
        } catch {
            NotificationFailures.report(function, name: identifier, error)
        }
    }

    /// Stops the listener of `identifier`.
    open func stopListeningForMessage(withIdentifier identifier: String?) {
        guard let identifier else { return }
        listeners.withLock { $0.removeValue(forKey: identifier) }?.cancel()
    }

    private func usable(_ function: String, _ identifier: String?) -> Wormhole? {
        guard let wormhole else {
            NotificationFailures.report(function, name: identifier, "this wormhole could not be opened (reported when it was made)")
            return nil
        }
        return wormhole
    }

    private func decode(_ payload: Data, _ function: String, _ identifier: String) -> Any? {
        if payload.isEmpty { return nil }
        do throws(UnarchiveRefusal) { return try SafeUnarchiver.decode(payload, allowed: allowedMessageClasses) } catch {
            NotificationFailures.report(function, name: identifier, "message refused: \(error)")
            return nil
        }
    }
}

