//! The logging commands, as OVS's: `vlog/set [SPEC...]`, `vlog/list`, `vlog/reopen`
//! ([`vlog`] holds the modules and their levels).

use unixctl::Registry;

/// Registers the logging commands.
pub fn register(reg: &Registry) {
    let _ = reg.register(
        "vlog/set",
        "{spec | PATTERN:destination:pattern}",
        1,
        usize::MAX,
        |a| {
            // Each spec applies in turn; the first bad one stops there, as OVS's does.
            for spec in a {
                vlog::set(spec)?;
            }
            Ok(String::new())
        },
    );
    let _ = reg.register("vlog/list", "", 0, 0, |_| Ok(vlog::list()));
    let _ = reg.register("vlog/reopen", "", 0, 0, |_| {
        vlog::reopen().map(|()| String::new())
    });
}
