//! The `flowpath` binary: the command-line tool of the library beside it (`lib.rs`), which holds
//! every command so that its parsers can also be fuzzed and tested as a library.

fn main() -> std::process::ExitCode {
    flowpath::main()
}
