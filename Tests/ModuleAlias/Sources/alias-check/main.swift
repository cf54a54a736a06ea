// Both modules in one program: the third party's `DarwinNotify` shim and ours, aliased.
import DarwinNotify
import DarwinNotifyLinux
import notify
#if canImport(Glibc)
import Glibc
#endif

print("shim \(darwin_notify_shim_answer())")
let center = DarwinNotifyLinux.NotifyCenter.default
var token: Int32 = 0
let status = notify_register_check("com.example.alias", &token)
print("notify_register_check \(status) center \(type(of: center))")
exit(status == 0 ? 0 : 1)
