#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import SystemPackage

/// The Linux counterpart of `FileManager.containerURL(forSecurityApplicationGroupIdentifier:)`:
/// a directory that every cooperating process of a group finds by the group's identifier.
///
/// Where it is, first match wins:
/// 1. an explicit directory (`GroupContainer(group:directory:)`, `wormhole --container`);
/// 2. `$DARWIN_NOTIFY_CONTAINER_ROOT/<group>`;
/// 3. `$XDG_DATA_HOME/darwin-notify/group-containers/<group>` (`~/.local/share/…` by default).
///
/// A private container is created 0700. A shared one (`sharing: .unixGroup`) is created setgid
/// and group-writable (2770) with that group, so processes of several users in the group can
/// talk, as an App Group spans a team's apps. A container that is a symlink, not a directory,
/// owned by someone else (unless shared through its group), or writable beyond its owner and
/// group is refused on every open.
public struct GroupContainer: Sendable, Equatable {
    public enum Sharing: Sendable, Equatable {
        /// Only this user (0700).
        case privateToUser
        /// Every member of this Unix group (2770, group-owned by it).
        case unixGroup(String)
    }

    public let group: String
    public let path: String
    public let sharing: Sharing

    /// Finds (creating if needed) and checks the container of `group`.
    /// - Throws: `.invalidGroup`, `.unsafeContainer`, `.io`.
    public init(group: String, directory: String? = nil, sharing: Sharing = .privateToUser,
                environment: [String: String] = ProcessInfo.processInfo.environment) throws(WormholeError) {
        try Names.validateGroup(group)
        self.group = group
        self.sharing = sharing
        let path: FilePath
        if let directory {
            guard !directory.isEmpty else { throw WormholeError(.unsafeContainer, "container directory is empty") }
            path = GroupContainer.absolute(FilePath(directory))
        } else {
            path = try GroupContainer.root(environment).appending(group)
        }
        self.path = path.string
        let gid = try GroupContainer.groupID(of: sharing)
        do {
            try PosixFiles.makeDirectories(path.removingLastComponent(), permissions: [.ownerReadWriteExecute])
            try GroupContainer.create(path, gid: gid)
        } catch where error.code == .io && directory == nil {
            // Most often an unwritable or missing HOME (a service account, a read-only image).
            throw WormholeError(.io, "cannot create the group container \(path): \(error.message); set DARWIN_NOTIFY_CONTAINER_ROOT to a writable directory, or pass --container DIR (API: GroupContainer(group:directory:))", underlying: error.underlying)
        }
        try GroupContainer.checkSafe(path, gid: gid)
    }

    /// Where the container of `group` is when no directory is given (not created, not checked).
    public static func defaultPath(for group: String,
                                   environment: [String: String] = ProcessInfo.processInfo.environment) throws(WormholeError) -> String {
        try Names.validateGroup(group)
        return try root(environment).appending(group).string
    }

