// DistributedNotificationCenter.swift: Apple's NSDistributedNotificationCenter on Linux. A
// notification has a name, an object string and a property-list userInfo, and reaches every
// observer of the scope's bus in any process (docs/PROTOCOL.md "Distributed notifications"); an
// app may suspend delivery, and each observer says what happens to its notifications meanwhile.
import CNotify
import DarwinNotify
import Dispatch
import Foundation
import Synchronization

/// Notifications with an `object` string and a property-list `userInfo`, between processes.
///
/// `DistributedNotificationCenter.default()` is per user, as on macOS: its bus is
/// `DARWIN_NOTIFY_BUS` if set, else the user's session bus (`DBUS_SESSION_BUS_ADDRESS`), else the
/// user's embedded bus. ``init(scope:)`` with `.system` reaches every user of the machine (the
/// system bus), as Apple's `postToAllSessions` does.
///
/// Observers run on the main thread, as on macOS (a block registered with a nil queue, and every
/// selector-form observer), or on the `OperationQueue` they name: a program must let its main
/// thread run them (an app's run loop; a command-line program's `RunLoop.main.run()`,
/// `dispatchMain()`, or an `async` main). While ``suspended`` is true, each observer's
/// ``SuspensionBehavior`` decides: `.drop` loses the notification, `.coalesce` keeps only the last
/// one of each name and object, `.hold` keeps them all (delivered in order on resume; past
/// ``holdLimit`` the held ones are delivered at once, as Apple's server flushes a full queue),
/// and `.deliverImmediately` delivers anyway. A post with `deliverImmediately` is delivered to every
/// observer at once; for a suspended center, what it held is delivered first.
///
/// Posting and registering never throw, as on macOS. What fails here and cannot on macOS (no bus,
/// a bad name) or raises there (a userInfo that is no property list) is reported instead: to the
/// center's ``failureHandler`` if set, else to ``NotificationFailures`` (a line on standard error
/// by default), and counted in ``failureCount``; nothing is sent then, and nothing is lost silently.
///
/// userInfo values arrive as macOS hands them over: numbers and booleans as `NSNumber` (so
/// `as? Double` on an integer, `as? Float`, `as? Int` on a Bool answer as on macOS), strings,
/// data, dates, arrays and dictionaries.
///
/// Differences from Apple's (docs: "Porting NSDistributedNotificationCenter"): it is not a
/// `NotificationCenter` subclass (swift-corelibs-foundation's methods cannot be overridden); the
/// selector form takes a method reference (`Settings.changed`), as Linux Swift has no selectors.
open class DistributedNotificationCenter: @unchecked Sendable {
    // @unchecked Sendable: every mutable part is behind `state` (a Mutex); the rest is let.

    /// What happens to an observer's notifications while the center is suspended.
    public enum SuspensionBehavior: Sendable {
        case drop, coalesce, hold, deliverImmediately
    }

