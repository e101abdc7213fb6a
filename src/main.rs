//! The `aisp` binary: everything happens in the library's CLI.

fn main() -> std::process::ExitCode {
    aisp::cli::main()
}
