//! The BFD control packet (RFC 5880 section 4.1, mandatory section only): its decoder, which
//! says why a packet is refused in the words of RFC 5880 section 6.8.6's reception checks,
//! and its encoder.

use std::fmt;

/// The length of a control packet without authentication.
pub const MSG_LEN: usize = 24;
/// The protocol version this speaks.
pub const VERSION: u8 = 1;
/// The UDP destination port of single-hop BFD control packets (RFC 5881).
pub const UDP_PORT: u16 = 3784;

/// `M`: multipoint.
pub const FLAG_MULTIPOINT: u8 = 1 << 0;
/// `D`: demand mode.
pub const FLAG_DEMAND: u8 = 1 << 1;
/// `A`: authentication present.
pub const FLAG_AUTH: u8 = 1 << 2;
/// `C`: control plane independent.
pub const FLAG_CTL: u8 = 1 << 3;
/// `F`: final.
pub const FLAG_FINAL: u8 = 1 << 4;
/// `P`: poll.
pub const FLAG_POLL: u8 = 1 << 5;

/// A session state (`bfd.SessionState`), ordered as the wire's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    AdminDown = 0,
    Down = 1,
    Init = 2,
    Up = 3,
}

impl State {
    fn from_bits(b: u8) -> State {
        match b & 3 {
            0 => State::AdminDown,
            1 => State::Down,
            2 => State::Init,
            _ => State::Up,
        }
    }

    /// The name `bfd_status` and `bfd/show` use.
    pub fn name(self) -> &'static str {
        match self {
            State::AdminDown => "admin_down",
            State::Down => "down",
            State::Init => "init",
            State::Up => "up",
        }
    }
}

/// The diagnostic code's text, as `bfd_status` and `bfd/show` write it.
pub fn diag_name(diag: u8) -> &'static str {
    match diag {
        0 => "No Diagnostic",
        1 => "Control Detection Time Expired",
        2 => "Echo Function Failed",
        3 => "Neighbor Signaled Session Down",
        4 => "Forwarding Plane Reset",
        5 => "Path Down",
        6 => "Concatenated Path Down",
        7 => "Administratively Down",
        8 => "Reverse Concatenated Path Down",
        _ => "Invalid Diagnostic",
    }
}

/// Diagnostic codes (RFC 5880 section 4.1).
pub mod diag {
    pub const NONE: u8 = 0;
    pub const EXPIRED: u8 = 1;
    pub const RMT_DOWN: u8 = 3;
    pub const PATH_DOWN: u8 = 5;
    pub const CPATH_DOWN: u8 = 6;
    pub const RCPATH_DOWN: u8 = 8;
}

/// The flags' names, as `bfd/show` lists them ("none" for no flag).
pub fn flags_name(flags: u8) -> String {
    let names = [
        (FLAG_MULTIPOINT, "multipoint"),
        (FLAG_DEMAND, "demand"),
        (FLAG_AUTH, "auth"),
        (FLAG_CTL, "ctl"),
        (FLAG_FINAL, "final"),
        (FLAG_POLL, "poll"),
    ];
    let set: Vec<&str> = names
        .iter()
        .filter(|(f, _)| flags & f != 0)
        .map(|(_, n)| *n)
        .collect();
    if set.is_empty() {
        "none".into()
    } else {
        set.join(" ")
    }
}

/// One control packet's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg {
    pub version: u8,
    pub diag: u8,
    pub state: State,
    /// The six flag bits (`FLAG_*`).
    pub flags: u8,
    pub mult: u8,
    pub length: u8,
    pub my_disc: u32,
    pub your_disc: u32,
    /// Desired minimum TX interval, in microseconds.
    pub min_tx_us: u32,
    /// Required minimum RX interval, in microseconds.
    pub min_rx_us: u32,
    /// Required minimum echo RX interval, in microseconds.
    pub min_rx_echo_us: u32,
}