    /// Options of a post.
    public struct Options: OptionSet, Sendable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }
        /// Delivered at once to every observer, suspended or not.
        public static let deliverImmediately = Options(rawValue: 1)
        /// Posted on the system bus too, to the observers of every user (``Scope/system``), or on the
        /// bus ``init(bus:allSessionsBus:)`` names.
        public static let postToAllSessions = Options(rawValue: 2)
    }

    /// Whose processes a center reaches.
    public enum Scope: Sendable {
        /// This user's processes: `DARWIN_NOTIFY_BUS`, else the session bus, else the embedded bus.
        case user
        /// Every user's processes on this machine: the system bus.
        case system
    }

    /// The bounds of a userInfo (docs/PROTOCOL.md): its weight (8 bytes a value, plus the bytes of
    /// each string, data and key) and how deep its containers nest.
    public static let userInfoMaximumBytes = Int(CNOTIFY_PLIST_MAX_BYTES)
    public static let userInfoMaximumDepth = Int(CNOTIFY_PLIST_MAX_DEPTH)
    /// Held notifications (`.hold` and `.coalesce`, while suspended) past which they are delivered.
    public static let holdLimit = 4096

    /// The Darwin center underneath: its bus, its connection (nil for a default center whose bus
    /// could not be used: then every post and registration throws `unusable`).
    public let notifyCenter: NotifyCenter?
    private let unusable: DistributedNotificationError?
    private let scope: Scope?
    /// Where `.postToAllSessions` posts as well: the system bus for a user-scope center, nil for a
    /// center that is system-wide already.
    private let allSessionsBus: String?
    /// One serial queue delivers everything: suspension, resume and removal keep one order.
    private let deliveryQueue = DispatchQueue(label: "DarwinNotify.distributed")
    private let state = Mutex(State())
    private let allSessions = Mutex<DistributedNotificationCenter?>(nil)

    private static let shared = Mutex<DistributedNotificationCenter?>(nil)
    private let failures = Mutex(Failures())

    private struct Failures {
        var handler: (@Sendable (DistributedNotificationError) -> Void)?
        var count = 0
    }

    /// Called with what went wrong when a post or a registration of this center failed (nothing
    /// was sent, or nothing will be delivered to that observer). Unset, the failure goes to
    /// ``NotificationFailures``.
    public var failureHandler: (@Sendable (DistributedNotificationError) -> Void)? {
        get { failures.withLock { $0.handler } }
        set { failures.withLock { $0.handler = newValue } }
    }

    /// How many posts and registrations of this center failed.
    public var failureCount: Int { failures.withLock { $0.count } }

    private func report(_ error: DistributedNotificationError, _ function: String, name: Notification.Name?) {
        let handler = failures.withLock { f -> (@Sendable (DistributedNotificationError) -> Void)? in
            f.count += 1
            return f.handler
        }
        if let handler { handler(error) } else { NotificationFailures.report(function, name: name?.rawValue, error) }
    }

    /// The process's center of the user scope, made on first use.
    /// - Note: if no bus can be reached the center is still returned; each of its posts and
    ///   observers then fails with the reason (`.notify`), reported as ``failureHandler`` says.
    open class func `default`() -> DistributedNotificationCenter {
        shared.withLock { center in
            if let center { return center }
            let made: DistributedNotificationCenter
            do throws(DistributedNotificationError) { made = try DistributedNotificationCenter(scope: .user) } catch {
                made = DistributedNotificationCenter(unusable: error)
            }
            center = made
            return made
        }
    }

    /// A center for `scope` (see ``Scope``).
    public init(scope: Scope) throws(DistributedNotificationError) {
        self.scope = scope
        self.allSessionsBus = scope == .user ? "system" : nil
        self.notifyCenter = try Self.makeCenter(bus: Self.bus(of: scope))
        self.unusable = nil
    }

    /// A center on an explicit bus: a D-Bus address, or `session`, `system`, `embedded`.
    /// `.postToAllSessions` posts on `allSessionsBus` as well (by default the system bus; nothing
    /// more when `bus` is the system bus itself).
    public init(bus: String, allSessionsBus: String? = nil) throws(DistributedNotificationError) {
        self.scope = nil
        self.allSessionsBus = bus == "system" ? allSessionsBus : (allSessionsBus ?? "system")
        self.notifyCenter = try Self.makeCenter(bus: bus)
        self.unusable = nil
    }

    /// A default center whose bus cannot be used (a malformed `DARWIN_NOTIFY_BUS`): every use
    /// throws why, rather than quietly using another bus.
    private init(unusable: DistributedNotificationError) {
        self.scope = .user
        self.allSessionsBus = "system"
        self.notifyCenter = nil
        self.unusable = unusable
    }

    /// The C center, or why there is none.
    private func cCenter() throws(DistributedNotificationError) -> OpaquePointer {
        guard let notifyCenter else { throw unusable ?? DistributedNotificationError(.notify, "no bus") }
        return notifyCenter.cCenter
    }

    private static func bus(of scope: Scope) -> String {
        switch scope {
        case .system: return "system"
        case .user:
            let environment = ProcessInfo.processInfo.environment
            if let bus = environment["DARWIN_NOTIFY_BUS"], !bus.isEmpty { return bus }
            if let session = environment["DBUS_SESSION_BUS_ADDRESS"], !session.isEmpty { return "session" }
            return "embedded"
        }
    }

    private static func makeCenter(bus: String) throws(DistributedNotificationError) -> NotifyCenter {
        do { return try NotifyCenter(bus: bus) } catch {
            throw DistributedNotificationError(.notify, "cannot use the bus \(bus): \(error)", status: error.code.rawValue)
        }
    }

    // MARK: Suspension

    /// Whether delivery is suspended: what arrives meanwhile follows each observer's
    /// ``SuspensionBehavior``. Setting it to false delivers what was held, in order.
    open var suspended: Bool {
        get { state.withLock { $0.suspended } }
        set {
            // What was held is queued under the lock: a notification that arrives once it is
            // released (not suspended any more) is queued after it, never before.
            state.withLock { s in
                defer { s.suspended = newValue }
                guard s.suspended && !newValue else { return }
                let held = Self.takeHeld(&s)
                if !held.isEmpty { deliveryQueue.async { for (r, note) in held { self.run(r, note) } } }
            }
        }
    }

    /// Apple's spelling of ``suspended``.
    open func setSuspended(_ suspended: Bool) { self.suspended = suspended }

    // MARK: Posting

    /// Posts `name` with `object` and `userInfo` to every observer of the center's scope. Nothing
    /// is sent when the userInfo is no property list (`.notPropertyList`, `.keyNotString`, with
    /// the key path) or is past the bounds (`.outOfBounds`), or for a bad name or no bus
    /// (`.notify`): that is reported (``failureHandler``). With `.postToAllSessions`, a post that
    /// reached this center's bus and not the system bus is reported too, and not taken back.
    open func postNotificationName(_ name: Notification.Name, object: String?, userInfo: [AnyHashable: Any]? = nil,
                                   options: Options = []) {
        do throws(DistributedNotificationError) { try send(name, object: object, userInfo: userInfo, options: options) } catch {
            report(error, "postNotificationName", name: name)
        }
    }

    /// Apple's form with `deliverImmediately`.
    open func postNotificationName(_ name: Notification.Name, object: String?, userInfo: [AnyHashable: Any]? = nil,
                                   deliverImmediately: Bool) {
        postNotificationName(name, object: object, userInfo: userInfo, options: deliverImmediately ? .deliverImmediately : [])
    }

    /// Apple's `post(name:object:userInfo:deliverImmediately:)`.
    open func post(name: Notification.Name, object: String?, userInfo: [AnyHashable: Any]? = nil, deliverImmediately: Bool) {
        postNotificationName(name, object: object, userInfo: userInfo, deliverImmediately: deliverImmediately)
    }

    /// Posts `notification` (its object must be a String, or nil).
    open func post(_ notification: Notification) {
        post(name: notification.name, object: notification.object, userInfo: notification.userInfo)
    }

    /// NotificationCenter's form: `object` must be a String (or nil); another object is reported
    /// (`.notPropertyList`, path "object") and nothing is sent.
    open func post(name: Notification.Name, object: Any?, userInfo: [AnyHashable: Any]? = nil) {
        do throws(DistributedNotificationError) {
            try send(name, object: try Self.objectString(object), userInfo: userInfo, options: [])
        } catch {
            report(error, "post(name:object:userInfo:)", name: name)
        }
    }

    /// A post with its failure thrown (the bridge's exports; an `object` that is no String fails).
    package func checkedPost(name: Notification.Name, object: Any?, userInfo: [AnyHashable: Any]?,
                             options: Options = []) throws(DistributedNotificationError) {
        try send(name, object: try Self.objectString(object), userInfo: userInfo, options: options)
    }

    /// The post itself, with its failure thrown.
    private func send(_ name: Notification.Name, object: String?, userInfo: [AnyHashable: Any]?,
                      options: Options) throws(DistributedNotificationError) {
        let tree = try userInfo.map { (info) throws(DistributedNotificationError) in try PropertyListTree.make(info) }
        var cOptions: UInt32 = 0
        if options.contains(.deliverImmediately) { cOptions |= UInt32(CNOTIFY_DISTRIBUTED_DELIVER_IMMEDIATELY) }
        let status = CNotify_distributed_post(try cCenter(), name.rawValue, object, tree?.pointer, cOptions)
        guard status == UInt32(NOTIFY_STATUS_OK) else {
            throw DistributedNotificationError(.notify, String(cString: CNotify_last_error()), status: status)
        }
        if options.contains(.postToAllSessions), let allSessionsBus {
            do throws(DistributedNotificationError) {
                try allSessionsCenter(allSessionsBus).send(name, object: object, userInfo: userInfo,
                                                           options: options.subtracting(.postToAllSessions))
            } catch {
                throw DistributedNotificationError(error.code, path: error.path,
                                                   "posted on this center's bus, but not for all sessions (\(allSessionsBus)): \(error.message)",
                                                   status: error.status)
            }
        }
    }

    private static func objectString(_ object: Any?) throws(DistributedNotificationError) -> String? {
        guard let object else { return nil }
        if let text = object as? String { return text }
        throw DistributedNotificationError(.notPropertyList, path: "object",
                                           "a distributed notification's object is a String (this one is \(type(of: object)))")
    }

    private func allSessionsCenter(_ bus: String) throws(DistributedNotificationError) -> DistributedNotificationCenter {
        if let made = allSessions.withLock({ $0 }) { return made }
        let made = try DistributedNotificationCenter(bus: bus, allSessionsBus: nil)
        return allSessions.withLock { current in
            if let current { return current }
            current = made
            return made
        }
    }

    // MARK: Observing

    /// Where an observer runs.
    package enum Delivery: Sendable {
        /// The main thread (Apple's for a nil queue and for selector-form observers).
        case main
        /// The observer's own queue.
        case operations(OperationQueue)
        /// The center's serial delivery queue, with no hop (the bridge, the benchmark).
        case deliveryQueue
    }

    /// Calls `block` for each notification named `name` (nil: every name) whose object is
    /// `object` (nil: any; else a String), on `queue` (nil: the main thread, as on macOS), with
    /// the `.coalesce` behaviour while suspended (Apple's default). Remove it with
    /// `removeObserver(_:)`. A registration that fails (no bus; `object` no String) is reported
    /// (``failureHandler``) and its token delivers nothing.
    open func addObserver(forName name: Notification.Name?, object: Any?, queue: OperationQueue?,
                          using block: @escaping @Sendable (Notification) -> Void) -> NSObjectProtocol {
        do throws(DistributedNotificationError) {
            return try observe(name, object: try Self.objectString(object), behavior: .coalesce,
                               delivery: queue.map { .operations($0) } ?? .main, skippingOwnPosts: false, using: block)
        } catch {
            report(error, "addObserver(forName:object:queue:using:)", name: name)
            return DistributedObserverToken(center: nil, id: 0)
        }
    }

    /// The block form with a suspension behaviour (`queue` nil: the main thread).
    open func addObserver(forName name: Notification.Name?, object: String?, suspensionBehavior: SuspensionBehavior,
                          queue: OperationQueue? = nil,
                          using block: @escaping @Sendable (Notification) -> Void) -> NSObjectProtocol {
        do throws(DistributedNotificationError) {
            return try observe(name, object: object, behavior: suspensionBehavior, delivery: queue.map { .operations($0) } ?? .main,
                               skippingOwnPosts: false, using: block)
        } catch {
            report(error, "addObserver(forName:object:suspensionBehavior:queue:using:)", name: name)
            return DistributedObserverToken(center: nil, id: 0)
        }
    }

    /// A registration with its failure thrown, delivered as `delivery` says; `skippingOwnPosts`
    /// leaves out what this very center posted (the bridge's exports).
    package func observe(_ name: Notification.Name?, object: String?, behavior: SuspensionBehavior, delivery: Delivery,
                         skippingOwnPosts: Bool,
                         using block: @escaping @Sendable (Notification) -> Void) throws(DistributedNotificationError) -> NSObjectProtocol {
        let id = try register(name: name, object: object, behavior: behavior, owner: nil, skipOwn: skippingOwnPosts,
                              deliver: Self.deliverer(delivery, block))
        return DistributedObserverToken(center: self, id: id)
    }

    /// `block` as a delivery runs it: on the delivery queue, or handed to the main queue or an
    /// OperationQueue from there (the gate of its registration is checked again where it runs).
    private static func deliverer(_ delivery: Delivery, _ block: @escaping @Sendable (Notification) -> Void)
        -> @Sendable (Notification, InvocationGate) -> Void {
        switch delivery {
        case .deliveryQueue:
            return { note, _ in block(note) }
        case .main:
            return { note, gate in
                let carried = UncheckedTransfer(note) // made on the delivery queue, read only on the main queue
                DispatchQueue.main.async { gate.run { block(carried.value) } }
            }
        case .operations(let queue):
            let box = UncheckedTransfer(queue) // OperationQueue is thread-safe; only addOperation is called
            return { note, gate in
                let carried = UncheckedTransfer(note)
                box.value.addOperation { gate.run { block(carried.value) } }
            }
        }
    }

    /// Apple's selector form, with a method reference for the selector (Linux Swift has none):
    /// `center.addObserver(self, selector: Settings.changed, name: .settings, object: nil,
    /// suspensionBehavior: .hold)`. Runs on the main thread, as on macOS. The observer is held
    /// weakly; once it is gone its registrations deliver nothing and go. A registration that fails
    /// is reported (``failureHandler``).
    open func addObserver<Observer: AnyObject>(_ observer: Observer, selector: @escaping (Observer) -> (Notification) -> Void,
                                               name: Notification.Name?, object: String?,
                                               suspensionBehavior: SuspensionBehavior = .coalesce) {
        let weakObserver = WeakTransfer(observer)
        let method = UncheckedTransfer(selector) // called only on the main thread
        let call: @Sendable (Notification) -> Void = { note in
            guard let target = weakObserver.value else { return }
            method.value(target)(note)
        }
        do throws(DistributedNotificationError) {
            _ = try register(name: name, object: object, behavior: suspensionBehavior, owner: ObjectIdentifier(observer), skipOwn: false,
                             isAlive: { weakObserver.value != nil }, deliver: Self.deliverer(.main, call))
        } catch {
            report(error, "addObserver(_:selector:name:object:suspensionBehavior:)", name: name)
        }
    }

    /// The notifications named `name` (and posted with `object`, a String, if given) as an async
    /// sequence, as `NotificationCenter.notifications(named:object:)` gives them; ending the
    /// iteration removes the observer. Held while suspended as `.coalesce` says.
    public func notifications(named name: Notification.Name, object: AnyObject? = nil) -> Notifications {
        let (stream, continuation) = AsyncStream<UncheckedTransfer<Notification>>.makeStream(bufferingPolicy: .unbounded)
        do throws(DistributedNotificationError) {
            let token = try observe(name, object: try Self.objectString(object), behavior: .coalesce, delivery: .deliveryQueue,
                                    skippingOwnPosts: false) { note in continuation.yield(UncheckedTransfer(note)) }
            let tokenBox = UncheckedTransfer(token as AnyObject)
            continuation.onTermination = { [weak self] _ in self?.removeObserver(tokenBox.value) }
        } catch {
            report(error, "notifications(named:object:)", name: name)
            continuation.finish()
        }
        return Notifications(stream: stream)
    }

    /// The async sequence of ``notifications(named:object:)``.
    public struct Notifications: AsyncSequence {
        public typealias Element = Notification
        let stream: AsyncStream<UncheckedTransfer<Notification>>
        public struct AsyncIterator: AsyncIteratorProtocol {
            var base: AsyncStream<UncheckedTransfer<Notification>>.Iterator
            public mutating func next() async -> Notification? { await base.next()?.value }
        }
        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: stream.makeAsyncIterator()) }
    }

    /// Removes a block registration (its token), or every registration of a selector-form
    /// observer. Once this returns, none of them runs again (unless called from inside one).
    open func removeObserver(_ observer: Any) {
        removeObserver(observer, name: nil, object: nil)
    }

    /// As ``removeObserver(_:)``, only the registrations of `aName` (nil: any) and `anObject`
    /// (nil: any).
    open func removeObserver(_ observer: Any, name aName: Notification.Name?, object anObject: Any?) {
        let object = anObject as? String
        let removed: [Registration] = state.withLock { s in
            let matching = s.observers.values.filter { r in
                let isIt: Bool
                if let token = observer as? DistributedObserverToken { isIt = token.id == r.id }
                else if let owner = r.owner, let object = observer as AnyObject? { isIt = owner == ObjectIdentifier(object) }
                else { isIt = false }
                return isIt && (aName == nil || r.name == aName?.rawValue) && (object == nil || r.object == object)
            }
            for r in matching {
                s.observers[r.id] = nil
                s.held.removeAll { $0.registration == r.id }
            }
            return matching
        }
        for r in removed { finish(r) }
    }

    // MARK: Statistics

    /// What this center's connection saw (`CNotify_distributed_get_stats`).
    public var statistics: DistributedNotificationStatistics {
        var s = CNotify_distributed_stats()
        if let center = notifyCenter?.cCenter { CNotify_distributed_get_stats(center, &s) }
        return DistributedNotificationStatistics(received: s.received, delivered: s.delivered, dropped: s.dropped, gaps: s.gaps)
    }

    // MARK: The machinery

    private struct Registration: Sendable {
        let id: Int
        /// The registration in the C core, through DarwinNotify's Foundation-free API.
        let observation: DarwinNotify.DistributedObservation
        let name: String?
        let object: String?
        let behavior: SuspensionBehavior
        let owner: ObjectIdentifier?
        let gate: InvocationGate
        /// False once a selector-form observer is gone: the registration is removed at its next delivery.
        let isAlive: @Sendable () -> Bool
        let deliver: @Sendable (Notification, InvocationGate) -> Void
    }

    private struct Held {
        let registration: Int
        let note: UncheckedTransfer<Notification>
        let name: String
        let object: String?
    }

    private struct State {
        var suspended = false
        var observers: [Int: Registration] = [:]
        var held: [Held] = []
        var nextID = 1
    }

    /// A C distributed handler whose arrivals go to the delivery queue, and its registration.
    private func register(name: Notification.Name?, object: String?, behavior: SuspensionBehavior, owner: ObjectIdentifier?,
                          skipOwn: Bool, isAlive: @escaping @Sendable () -> Bool = { true },
                          deliver: @escaping @Sendable (Notification, InvocationGate) -> Void) throws(DistributedNotificationError) -> Int {
        let id = state.withLock { s in defer { s.nextID += 1 }; return s.nextID }
        let weakSelf = WeakTransfer(self)
        guard let notifyCenter else { throw unusable ?? DistributedNotificationError(.notify, "no bus") }
        let observation: DarwinNotify.DistributedObservation
        do throws(NotifyError) {
            observation = try notifyCenter.observeDistributed(name?.rawValue, object: object) { note in
                if skipOwn && note.isFromThisCenter { return }
                guard let center = weakSelf.value else { return }
                center.arrived(DistributedArrival(note), at: id) // held or queued before the C core counts it delivered
            }
        } catch {
            throw DistributedNotificationError(.notify, "cannot observe: \(error)", status: error.code.rawValue)
        }
        let registration = Registration(id: id, observation: observation, name: name?.rawValue, object: object, behavior: behavior,
                                        owner: owner, gate: InvocationGate(), isAlive: isAlive, deliver: deliver)
        state.withLock { $0.observers[id] = registration }
        return id
    }

    /// On the connection's thread, as the C core hands it over: held at once if the center is
    /// suspended (so a notification the C core counted is held before `suspended = false` can
    /// run: the statistics and the suspension agree), else queued for delivery in arrival order.
    /// Before, the decision waited for the delivery queue, and a resume that came meanwhile let
    /// notifications that had arrived while suspended through one by one.
    private func arrived(_ arrival: DistributedArrival, at id: Int) {
        let note = UncheckedTransfer(Notification(name: Notification.Name(arrival.name), object: arrival.object,
                                             userInfo: arrival.userInfo.value))
        let deliveries: [(Registration, UncheckedTransfer<Notification>)] = state.withLock { s in
            guard let r = s.observers[id] else { return [] }
            if !s.suspended { return [(r, note)] }
            if arrival.deliverImmediately || r.behavior == .deliverImmediately {
                return Self.takeHeld(&s) + [(r, note)] // what was held first, as Apple flushes it
            }
            let held = Held(registration: id, note: note, name: arrival.name, object: arrival.object)
            switch r.behavior {
            case .drop: return []
            case .coalesce:
                s.held.removeAll { $0.registration == id && $0.name == arrival.name && $0.object == arrival.object }
                s.held.append(held)
            case .hold, .deliverImmediately:
                s.held.append(held)
            }
            return s.held.count > Self.holdLimit ? Self.takeHeld(&s) : []
        }
        if !deliveries.isEmpty { deliveryQueue.async { for (r, n) in deliveries { self.run(r, n) } } }
    }

    /// Everything held, in order, with its registration (those removed meanwhile are gone already).
    private static func takeHeld(_ s: inout State) -> [(Registration, UncheckedTransfer<Notification>)] {
        defer { s.held.removeAll() }
        return s.held.compactMap { h in s.observers[h.registration].map { ($0, h.note) } }
    }

    /// Notifications are made and read on the delivery queue only (UncheckedTransfer carries them out of
    /// the lock), or handed whole to an observer's OperationQueue.
    private func run(_ r: Registration, _ note: UncheckedTransfer<Notification>) {
        guard r.isAlive() else { // its observer is gone: so is the registration
            let removed = state.withLock { s -> Bool in
                s.held.removeAll { $0.registration == r.id }
                return s.observers.removeValue(forKey: r.id) != nil
            }
            if removed { finish(r) }
            return
        }
        let current = state.withLock { $0.observers[r.id] != nil }
        if current { r.gate.run { r.deliver(note.value, r.gate) } }
    }

    /// A removed registration: the C handler goes, and a running delivery is waited for (not one
    /// on this very queue: that is a removal from inside an observer).
    private func finish(_ r: Registration) {
        r.observation.cancel()
        r.gate.close()
    }

    deinit {
        let all = state.withLock { s -> [Registration] in defer { s.observers.removeAll(); s.held.removeAll() }; return Array(s.observers.values) }
        for r in all { r.observation.cancel() }
    }
}

