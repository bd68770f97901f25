# sp (Sallyport) - the two commands a newcomer needs:
#   make demo   build, start a loopback demo API, drive a scripted MCP session through sp mcp
#   make test   everything .ci/run checks: clippy (warnings are errors), the official MCP
#               clients (Python SDK, TypeScript SDK, Inspector CLI) against sp, and the whole
#               cargo suite (profile fast)

CARGO  ?= cargo
PYTHON ?= python3
VENV   ?= .venv
SP     := target/release/sp

.PHONY: all build test lint interop unit demo bench clean

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

# The official TypeScript SDK v2 client and the Inspector CLI, pinned (package-lock.json).
NPM ?= npm
tests/interop/node_modules/.stamp: tests/interop/package.json tests/interop/package-lock.json
	cd tests/interop && $(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

interop: build $(VENV)/.stamp tests/interop/node_modules/.stamp
	$(VENV)/bin/python tests/interop/python_sdk.py $(SP)
	node tests/interop/ts_client.mjs $(SP)

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

clean:
	$(CARGO) clean
	rm -rf $(VENV) tests/interop/node_modules
