//! The TOML configuration (`flowpath run CONFIG`) on arbitrary UTF-8: parsing and checking it
//! never panics and reports errors on lines of the text. The invariants are in
//! `src/config_toml.rs`.
#![no_main]

#[path = "../src/config_toml.rs"]
mod config_toml;

libfuzzer_sys::fuzz_target!(|data: &[u8]| config_toml::check_config_toml(data));
