//! The BFD control commands, as OVS's `lib/bfd.c` registers them: `bfd/show [INTERFACE]`
//! (every session's details, or one's) and `bfd/set-forwarding [INTERFACE] normal|false|true`
//! (the forwarding a session reports, overridden or back to what the protocol says).

use std::sync::Arc;

use ofproto::ofproto::Ofproto;
use unixctl::Registry;

/// Registers the BFD commands.
pub fn register(reg: &Registry, of: &Arc<Ofproto>) {
    let of2 = of.clone();
    let _ = reg.register("bfd/show", "[interface]", 0, 1, move |args| {
        of2.bfd.show(args.first().map(String::as_str))
    });
    let of2 = of.clone();
    let _ = reg.register(
        "bfd/set-forwarding",
        "[interface] normal|false|true",
        1,
        2,
        move |args| {
            let (name, how) = match args {
                [how] => (None, how),
                [name, how] => (Some(name.as_str()), how),
                _ => return Err("unknown fault string".into()),
            };
            let r = of2.bfd.set_forwarding(name, how);
            // The ports' liveness follows at the sender's next turn, woken now.
            of2.bfd.notify();
            r
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_answer_as_ovs_s() {
        let reg = Registry::new("test");
        let of = Ofproto::new();
        register(&reg, &of);
        let run = |args: &[&str]| reg.dispatch::<&str>(args[0], &args[1..]);
        assert_eq!(run(&["bfd/show"]), Ok(String::new()));
        assert_eq!(run(&["bfd/show", "p0"]), Err("no such bfd object\n".into()));
        assert_eq!(run(&["bfd/set-forwarding", "true"]), Ok("OK\n".into()));
        assert_eq!(
            run(&["bfd/set-forwarding", "p0", "true"]),
            Err("no such BFD object\n".into())
        );
        assert_eq!(
            run(&["bfd/set-forwarding", "p0", "sometimes"]),
            Err("unknown fault string\n".into())
        );
    }
}