/// Why a control packet is discarded (RFC 5880 section 6.8.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Fewer than 24 bytes of UDP payload.
    TooShort(usize),
    Version(u8),
    /// The `A` bit: this speaks no authentication.
    Auth,
    /// The Length field is below 24 or beyond the payload.
    Length(u8),
    ZeroMult,
    Multipoint,
    ZeroMyDisc,
    /// Your Discriminator is zero while the sender is not Down or AdminDown.
    ZeroYourDisc,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Refusal::TooShort(n) => write!(
                f,
                "Received too-short BFD control message (only {n} bytes long, at least \
                 {MSG_LEN} required)"
            ),
            Refusal::Version(_) => f.write_str("Incorrect version"),
            Refusal::Auth => {
                f.write_str("Authenticated control message with authentication disabled")
            }
            Refusal::Length(_) => f.write_str("Unexpected length"),
            Refusal::ZeroMult => f.write_str("Zero multiplier"),
            Refusal::Multipoint => f.write_str("Unsupported multipoint flag"),
            Refusal::ZeroMyDisc => f.write_str("NULL my_disc"),
            Refusal::ZeroYourDisc => f.write_str("Null your_disc"),
        }
    }
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Msg {
    /// Reads the fields of a UDP payload without checking them.
    pub fn parse(payload: &[u8]) -> Result<Msg, Refusal> {
        if payload.len() < MSG_LEN {
            return Err(Refusal::TooShort(payload.len()));
        }
        let p = payload;
        Ok(Msg {
            version: p[0] >> 5,
            diag: p[0] & 0x1f,
            state: State::from_bits(p[1] >> 6),
            flags: p[1] & 0x3f,
            mult: p[2],
            length: p[3],
            my_disc: be32(p, 4),
            your_disc: be32(p, 8),
            min_tx_us: be32(p, 12),
            min_rx_us: be32(p, 16),
            min_rx_echo_us: be32(p, 20),
        })
    }

    /// Reads and checks a UDP payload as RFC 5880 section 6.8.6 does before a packet may
    /// touch a session: the version, no authentication, a length within the payload and at
    /// least the mandatory section, a detect multiplier, no multipoint, a sender
    /// discriminator, and a receiver discriminator once the sender is past Down.
    pub fn decode(payload: &[u8]) -> Result<Msg, Refusal> {
        let m = Msg::parse(payload)?;
        if m.version != VERSION {
            return Err(Refusal::Version(m.version));
        }
        if m.flags & FLAG_AUTH != 0 {
            return Err(Refusal::Auth);
        }
        if usize::from(m.length) < MSG_LEN || usize::from(m.length) > payload.len() {
            return Err(Refusal::Length(m.length));
        }
        if m.mult == 0 {
            return Err(Refusal::ZeroMult);
        }
        if m.flags & FLAG_MULTIPOINT != 0 {
            return Err(Refusal::Multipoint);
        }
        if m.my_disc == 0 {
            return Err(Refusal::ZeroMyDisc);
        }
        if m.your_disc == 0 && m.state > State::Down {
            return Err(Refusal::ZeroYourDisc);
        }
        Ok(m)
    }

    /// The fields as OVS's log messages list them, each line indented, starting on a new
    /// line and not ending one.
    pub fn log_text(&self) -> String {
        let us = |v: u32| format!("{v}us ({}ms)", v / 1000);
        format!(
            "\n  vers:{} diag:\"{}\" state:{} mult:{} length:{}\n  flags: {}\n  \
             my_disc:{:#x} your_disc:{:#x}\n  min_tx:{}\n  min_rx:{}\n  min_rx_echo:{}",
            self.version,
            diag_name(self.diag),
            self.state.name(),
            self.mult,
            self.length,
            flags_name(self.flags),
            self.my_disc,
            self.your_disc,
            us(self.min_tx_us),
            us(self.min_rx_us),
            us(self.min_rx_echo_us)
        )
    }

    /// The 24 bytes on the wire.
    pub fn encode(&self) -> [u8; MSG_LEN] {
        let mut b = [0u8; MSG_LEN];
        b[0] = (self.version << 5) | (self.diag & 0x1f);
        b[1] = ((self.state as u8) << 6) | (self.flags & 0x3f);
        b[2] = self.mult;
        b[3] = self.length;
        for (at, v) in [
            (4, self.my_disc),
            (8, self.your_disc),
            (12, self.min_tx_us),
            (16, self.min_rx_us),
            (20, self.min_rx_echo_us),
        ] {
            b[at..at + 4].copy_from_slice(&v.to_be_bytes());
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Msg {
        Msg {
            version: 1,
            diag: diag::EXPIRED,
            state: State::Init,
            flags: FLAG_POLL,
            mult: 3,
            length: 24,
            my_disc: 0x1234_5678,
            your_disc: 0x9abc_def0,
            min_tx_us: 100_000,
            min_rx_us: 1_000_000,
            min_rx_echo_us: 0,
        }
    }

    #[test]
    fn a_packet_reads_back_as_it_was_written() {
        let m = sample();
        let b = m.encode();
        assert_eq!(b[0], 0x21);
        assert_eq!(b[1], 0x80 | 0x20);
        assert_eq!(Msg::decode(&b), Ok(m));
    }

    #[test]
    fn each_reception_check_refuses_its_packet() {
        let bad = |f: fn(&mut Msg)| {
            let mut m = sample();
            f(&mut m);
            Msg::decode(&m.encode())
        };
        assert_eq!(bad(|m| m.version = 2), Err(Refusal::Version(2)));
        assert_eq!(bad(|m| m.flags |= FLAG_AUTH), Err(Refusal::Auth));
        assert_eq!(bad(|m| m.length = 23), Err(Refusal::Length(23)));
        assert_eq!(bad(|m| m.length = 25), Err(Refusal::Length(25)));
        assert_eq!(bad(|m| m.mult = 0), Err(Refusal::ZeroMult));
        assert_eq!(
            bad(|m| m.flags |= FLAG_MULTIPOINT),
            Err(Refusal::Multipoint)
        );
        assert_eq!(bad(|m| m.my_disc = 0), Err(Refusal::ZeroMyDisc));
        assert_eq!(bad(|m| m.your_disc = 0), Err(Refusal::ZeroYourDisc));
        // Down may not know its peer yet.
        assert!(
            bad(|m| {
                m.your_disc = 0;
                m.state = State::Down
            })
            .is_ok()
        );
        assert_eq!(Msg::decode(&[0x20; 10]), Err(Refusal::TooShort(10)));
    }

    #[test]
    fn a_longer_length_within_the_payload_is_taken() {
        let mut m = sample();
        m.length = 28;
        let mut b = m.encode().to_vec();
        b.extend_from_slice(&[0; 4]);
        assert_eq!(Msg::decode(&b).map(|m| m.length), Ok(28));
    }

    #[test]
    fn names_are_ovs_s() {
        assert_eq!(flags_name(0), "none");
        assert_eq!(flags_name(FLAG_FINAL | FLAG_POLL), "final poll");
        assert_eq!(diag_name(1), "Control Detection Time Expired");
        assert_eq!(diag_name(31), "Invalid Diagnostic");
        assert_eq!(State::AdminDown.name(), "admin_down");
        assert_eq!(
            sample().log_text(),
            "\n  vers:1 diag:\"Control Detection Time Expired\" state:init mult:3 length:24\
             \n  flags: poll\n  my_disc:0x12345678 your_disc:0x9abcdef0\
             \n  min_tx:100000us (100ms)\n  min_rx:1000000us (1000ms)\n  min_rx_echo:0us (0ms)"
        );
    }
}
