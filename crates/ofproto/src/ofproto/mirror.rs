//! A bridge's mirrors, set by configuration (the `Mirror` table) and read back for their
//! statistics ([`crate::mirror`]).

use super::Ofproto;
use crate::mirror::{MirrorConfig, reconfigure};

impl Ofproto {
    /// Sets bridge `bridge`'s mirrors to `configs` (a mirror that stays, by name, keeps its
    /// counters). Returns the names of the mirrors over [`crate::mirror::MAX_MIRRORS`], which
    /// are not set up.
    pub fn set_mirrors(
        &self,
        bridge: &str,
        configs: Vec<MirrorConfig>,
    ) -> Result<Vec<String>, String> {
        let mut p = self.write();
        let b = p
            .bridge_mut(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        let unchanged = b.mirrors.len() == configs.len()
            && b.mirrors.iter().zip(&configs).all(|(m, c)| &m.config == c);
        if unchanged {
            return Ok(Vec::new());
        }
        let (mirrors, refused) = reconfigure(&b.mirrors, configs);
        b.mirrors = mirrors;
        drop(p);
        self.changed();
        Ok(refused)
    }

    /// Each mirror of `bridge` with the packets and bytes it has sent.
    pub fn mirror_stats(&self, bridge: &str) -> Vec<(String, u64, u64)> {
        let p = self.read();
        p.bridge(bridge).map_or_else(Vec::new, |b| {
            b.mirrors
                .iter()
                .map(|m| {
                    let (packets, bytes) = m.counters();
                    (m.config.name.clone(), packets, bytes)
                })
                .collect()
        })
    }
}
