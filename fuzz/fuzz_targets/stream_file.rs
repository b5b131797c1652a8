//! The traffic generator's stream file (TOML) on arbitrary UTF-8: whatever parses compiles to
//! streams whose packets fit their buffers and repeat with their period. The invariants are in
//! `src/stream_file.rs`.
#![no_main]

#[path = "../src/stream_file.rs"]
mod stream_file;

libfuzzer_sys::fuzz_target!(|data: &[u8]| stream_file::check_stream_file(data));
