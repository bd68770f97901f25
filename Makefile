# sp (Sallyport) - the two commands a newcomer needs:
#   make demo   build, start a loopback demo API, drive a scripted MCP session through sp mcp
#   make test   everything .ci/run checks: clippy (warnings are errors), the Python MCP SDK
#               smoke test, and the whole cargo suite (profile fast)

CARGO  ?= cargo
PYTHON ?= python3
VENV   ?= .venv
SP     := target/release/sp

.PHONY: all build test lint interop unit demo bench clean static static-check deb deb-check

PKGDIR  ?= target/pkg
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | sed -n 1p)
DEB_ARCH = $(shell dpkg --print-architecture)
DEB      = $(PKGDIR)/sallyport_$(VERSION)-1_$(DEB_ARCH).deb

# Static builds (issue 11): musl, OpenSSL and zlib compiled in (Cargo feature `static`).
# Paths are remapped so the binary names neither this checkout nor the cargo home, and
# two builds in different directories are bit-identical (`make repro-check`).
STATIC_TARGET ?= x86_64-unknown-linux-musl
CARGO_HOME    ?= $(HOME)/.cargo
REMAP         := --remap-path-prefix=$(CURDIR)=/build/sallyport --remap-path-prefix=$(CARGO_HOME)=/cargo
STATIC_FLAGS  := --release --locked --features static
STATIC_SP      = target/$(STATIC_TARGET)/release/sp

all: build

build:
	$(CARGO) build --release --locked

lint:
	$(CARGO) clippy --all-targets --locked -- -D warnings

# The official Python MCP SDK, pinned, in a local venv (created on first use).
$(VENV)/.stamp: tests/interop/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/interop/requirements.txt
	touch $@

interop: build $(VENV)/.stamp
	$(VENV)/bin/python tests/interop/python_sdk.py $(SP)

# --profile fast: release code without LTO (Cargo.toml), so every test binary does not
# pay for a whole-program link; the process-level tests spawn target/fast/sp.
unit:
	$(CARGO) test --profile fast --locked

test: lint interop unit

demo: build
	$(CARGO) run --quiet --release --locked --example demo -- $(SP)

# Figures (latency, memory, size), printed, never asserted.
bench: build
	$(CARGO) run --quiet --release --locked --example bench -- $(SP)
	$(CARGO) run --quiet --release --locked --example bench_ssh -- $(SP)

# One self-contained x86_64 binary: "statically linked" per file(1), no ldd output.
static:
	RUSTFLAGS="$(REMAP)" $(CARGO) build $(STATIC_FLAGS) --target $(STATIC_TARGET)
	@file $(STATIC_SP) 2>/dev/null || true
	@ls -l $(STATIC_SP)

# The static binary in an empty root (chroot, so root only): HTTP and HTTPS to localhost
# with a policy CA file, then `sp audit verify` (packaging/check-empty-root.py).
static-check: static
	$(PYTHON) packaging/check-empty-root.py $(STATIC_SP)

# Debian: a dpkg-deb layout from the glibc build (packaging/deb/build-deb).
deb: build
	packaging/deb/build-deb $(SP) $(PKGDIR)

# lintian (errors and warnings fail, overrides in packaging/deb/lintian-overrides), then
# install, use and purge it: needs root and a machine where that is fine (CI).
deb-check: deb
	lintian --fail-on error,warning $(DEB)
	dpkg -i $(DEB)
	/usr/bin/sp --version
	man -w sp
	packaging/smoke-session /usr/bin/sp
	dpkg --purge sallyport
	! command -v sp

clean:
	$(CARGO) clean
	rm -rf $(VENV)
