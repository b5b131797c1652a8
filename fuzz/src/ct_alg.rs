//! Invariant checks of the `ct_alg` fuzz target, shared with the crash-regression test
//! (`crates/conntrack/tests/fuzz_regressions.rs` path-imports this file), so that a committed
//! input is replayed through exactly the checks that found it.
//!
//! The input's first byte picks the direction, the address family, NAT and the helper; the
//! rest is a segment's payload (for [`parse_ftp`]) and, the same bytes, its L4 header and
//! payload (for [`inspect`], FTP and TFTP):
//! - an FTP announcement's address text lies within the payload, and rewritten with another
//!   address (as NAT rewrites it) the payload announces the same kind and port at that
//!   address, its text where the edit says;
//! - what [`inspect`] asks to edit lies within the segment, and the length change it reports
//!   is the edit's.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use conntrack::Tuple;
use conntrack::alg::{
    AddrForm, Control, FtpAnnounce, FtpParse, Helper, MAX_ADDR_TEXT, PayloadEdit, inspect,
    parse_ftp,
};
use conntrack::key::UDP;

/// An IPv4 address as conntrack keeps it: in the first four bytes.
fn v4(a: [u8; 4]) -> [u8; 16] {
    let mut b = [0; 16];
    b[..4].copy_from_slice(&a);
    b
}

/// The address an edit writes, in the form the text has, and as conntrack keeps it.
fn other_addr(form: AddrForm) -> (IpAddr, [u8; 16]) {
    match form {
        AddrForm::Commas | AddrForm::Dotted => {
            let a = [192, 0, 2, 177];
            (IpAddr::V4(Ipv4Addr::from(a)), v4(a))
        }
        AddrForm::V6 => {
            let a = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0xab, 0x77);
            (IpAddr::V6(a), a.octets())
        }
    }
}

/// Runs every check on `data`.
pub fn check_ct_alg(data: &[u8]) {
    let Some((&sel, payload)) = data.split_first() else {
        return;
    };
    let from_client = sel & 1 != 0;
    let v6 = sel & 2 != 0;
    if let FtpParse::Found(a) = parse_ftp(payload, from_client, v6) {
        check_announce(payload, from_client, v6, &a);
    }
    check_inspect(sel, payload);
}

/// Rewriting an announcement's address keeps the announcement.
fn check_announce(payload: &[u8], from_client: bool, v6: bool, a: &FtpAnnounce) {
    let Some((at, n, form)) = a.addr_text else {
        assert!(a.addr.is_none(), "an address without its text: {a:?}");
        return;
    };
    assert!(at + n <= payload.len(), "{a:?} past the payload");
    assert!(a.addr.is_some(), "address text without an address: {a:?}");
    let (to, to_bytes) = other_addr(form);
    let edit = PayloadEdit {
        at: u16::try_from(at).expect("a segment's offset"),
        old_len: u16::try_from(n).expect("a segment's length"),
        form,
    };
    let mut text = [0; MAX_ADDR_TEXT];
    let len = edit.render(&to_bytes, &mut text);
    let edited = edit
        .apply_to(payload, &to_bytes)
        .expect("the text is within the payload");
    assert_eq!(
        edited.len() as i64,
        payload.len() as i64 + i64::from(edit.delta(&to_bytes))
    );
    match parse_ftp(&edited, from_client, v6) {
        FtpParse::Found(b) => {
            assert_eq!(
                (b.kind, b.port, b.addr),
                (a.kind, a.port, Some(to)),
                "{a:?} became {b:?}"
            );
            assert_eq!(b.addr_text, Some((at, len, form)), "{a:?} became {b:?}");
        }
        other => panic!("{a:?} rewritten to {to} reads as {other:?}"),
    }
}

/// [`inspect`] on a control connection of either helper.
fn check_inspect(sel: u8, l4: &[u8]) {
    let v6 = sel & 2 != 0;
    let helper = if sel & 8 != 0 {
        Helper::Tftp
    } else {
        Helper::Ftp
    };
    let proto = if sel & 16 != 0 { UDP } else { helper.proto() };
    let (client, server, outside) = if v6 {
        let ula = |n| Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, n).octets();
        (
            ula(1),
            ula(2),
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 9).octets(),
        )
    } else {
        (v4([10, 0, 0, 1]), v4([10, 0, 0, 2]), v4([192, 0, 2, 9]))
    };
    let port = if helper == Helper::Ftp { 21 } else { 69 };
    let orig = Tuple {
        src: client,
        dst: server,
        sport: 40000,
        dport: port,
        proto,
        v6,
        zone: 3,
        ..Tuple::default()
    };
    // Source NAT when asked: the server answers the translated client.
    let snat = sel & 32 != 0;
    let reply_tuple = Tuple {
        src: server,
        dst: if snat { outside } else { client },
        sport: port,
        dport: if snat { 50000 } else { 40000 },
        ..orig
    };
    let c = Control {
        helper,
        orig: &orig,
        reply_tuple: &reply_tuple,
        id: 1,
        mark: 2,
        label: 3,
        reply: sel & 1 == 0,
        nat: sel & 4 != 0,
    };
    let out = inspect(&c, l4, 1000);
    if let Some(e) = out.edit {
        assert!(
            usize::from(e.at) + usize::from(e.old_len) <= l4.len(),
            "{e:?} past the segment ({} bytes)",
            l4.len()
        );
        assert_eq!(out.delta, e.delta(&out.edit_addr), "{e:?}");
        let edited = e
            .apply_to(l4, &out.edit_addr)
            .expect("the edit is within the segment");
        assert_eq!(edited.len() as i64, l4.len() as i64 + i64::from(out.delta));
    }
    assert!(!(out.invalid && out.expectation.is_some()), "{out:?}");
}