/// What the center's connection saw.
public struct DistributedNotificationStatistics: Sendable, Equatable {
    /// Distributed posts that reached this process.
    public let received: UInt64
    /// Observer invocations in the C core (before suspension).
    public let delivered: UInt64
    /// Posts dropped as malformed or past the bounds (from foreign or hostile posters).
    public let dropped: UInt64
    /// Posts missing from a poster's numbering of a name.
    public let gaps: UInt64
}

/// A block registration's token (`removeObserver` takes it).
final class DistributedObserverToken: NSObject, @unchecked Sendable {
    // @unchecked Sendable: both fields are set once in init.
    weak var center: DistributedNotificationCenter?
    let id: Int
    init(center: DistributedNotificationCenter?, id: Int) {
        self.center = center
        self.id = id
    }
}

/// A notification as the C handler hands it over, made Swift on the delivery thread.
struct DistributedArrival: Sendable {
    let name: String
    let object: String?
    let userInfo: UncheckedTransfer<[AnyHashable: Any]?>
    let deliverImmediately: Bool
    let fromThisCenter: Bool
}


extension DistributedArrival {
    /// The note into Swift values, on the delivery thread, inside the handler (where its userInfo lives).
    init(_ note: DistributedNote) {
        self.init(name: note.name, object: note.object,
                  userInfo: UncheckedTransfer(note.withUnsafeNote { $0.pointee.user_info }.map { PropertyListTree.userInfo($0) }),
                  deliverImmediately: note.deliverImmediately, fromThisCenter: note.isFromThisCenter)
    }
}
