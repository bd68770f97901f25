//! `sp`: take stdout away from everything else, then parse, run, and map to an exit code.
//! Everything lives in the library (`src/lib.rs`); this file stays this small.

use std::process::ExitCode;

fn main() -> ExitCode {
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