    /// The directory containers live in (not created here).
    static func root(_ environment: [String: String]) throws(WormholeError) -> FilePath {
        if let root = environment["DARWIN_NOTIFY_CONTAINER_ROOT"], !root.isEmpty {
            return absolute(FilePath(root))
        }
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            return FilePath(data).appending(["darwin-notify", "group-containers"])
        }
        guard let home = environment["HOME"], home.hasPrefix("/") else {
            throw WormholeError(.unsafeContainer, "cannot find a place for group containers: set XDG_DATA_HOME, HOME or DARWIN_NOTIFY_CONTAINER_ROOT")
        }
        return FilePath(home).appending([".local", "share", "darwin-notify", "group-containers"])
    }

    private static func absolute(_ path: FilePath) -> FilePath {
        if path.isAbsolute { return path.lexicallyNormalized() }
        return FilePath(FileManager.default.currentDirectoryPath).pushing(path).lexicallyNormalized()
    }

    static func groupID(of sharing: Sharing) throws(WormholeError) -> gid_t? {
        guard case .unixGroup(let name) = sharing else { return nil }
        guard let entry = getgrnam(name) else {
            throw WormholeError(.unsafeContainer, "no Unix group named '\(name)'")
        }
        return entry.pointee.gr_gid
    }

    /// 0700, or 2770 with the sharing group.
    static func permissions(shared: Bool) -> FilePermissions {
        shared ? [.ownerReadWriteExecute, .groupReadWriteExecute, .setGroupID] : [.ownerReadWriteExecute]
    }

    private static func create(_ path: FilePath, gid: gid_t?) throws(WormholeError) {
        guard mkdir(path.string, 0o700) == 0 else {
            if errno == EEXIST { return }
            throw .io("mkdir \(path)", Errno(rawValue: errno))
        }
        if let gid, chown(path.string, uid_t.max, gid) != 0 {
            throw .io("chown :\(gid) \(path)", Errno(rawValue: errno))
        }
        if chmod(path.string, permissions(shared: gid != nil).rawValue) != 0 {
            throw .io("chmod \(path)", Errno(rawValue: errno))
        }
    }

    /// Refuses a container another local user could tamper with.
    static func checkSafe(_ path: FilePath, gid: gid_t?) throws(WormholeError) {
        var info = stat()
        guard lstat(path.string, &info) == 0 else { throw .io("lstat \(path)", Errno(rawValue: errno)) }
        let type = info.st_mode & S_IFMT
        if type == S_IFLNK {
            throw WormholeError(.unsafeContainer, "container \(path) is a symbolic link; refusing it (remove it, or pass the real directory)")
        }
        guard type == S_IFDIR else {
            throw WormholeError(.unsafeContainer, "container \(path) is not a directory")
        }
        let mode = info.st_mode & 0o7777
        if mode & 0o002 != 0 {
            if mode & 0o1000 != 0 { // sticky and world-writable: a shared place such as /tmp, not a container
                throw WormholeError(.unsafeContainer,
                    "\(path) is a directory every user may write in (mode \(String(mode, radix: 8)), like /tmp), not a container; use a directory of your own, such as --container \(path.appending("my-group"))")
            }
            throw WormholeError(.unsafeContainer,
                "container \(path) is writable by every user (mode \(String(mode, radix: 8))); run chmod o-w on it")
        }
        if let gid {
            guard info.st_gid == gid else {
                throw WormholeError(.unsafeContainer, "container \(path) belongs to group \(info.st_gid), not the sharing group \(gid)")
            }
            guard info.st_uid == geteuid() || isMember(of: gid) else {
                throw WormholeError(.unsafeContainer, "container \(path) is shared with group \(gid), and this process is not in it")
            }
        } else {
            // Made with --share-with-group (setgid, group-writable): say how to open it.
            if mode & 0o2070 == 0o2070, info.st_uid != geteuid() || mode & 0o020 != 0 {
                let name = getgrgid(info.st_gid).map { String(cString: $0.pointee.gr_name) } ?? String(info.st_gid)
                throw WormholeError(.unsafeContainer,
                    "container \(path) is shared with group '\(name)' (mode \(String(mode, radix: 8))); open it as shared: --share-with-group \(name) (API: sharing: .unixGroup(\"\(name)\"))")
            }
            guard info.st_uid == geteuid() else {
                throw WormholeError(.unsafeContainer,
                    "container \(path) is owned by uid \(info.st_uid), not by this user (\(geteuid())); refusing it")
            }
            if mode & 0o020 != 0 {
                throw WormholeError(.unsafeContainer,
                    "container \(path) is group-writable (mode \(String(mode, radix: 8))) but not shared; run chmod g-w, or share it with its group")
            }
        }
    }

    /// A directory inside a container (the wormhole's own, messages/, queues/<id>/, …) is held
    /// to the container's rules: a real directory that nobody outside the owner (and the sharing
    /// group) may write, whoever made it.
    static func checkSubdirectory(_ path: FilePath, shared: Bool) throws(WormholeError) {
        var info = stat()
        guard lstat(path.string, &info) == 0 else { throw .io("lstat \(path)", Errno(rawValue: errno)) }
        let type = info.st_mode & S_IFMT
        guard type == S_IFDIR else {
            throw WormholeError(.unsafeContainer, "\(path) is \(type == S_IFLNK ? "a symbolic link" : "not a directory"); refusing it (remove it)")
        }
        let mode = info.st_mode & 0o7777
        if mode & 0o002 != 0 {
            throw WormholeError(.unsafeContainer,
                "\(path) is writable by every user (mode \(String(mode, radix: 8))); run chmod o-w on it")
        }
        if !shared {
            guard info.st_uid == geteuid() else {
                throw WormholeError(.unsafeContainer, "\(path) is owned by uid \(info.st_uid), not by this user (\(geteuid())); refusing it")
            }
            if mode & 0o020 != 0 {
                throw WormholeError(.unsafeContainer, "\(path) is group-writable (mode \(String(mode, radix: 8))) but the container is not shared; run chmod g-w on it")
            }
        }
    }

    private static func isMember(of gid: gid_t) -> Bool {
        if getegid() == gid { return true }
        let count = getgroups(0, nil)
        guard count > 0 else { return false }
        var groups = [gid_t](repeating: 0, count: Int(count))
        let n = getgroups(count, &groups)
        return groups.prefix(Int(max(n, 0))).contains(gid)
    }
}
