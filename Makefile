# Makefile: DarwinNotify built and installed the way Linux C libraries are.
#
#   make                      the C library (shared, with a SONAME, and static), darwin-notify.pc,
#                             man pages, units and completions; the CLIs (swift build -c release)
#   make lib                  only the C library and darwin-notify.pc (no Swift toolchain needed)
#   make install PREFIX=/usr DESTDIR=/tmp/root
#   make uninstall PREFIX=/usr DESTDIR=/tmp/root
#   make deb                  build/darwin-notify_$(VERSION)_$(ARCH).deb
#
# Why make: a C user expects `make && make install PREFIX=… DESTDIR=…`, and the library is a
# dozen C files with one dependency (libdbus-1, found with pkg-config): nothing that would repay
# meson's extra build dependency. The Swift parts are SwiftPM's, which this file only calls.
# WITH_CLI=0 skips them (a machine without Swift still gets the library).

VERSION     := $(shell cat VERSION)
MAJOR       := $(word 1,$(subst ., ,$(VERSION)))
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
LIBDIR      ?= $(PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
DATADIR     ?= $(PREFIX)/share
MANDIR      ?= $(DATADIR)/man
# systemd and tmpfiles.d look in $(PREFIX)/lib, whatever the multiarch library directory.
UNITDIR     ?= $(PREFIX)/lib/systemd/user
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
DBUSPOLICYDIR ?= $(DATADIR)/dbus-1/system.d
WITH_CLI    ?= 1
# notifyutil as a static executable (fastest start-up, BENCHMARKS.md "cli"), or, with 0, linked
# against the shared libc and libdbus with the Swift runtime inside (what a distribution wants).
NOTIFYUTIL_STATIC ?= 1

CFLAGS      ?= -O2 -g
BUILD       := build
LIBNAME     := libdarwin-notify
REALNAME    := $(LIBNAME).so.$(VERSION)
SONAME      := $(LIBNAME).so.$(MAJOR)
# clang has blocks: then notify_register_dispatch is built (libdispatch is found at run time).
BLOCKS      := $(shell $(CC) -fblocks -x c -c /dev/null -o /dev/null 2>/dev/null && echo -fblocks)
DBUS_CFLAGS := $(shell pkg-config --cflags dbus-1)
DBUS_LIBS   := $(shell pkg-config --libs dbus-1)
LIB_CFLAGS  := $(CFLAGS) -std=gnu11 -fPIC -Wall -D_GNU_SOURCE -DDARWIN_NOTIFY_VERSION='"$(VERSION)"' \
               $(BLOCKS) $(DBUS_CFLAGS)

SRCS := $(wildcard Shims/CNotify/*/*.c)
OBJS := $(patsubst Shims/CNotify/%.c,$(BUILD)/obj/%.o,$(SRCS))
HEADERS := Shims/CNotify/include/notify.h Shims/CNotify/include/darwin_notify.h
MANPAGES := $(wildcard man/*.1 man/*.3 man/*.7)
CLIS := notifyutil wormhole notify-bridge

.PHONY: all lib cli data FORCE install install-lib install-cli install-data uninstall deb clean check-symbols

all: lib data $(if $(filter 1,$(WITH_CLI)),cli)

lib: $(BUILD)/$(REALNAME) $(BUILD)/$(LIBNAME).a $(BUILD)/darwin-notify.pc

$(BUILD)/obj/%.o: Shims/CNotify/%.c $(wildcard Shims/CNotify/*/*.h) $(HEADERS) VERSION
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

# The exported dynamic symbols, for a look or a check: nothing but notify_* and CNotify_*.
check-symbols: $(BUILD)/$(REALNAME)
	@bad=$$(nm -D --defined-only $< | awk '{print $$3}' | grep -v -e '^notify_' -e '^CNotify_' -e '^DARWIN_NOTIFY_0$$'); \
	if [ -n "$$bad" ]; then echo "exported beyond the public API: $$bad"; exit 1; fi; echo "exports: public API only"

# Man pages, units and completions with the version and paths filled in.
# Always made anew (it is quick): the paths depend on PREFIX and DATADIR, not only on files.
data:
	@mkdir -p $(BUILD)/man $(BUILD)/systemd
	for page in $(MANPAGES); do sed 's|@VERSION@|$(VERSION)|g' $$page > $(BUILD)/$$page; done
	sed 's|@DATADIR@|$(DATADIR)|g' systemd/darwin-notify.service.in > $(BUILD)/systemd/darwin-notify.service
	cp systemd/darwin-notify.socket systemd/user-bus.conf $(BUILD)/systemd/

# The CLIs: release builds. wormhole links the Swift runtime statically, so the installed tool
# needs no Swift toolchain; notifyutil is a static executable already (Package.swift).
# Its own scratch directory: a `swift test` of the checkout (which runs this Makefile) holds .build.
SWIFT_SCRATCH ?= .build-release
SWIFT_RELEASE := swift build -c release --scratch-path $(SWIFT_SCRATCH) --static-swift-stdlib
cli:
ifeq ($(NOTIFYUTIL_STATIC),1)
	$(SWIFT_RELEASE) --product notifyutil
else
	DARWIN_NOTIFY_DYNAMIC_NOTIFYUTIL=1 $(SWIFT_RELEASE) --product notifyutil
endif
	$(SWIFT_RELEASE) --product wormhole
	$(SWIFT_RELEASE) --product notify-bridge
	@mkdir -p $(BUILD)/completions
	# Completions are sourced, not run: no #! line.
	$(SWIFT_SCRATCH)/release/wormhole --generate-completion-script bash | sed '1{/^#!/d}' > $(BUILD)/completions/wormhole.bash
	$(SWIFT_SCRATCH)/release/wormhole --generate-completion-script zsh > $(BUILD)/completions/_wormhole
	$(SWIFT_SCRATCH)/release/wormhole --generate-completion-script fish > $(BUILD)/completions/wormhole.fish

install: install-lib install-data $(if $(filter 1,$(WITH_CLI)),install-cli)

install-lib: lib
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)/darwin-notify
	install -m 0644 $(BUILD)/$(REALNAME) $(DESTDIR)$(LIBDIR)/$(REALNAME)
	ln -sf $(REALNAME) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/$(LIBNAME).so
	install -m 0644 $(BUILD)/$(LIBNAME).a $(DESTDIR)$(LIBDIR)/$(LIBNAME).a
	install -m 0644 $(HEADERS) $(DESTDIR)$(INCLUDEDIR)/darwin-notify/
	install -m 0644 $(BUILD)/darwin-notify.pc $(DESTDIR)$(LIBDIR)/pkgconfig/darwin-notify.pc

