# Makefile: DarwinNotify built and installed the way Linux C libraries are.
#
#   make                      the C library (shared, with a SONAME, and static), darwin-notify.pc,
#                             man pages, units and completions; the CLIs (swift build -c release)
#   make lib                  only the C library and darwin-notify.pc (no Swift toolchain needed)
#   make install PREFIX=/usr DESTDIR=/tmp/root
#                             builds nothing with Swift: `make` first, as yourself, then
#                             `sudo make install` (sudo's PATH has no swift); ldconfig when
#                             DESTDIR is empty
#   make uninstall PREFIX=/usr DESTDIR=/tmp/root
#                             removes every file and every directory install made
#   make deb                  the Debian packages (debian/, dpkg-buildpackage) into build/deb/
#   make check-symbols        the exported symbols, checked against the headers and the map
#
# Why make: a C user expects `make && make install PREFIX=… DESTDIR=…`, and the library is a
# dozen C files with one dependency (libdbus-1, found with pkg-config): nothing that would repay
# meson's extra build dependency. The Swift parts are SwiftPM's, which this file only calls.
# WITH_CLI=0 skips them (a machine without Swift still gets the library).

VERSION     := $(shell cat VERSION)
MAJOR       := $(word 1,$(subst ., ,$(VERSION)))
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
SBINDIR     ?= $(PREFIX)/sbin
LIBEXECDIR  ?= $(PREFIX)/libexec
LIBDIR      ?= $(PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
DATADIR     ?= $(PREFIX)/share
MANDIR      ?= $(DATADIR)/man
# systemd and tmpfiles.d look in $(PREFIX)/lib, whatever the multiarch library directory.
UNITDIR     ?= $(PREFIX)/lib/systemd/user
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
SYSTEMUNITDIR ?= $(PREFIX)/lib/systemd/system
# notify.conf(5) is read from /etc/darwin-notify whatever PREFIX (the library reads it there).
CONFDIR     ?= /etc/darwin-notify
# Where the system reads them, whatever PREFIX: dbus-daemon reads policies from /usr/share and
# /etc only; Debian's zsh reads vendor-completions under /usr and site-functions elsewhere.
DBUSPOLICYDIR ?= $(if $(filter /usr,$(PREFIX)),$(DATADIR)/dbus-1/system.d,/etc/dbus-1/system.d)
ZSHDIR      ?= $(if $(filter /usr,$(PREFIX)),$(DATADIR)/zsh/vendor-completions,$(DATADIR)/zsh/site-functions)
BASHCOMPDIR ?= $(DATADIR)/bash-completion/completions
FISHDIR     ?= $(DATADIR)/fish/vendor_completions.d
DOCDIR      ?= $(DATADIR)/doc/darwin-notify
WITH_CLI    ?= 1

CFLAGS      ?= -O2 -g
BUILD       ?= build
LIBNAME     := libdarwin-notify
REALNAME    := $(LIBNAME).so.$(VERSION)
SONAME      := $(LIBNAME).so.$(MAJOR)
DBUS_CFLAGS := $(shell pkg-config --cflags dbus-1)
DBUS_LIBS   := $(shell pkg-config --libs dbus-1)
LIB_CFLAGS  := $(CFLAGS) -std=gnu11 -fPIC -Wall -D_GNU_SOURCE -DDARWIN_NOTIFY_VERSION='"$(VERSION)"' \
               $(CPPFLAGS) $(DBUS_CFLAGS)

SRCS := $(wildcard Shims/CNotify/*/*.c Shims/CNotify/transport/*/*.c)
OBJS := $(patsubst Shims/CNotify/%.c,$(BUILD)/obj/%.o,$(SRCS))
HEADERS := Shims/CNotify/include/notify.h Shims/CNotify/include/notify_keys.h Shims/CNotify/include/darwin_notify.h Shims/CNotify/include/darwin_notify_distributed.h
MANPAGES := $(wildcard man/*.1 man/*.3 man/*.5 man/*.7 man/*.8)
CLIS := notifyutil wormhole notify-bridge distnotify
# The Swift executables; notifyutil itself is a C front door (Sources/notifyutil/main.c) that
# runs posts and execs notifyutil-full, installed in LIBEXECDIR, for every other command line.
SWIFT_CLIS := notifyutil-full wormhole notify-bridge distnotify
NOTIFYUTIL_FULL := $(LIBEXECDIR)/darwin-notify/notifyutil-full

.PHONY: all lib cli data FORCE install install-check install-lib install-cli install-data uninstall deb clean check-symbols

all: lib data $(if $(filter 1,$(WITH_CLI)),cli)

lib: $(BUILD)/$(REALNAME) $(BUILD)/$(LIBNAME).a $(BUILD)/darwin-notify.pc $(BUILD)/darwin-notifyd

$(BUILD)/obj/%.o: Shims/CNotify/%.c $(wildcard Shims/CNotify/*/*.h Shims/CNotify/transport/*/*.h) $(HEADERS) VERSION
	@grep -q '"$(VERSION)"' Shims/CNotify/base/version_number.h || { \
	    echo "VERSION says $(VERSION) but Shims/CNotify/base/version_number.h does not: set both"; exit 1; }
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -c $< -o $@

# Only notify_* and CNotify_* are exported (packaging/libdarwin-notify.map): the cn_* functions
# the core's files share stay inside.
$(BUILD)/$(REALNAME): $(OBJS) packaging/libdarwin-notify.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=packaging/libdarwin-notify.map \
	    -Wl,-z,relro -Wl,-z,now -Wl,--as-needed $(LDFLAGS) -o $@ $(OBJS) $(DBUS_LIBS) -lpthread
	ln -sf $(REALNAME) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/$(LIBNAME).so

$(BUILD)/$(LIBNAME).a: $(OBJS)
	rm -f $@
	$(AR) rcs $@ $(OBJS)

$(BUILD)/darwin-notify.pc: packaging/darwin-notify.pc.in VERSION FORCE
	@mkdir -p $(BUILD)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' $< > $@

# The exported dynamic symbols with their version node, one per line (the same under gcc and
# clang), checked: every function the public headers declare is exported, and nothing else is.
check-symbols: $(BUILD)/$(REALNAME)
	@nm -D --defined-only --with-symbol-versions $< | awk '$$2 == "T" {print $$3}' | sed 's/@@*/@/' | LC_ALL=C sort > $(BUILD)/exports
	@sed -n 's/.*\b\(notify_[a-z_]*\|CNotify_[a-z_0-9]*\) *(.*/\1/p' $(HEADERS) | LC_ALL=C sort -u > $(BUILD)/declared
	@cut -d@ -f1 $(BUILD)/exports | LC_ALL=C sort -u | diff -u --label declared --label exported $(BUILD)/declared - \
	    || { echo "check-symbols: the exports differ from the headers' declarations (packaging/libdarwin-notify.map)"; exit 1; }
	@cat $(BUILD)/exports

# Man pages, units and completions with the version and paths filled in.
# Always made anew (it is quick): the paths depend on PREFIX and DATADIR, not only on files.
data:
	@mkdir -p $(BUILD)/man $(BUILD)/systemd
	for page in $(MANPAGES); do sed 's|@VERSION@|$(VERSION)|g' $$page > $(BUILD)/$$page; done
	sed 's|@DATADIR@|$(DATADIR)|g' systemd/darwin-notify.service.in > $(BUILD)/systemd/darwin-notify.service
	sed 's|@SBINDIR@|$(SBINDIR)|g' systemd/darwin-notifyd.service.in > $(BUILD)/systemd/darwin-notifyd.service
	sed 's|@SBINDIR@|$(SBINDIR)|g' systemd/darwin-notify-launcher.service.in > $(BUILD)/systemd/darwin-notify-launcher.service
	cp systemd/darwin-notify.socket systemd/user-bus.conf $(BUILD)/systemd/

# The CLIs: release builds with the Swift runtime inside (no Swift toolchain needed where they
# are installed) and glibc, libdbus and libmosquitto shared, as any Debian program links them.
# Hardened as dpkg-buildflags asks (the same flags in every build, so the Debian build reuses
# this one). Its own scratch directory: `swift test` of the checkout holds .build.
SWIFT_SCRATCH ?= .build-release
SWIFT_HARDENING := -Xcc -fstack-protector-strong -Xcc -D_FORTIFY_SOURCE=2 -Xcc -fcf-protection \
                   -Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now
# Relative relocations packed (DT_RELR): the binaries then need glibc 2.36 or later (a symbol
# version, GLIBC_ABI_DT_RELR, which dpkg-shlibdeps does not turn into a dependency: debian/control
# states it). The Swift runtime inside
# makes a PIE of some 40,000 of them, 24 bytes each unpacked (wormhole: 923 KiB of 15 MiB). It
# keeps darwin-notify-tools under its 30 MiB (issue 25), which it had reached.
SWIFT_RELR := -Xlinker -z -Xlinker pack-relative-relocs
SWIFT_RELEASE := swift build -c release --scratch-path $(SWIFT_SCRATCH) --static-swift-stdlib $(SWIFT_HARDENING) $(SWIFT_RELR) -Xswiftc -use-ld=lld
# notifyutil's front door: cc, the C core and libdbus inside, glibc shared, hardened as the library
# is. A command-line post is mostly process start-up, and loading libdbus-1.so (with libsystemd and
# its six libraries) is most of dbus-send's: with it shared, any post from C ties with dbus-send;
# with it inside, this starts faster (BENCHMARKS.md, "cli"). debian/control records it (Built-Using).
DBUS_STATIC := $(shell pkg-config --variable=libdir dbus-1)/libdbus-1.a
$(BUILD)/notifyutil: Sources/notifyutil/main.c Sources/notifyutil/libdbus-inside/no_systemd_sockets.c $(BUILD)/$(LIBNAME).a $(HEADERS)
	@[ -f "$(DBUS_STATIC)" ] || { echo "$(DBUS_STATIC) is missing: libdbus-1-dev ships it" >&2; exit 1; }
	$(CC) $(CFLAGS) -std=gnu11 -Wall -D_GNU_SOURCE -DNOTIFYUTIL_FULL='"$(NOTIFYUTIL_FULL)"' $(CPPFLAGS) \
	    -IShims/CNotify/include $(DBUS_CFLAGS) Sources/notifyutil/main.c Sources/notifyutil/libdbus-inside/no_systemd_sockets.c \
	    $(BUILD)/$(LIBNAME).a $(DBUS_STATIC) -Wl,-z,relro -Wl,-z,now -Wl,--as-needed $(LDFLAGS) -lpthread -o $@

# darwin-notifyd(8): C over the static library (libdbus shared), no Swift: built with the library.
NOTIFYD_SRCS := $(wildcard Sources/darwin-notifyd/*.c)
$(BUILD)/darwin-notifyd: $(NOTIFYD_SRCS) Sources/darwin-notifyd/notifyd.h Sources/darwin-notifyd/launch.h $(BUILD)/$(LIBNAME).a $(HEADERS)
	$(CC) $(CFLAGS) -std=gnu11 -Wall -D_GNU_SOURCE $(CPPFLAGS) -IShims/CNotify/include $(DBUS_CFLAGS) $(NOTIFYD_SRCS) \
	    $(BUILD)/$(LIBNAME).a -Wl,-z,relro -Wl,-z,now -Wl,--as-needed $(LDFLAGS) $(DBUS_LIBS) -lpthread -o $@

cli: $(BUILD)/notifyutil
	$(SWIFT_RELEASE) --product notifyutil-full
	$(SWIFT_RELEASE) --product wormhole
	$(SWIFT_RELEASE) --product notify-bridge
	$(SWIFT_RELEASE) --product distnotify
	@mkdir -p $(BUILD)/completions
	# Completions are sourced, not run: no #! line.
	$(SWIFT_SCRATCH)/release/wormhole --generate-completion-script bash | sed '1{/^#!/d}' > $(BUILD)/completions/wormhole.bash
	$(SWIFT_SCRATCH)/release/wormhole --generate-completion-script zsh > $(BUILD)/completions/_wormhole
	$(SWIFT_SCRATCH)/release/wormhole --generate-completion-script fish > $(BUILD)/completions/wormhole.fish

install: install-check install-lib install-data $(if $(filter 1,$(WITH_CLI)),install-cli)
ifeq ($(DESTDIR),)
	@# A program linked right after the install finds the new SONAME.
	@if [ "$$(id -u)" = 0 ]; then PATH="$$PATH:/sbin:/usr/sbin" ldconfig; \
	else echo "note: not root, so ldconfig was not run: run it as root, or set LD_LIBRARY_PATH=$(LIBDIR)"; fi
endif

# Before anything is copied: what install needs is built (it builds no Swift itself).
CLI_BINARIES := $(addprefix $(SWIFT_SCRATCH)/release/,$(filter-out notifyutil-full,$(SWIFT_CLIS)))
install-check:
ifeq ($(WITH_CLI),1)
	@for f in $(CLI_BINARIES) $(SWIFT_SCRATCH)/release/notifyutil-full $(BUILD)/notifyutil $(BUILD)/completions/wormhole.bash; do [ -f "$$f" ] || { \
	    echo "make install: $$f is not built: run \`make\` first (as yourself; sudo's PATH has no swift), then \`make install\`, or WITH_CLI=0 for the library alone" >&2; exit 1; }; done
endif

# Directories are made through install-dirs.sh, which records the ones it created, so that
# uninstall removes exactly those (and no directory that was there before).
DIRS_MANIFEST := $(DESTDIR)$(DATADIR)/darwin-notify/installed-directories
MKDIRS := sh packaging/install-dirs.sh make "$(DIRS_MANIFEST)"

install-lib: install-check lib
	$(MKDIRS) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)/darwin-notify
	install -m 0644 $(BUILD)/$(REALNAME) $(DESTDIR)$(LIBDIR)/$(REALNAME)
	ln -sf $(REALNAME) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/$(LIBNAME).so
	install -m 0644 $(BUILD)/$(LIBNAME).a $(DESTDIR)$(LIBDIR)/$(LIBNAME).a
	install -m 0644 $(HEADERS) $(DESTDIR)$(INCLUDEDIR)/darwin-notify/
	install -m 0644 $(BUILD)/darwin-notify.pc $(DESTDIR)$(LIBDIR)/pkgconfig/darwin-notify.pc

install-data: install-check data
	$(MKDIRS) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man7 \
	    $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(SBINDIR) $(DESTDIR)$(SYSTEMUNITDIR) $(DESTDIR)$(CONFDIR) $(DESTDIR)$(CONFDIR)/launch.d \
	    $(DESTDIR)$(UNITDIR) $(DESTDIR)$(TMPFILESDIR) $(DESTDIR)$(DBUSPOLICYDIR) $(DESTDIR)$(DATADIR)/darwin-notify \
	    $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHDIR) $(DESTDIR)$(FISHDIR) $(DESTDIR)$(DOCDIR)
	install -m 0644 $(BUILD)/man/*.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(BUILD)/man/*.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 0644 $(BUILD)/man/*.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 $(BUILD)/man/*.7 $(DESTDIR)$(MANDIR)/man7/
	install -m 0644 $(BUILD)/man/*.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0755 $(BUILD)/darwin-notifyd $(DESTDIR)$(SBINDIR)/darwin-notifyd
	install -m 0644 $(BUILD)/systemd/darwin-notifyd.service $(DESTDIR)$(SYSTEMUNITDIR)/darwin-notifyd.service
	install -m 0644 packaging/notify.conf $(DESTDIR)$(CONFDIR)/notify.conf
	install -m 0644 $(BUILD)/systemd/darwin-notify.socket $(BUILD)/systemd/darwin-notify.service \
	    $(BUILD)/systemd/darwin-notify-launcher.service $(DESTDIR)$(UNITDIR)/
	install -m 0644 $(BUILD)/systemd/user-bus.conf $(DESTDIR)$(DATADIR)/darwin-notify/user-bus.conf
	install -m 0644 packaging/tmpfiles.conf $(DESTDIR)$(TMPFILESDIR)/darwin-notify.conf
	install -m 0644 docs/dbus/org.darwinnotify.conf $(DESTDIR)$(DBUSPOLICYDIR)/org.darwinnotify.conf
	install -m 0644 completions/notifyutil.bash $(DESTDIR)$(BASHCOMPDIR)/notifyutil
	install -m 0644 completions/_notifyutil $(DESTDIR)$(ZSHDIR)/_notifyutil
	install -m 0644 completions/notifyutil.fish $(DESTDIR)$(FISHDIR)/notifyutil.fish
	install -m 0644 completions/distnotify.bash $(DESTDIR)$(BASHCOMPDIR)/distnotify
	install -m 0644 completions/_distnotify $(DESTDIR)$(ZSHDIR)/_distnotify
	install -m 0644 completions/distnotify.fish $(DESTDIR)$(FISHDIR)/distnotify.fish
	install -m 0644 README.md CHANGELOG.md LICENSE $(DESTDIR)$(DOCDIR)/

install-cli: install-check
	$(MKDIRS) $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR)/darwin-notify $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHDIR) $(DESTDIR)$(FISHDIR)
	install -m 0755 $(BUILD)/notifyutil $(CLI_BINARIES) $(DESTDIR)$(BINDIR)/
	install -m 0755 $(SWIFT_SCRATCH)/release/notifyutil-full $(DESTDIR)$(NOTIFYUTIL_FULL)
	install -m 0644 $(BUILD)/completions/wormhole.bash $(DESTDIR)$(BASHCOMPDIR)/wormhole
	install -m 0644 $(BUILD)/completions/_wormhole $(DESTDIR)$(ZSHDIR)/_wormhole
	install -m 0644 $(BUILD)/completions/wormhole.fish $(DESTDIR)$(FISHDIR)/wormhole.fish

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(REALNAME) $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/$(LIBNAME).so \
	    $(DESTDIR)$(LIBDIR)/$(LIBNAME).a $(DESTDIR)$(LIBDIR)/pkgconfig/darwin-notify.pc
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/darwin-notify/,$(notdir $(HEADERS)))
	rm -f $(DESTDIR)$(DATADIR)/darwin-notify/user-bus.conf
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,README.md CHANGELOG.md LICENSE)
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(CLIS)) $(DESTDIR)$(NOTIFYUTIL_FULL)
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/,$(patsubst man/%.1,man1/%.1,$(filter %.1,$(MANPAGES))) \
	    $(patsubst man/%.3,man3/%.3,$(filter %.3,$(MANPAGES))) $(patsubst man/%.5,man5/%.5,$(filter %.5,$(MANPAGES))) \
	    $(patsubst man/%.7,man7/%.7,$(filter %.7,$(MANPAGES))) $(patsubst man/%.8,man8/%.8,$(filter %.8,$(MANPAGES))))
	rm -f $(DESTDIR)$(SBINDIR)/darwin-notifyd $(DESTDIR)$(SYSTEMUNITDIR)/darwin-notifyd.service $(DESTDIR)$(CONFDIR)/notify.conf
	rm -f $(DESTDIR)$(UNITDIR)/darwin-notify.socket $(DESTDIR)$(UNITDIR)/darwin-notify.service \
	    $(DESTDIR)$(UNITDIR)/darwin-notify-launcher.service \
	    $(DESTDIR)$(TMPFILESDIR)/darwin-notify.conf $(DESTDIR)$(DBUSPOLICYDIR)/org.darwinnotify.conf
	rm -f $(DESTDIR)$(BASHCOMPDIR)/notifyutil $(DESTDIR)$(BASHCOMPDIR)/wormhole $(DESTDIR)$(BASHCOMPDIR)/distnotify \
	    $(DESTDIR)$(ZSHDIR)/_notifyutil $(DESTDIR)$(ZSHDIR)/_wormhole $(DESTDIR)$(ZSHDIR)/_distnotify \
	    $(DESTDIR)$(FISHDIR)/notifyutil.fish $(DESTDIR)$(FISHDIR)/wormhole.fish $(DESTDIR)$(FISHDIR)/distnotify.fish
	sh packaging/install-dirs.sh remove "$(DIRS_MANIFEST)"
ifeq ($(DESTDIR),)
	@if [ "$$(id -u)" = 0 ]; then PATH="$$PATH:/sbin:/usr/sbin" ldconfig; fi
endif

# The Debian packages, from debian/ with dpkg-buildpackage (packaging/build-debs.sh says how).
deb:
	@bash packaging/build-debs.sh

clean:
	rm -rf $(BUILD)

FORCE:
