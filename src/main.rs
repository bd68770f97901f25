//! `sp`: take stdout away from everything else, then parse, run, and map to an exit code.
//! Everything lives in the library (`src/lib.rs`); this file stays this small.

#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::process::ExitCode;

fn main() -> ExitCode {
    // `sp __sp-exec ...`: sp re-executed to start a child (sys/confine.rs); it keeps the
    // descriptors it was given, so it runs before stdout is taken.
    if let Some(failed) = sallyport::launcher_entry() {
        return failed;
    }
    // First, before anything can print: fd 1 becomes stderr, the protocol stream moves to
    // a private descriptor (see `out.rs`).
    let stdout = match sallyport::take_stdout() {
        Ok(handle) => handle,
        Err(e) => {
            eprintln!("sp: standard output is not usable: {e}");
            return ExitCode::from(sallyport::EXIT_FATAL);
        }
    };
    sallyport::run(stdout)
}

/// The static build's allocator (Cargo.toml, `dlmalloc`): musl's malloc made a denied
/// call cost twice a ping. No child `sp` starts ever allocates between `fork` and `exec`
/// (`std::process` prepares everything before; no `pre_exec` anywhere: the launcher,
/// `sys/confine.rs`, does its setup in a fresh process), so
/// the allocator's one lock cannot be inherited held.
#[cfg(feature = "static")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;