install-data: data
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man7 \
	    $(DESTDIR)$(UNITDIR) $(DESTDIR)$(TMPFILESDIR) $(DESTDIR)$(DBUSPOLICYDIR) $(DESTDIR)$(DATADIR)/darwin-notify \
	    $(DESTDIR)$(DATADIR)/bash-completion/completions $(DESTDIR)$(DATADIR)/zsh/vendor-completions \
	    $(DESTDIR)$(DATADIR)/fish/vendor_completions.d $(DESTDIR)$(DATADIR)/doc/darwin-notify
	install -m 0644 $(BUILD)/man/*.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(BUILD)/man/*.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 0644 $(BUILD)/man/*.7 $(DESTDIR)$(MANDIR)/man7/
	install -m 0644 $(BUILD)/systemd/darwin-notify.socket $(BUILD)/systemd/darwin-notify.service $(DESTDIR)$(UNITDIR)/
	install -m 0644 $(BUILD)/systemd/user-bus.conf $(DESTDIR)$(DATADIR)/darwin-notify/user-bus.conf
	install -m 0644 packaging/tmpfiles.conf $(DESTDIR)$(TMPFILESDIR)/darwin-notify.conf
	install -m 0644 docs/dbus/org.darwinnotify.conf $(DESTDIR)$(DBUSPOLICYDIR)/org.darwinnotify.conf
	install -m 0644 completions/notifyutil.bash $(DESTDIR)$(DATADIR)/bash-completion/completions/notifyutil
	install -m 0644 completions/_notifyutil $(DESTDIR)$(DATADIR)/zsh/vendor-completions/_notifyutil
	install -m 0644 completions/notifyutil.fish $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/notifyutil.fish
	install -m 0644 README.md CHANGELOG.md $(DESTDIR)$(DATADIR)/doc/darwin-notify/

install-cli: cli
	install -d $(DESTDIR)$(BINDIR)
	install -m 0755 $(SWIFT_SCRATCH)/release/notifyutil $(SWIFT_SCRATCH)/release/wormhole $(SWIFT_SCRATCH)/release/notify-bridge $(DESTDIR)$(BINDIR)/
	install -m 0644 $(BUILD)/completions/wormhole.bash $(DESTDIR)$(DATADIR)/bash-completion/completions/wormhole
	install -m 0644 $(BUILD)/completions/_wormhole $(DESTDIR)$(DATADIR)/zsh/vendor-completions/_wormhole
	install -m 0644 $(BUILD)/completions/wormhole.fish $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/wormhole.fish

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(REALNAME) $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/$(LIBNAME).so \
	    $(DESTDIR)$(LIBDIR)/$(LIBNAME).a $(DESTDIR)$(LIBDIR)/pkgconfig/darwin-notify.pc
	rm -rf $(DESTDIR)$(INCLUDEDIR)/darwin-notify $(DESTDIR)$(DATADIR)/darwin-notify $(DESTDIR)$(DATADIR)/doc/darwin-notify
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(CLIS))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/,$(patsubst man/%.1,man1/%.1,$(filter %.1,$(MANPAGES))) \
	    $(patsubst man/%.3,man3/%.3,$(filter %.3,$(MANPAGES))) $(patsubst man/%.7,man7/%.7,$(filter %.7,$(MANPAGES))))
	rm -f $(DESTDIR)$(UNITDIR)/darwin-notify.socket $(DESTDIR)$(UNITDIR)/darwin-notify.service \
	    $(DESTDIR)$(TMPFILESDIR)/darwin-notify.conf $(DESTDIR)$(DBUSPOLICYDIR)/org.darwinnotify.conf
	rm -f $(DESTDIR)$(DATADIR)/bash-completion/completions/notifyutil $(DESTDIR)$(DATADIR)/bash-completion/completions/wormhole \
	    $(DESTDIR)$(DATADIR)/zsh/vendor-completions/_notifyutil $(DESTDIR)$(DATADIR)/zsh/vendor-completions/_wormhole \
	    $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/notifyutil.fish $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/wormhole.fish

# A Debian package of everything above (packaging/debian/build-deb.sh says how).
deb:
	bash packaging/debian/build-deb.sh

clean:
	rm -rf $(BUILD)

FORCE:
