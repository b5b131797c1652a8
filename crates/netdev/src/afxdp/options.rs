//! Options of an `afxdp` port (`ifname`, `n_rxq`, `xdp_mode`, `zero_copy`, the UMEM's and the
//! rings' sizes, `netns`): set from their configuration text and checked before anything is
//! opened.

/// Where the XDP program runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XdpMode {
    /// Native (driver) mode where the driver has it, else generic.
    #[default]
    Best,
    /// Native (driver) mode only.
    Native,
    /// Generic (SKB) mode only: works on any interface, slower.
    Generic,
}

/// Whether sockets use zero-copy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ZeroCopy {
    /// Zero-copy where the driver supports it (native mode only), else copy.
    #[default]
    Auto,
    /// Zero-copy or fail.
    On,
    /// Always copy.
    Off,
}

/// Options of an `afxdp` port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfXdpOptions {
    /// Interface name (`ifname=`); the port's name when `None`.
    pub ifname: Option<String>,
    /// Number of rx queues, ids `0..n_rxq` (`n_rxq=`, default 1).
    pub n_rxq: usize,
    /// `xdp_mode=best|native|generic` (default `best`).
    pub xdp_mode: XdpMode,
    /// `zero_copy=auto|true|false` (default `auto`).
    pub zero_copy: ZeroCopy,
    /// UMEM frames per socket, half for rx, half for tx (`n_frames=`, default 4096).
    pub n_frames: u32,
    /// Bytes per UMEM frame, 2048 or 4096 (`frame_size=`, default 2048).
    pub frame_size: u32,
    /// Entries of the rx and tx rings, a power of two (`ring_size=`, default 2048).
    pub ring_size: u32,
    /// Network namespace the interface lives in (`netns=NAME` for `/run/netns/NAME`; empty
    /// for the current one).
    pub netns: Option<String>,
}

impl Default for AfXdpOptions {
    fn default() -> Self {
        AfXdpOptions {
            ifname: None,
            n_rxq: 1,
            xdp_mode: XdpMode::Best,
            zero_copy: ZeroCopy::Auto,
            n_frames: 4096,
            frame_size: 2048,
            ring_size: 2048,
            netns: None,
        }
    }
}

impl AfXdpOptions {
    /// Sets option `key` from its configuration text; an error names what is wrong.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let num = |v: &str| -> Result<u32, String> {
            v.parse::<u32>()
                .map_err(|_| format!("afxdp option {key}={v}: not a number"))
        };
        match key {
            "ifname" => self.ifname = Some(value.to_owned()),
            "n_rxq" => self.n_rxq = num(value)? as usize,
            "xdp_mode" => {
                self.xdp_mode = match value {
                    "best" => XdpMode::Best,
                    "native" | "native-with-zerocopy" | "drv" => XdpMode::Native,
                    "generic" | "generic-skb" | "skb" => XdpMode::Generic,
                    _ => {
                        return Err(format!(
                            "afxdp option xdp_mode={value}: expected best, native or generic"
                        ));
                    }
                }
            }
            "zero_copy" => {
                self.zero_copy = match value {
                    "auto" => ZeroCopy::Auto,
                    "true" | "on" | "yes" => ZeroCopy::On,
                    "false" | "off" | "no" => ZeroCopy::Off,
                    _ => {
                        return Err(format!(
                            "afxdp option zero_copy={value}: expected auto, true or false"
                        ));
                    }
                }
            }
            "n_frames" => self.n_frames = num(value)?,
            "frame_size" => self.frame_size = num(value)?,
            "ring_size" => self.ring_size = num(value)?,
            "netns" => self.netns = (!value.is_empty()).then(|| value.to_owned()),
            _ => {
                return Err(format!(
                    "unknown afxdp option '{key}' (ifname, n_rxq, xdp_mode, zero_copy, \
                     n_frames, frame_size, ring_size, netns)"
                ));
            }
        }
        Ok(())
    }

    /// Checks the values (ranges, sizes, combinations) without opening anything.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=256).contains(&self.n_rxq) {
            return Err(format!("n_rxq={} must be 1 to 256", self.n_rxq));
        }
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return Err(format!(
                "frame_size={} must be 2048 or 4096",
                self.frame_size
            ));
        }
        if !(64..=1 << 20).contains(&self.n_frames) || !self.n_frames.is_multiple_of(2) {
            return Err(format!(
                "n_frames={} must be even, 64 to 1048576",
                self.n_frames
            ));
        }
        if !self.ring_size.is_power_of_two() || !(64..=1 << 16).contains(&self.ring_size) {
            return Err(format!(
                "ring_size={} must be a power of two, 64 to 65536",
                self.ring_size
            ));
        }
        if self.xdp_mode == XdpMode::Generic && self.zero_copy == ZeroCopy::On {
            return Err("zero_copy=true needs xdp_mode=native (or best)".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_netns_means_none() {
        let mut o = AfXdpOptions::default();
        o.set("netns", "ns1").unwrap();
        assert_eq!(o.netns.as_deref(), Some("ns1"));
        o.set("netns", "").unwrap();
        assert_eq!(o.netns, None);
    }
}
