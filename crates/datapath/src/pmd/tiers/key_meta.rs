//! What a recirculated packet's key gets from its metadata (recirc_id, dp_hash, packet mark,
//! packet type, connection state, zone, mark and label), held for the first packet of a batch
//! and compared with each other packet's: the later passes' lookups (the metadata match, the
//! simple match of a recirculated batch) find a packet that agrees with the first one there
//! in the first one's megaflow, without making its key's metadata words.

use crate::packet::{Packet, TnlMd};

/// The metadata of the first packet of a batch that its key's metadata words are made from
/// (but in_port, which the batch shares), held for the compare with each other packet's.
pub(in crate::pmd) struct KeyMeta {
    recirc_id: u32,
    dp_hash: u32,
    pkt_mark: u32,
    packet_type: u32,
    ct_state: u8,
    ct_zone: u16,
    /// Whether the connection's mark and label are compared too: the packet is tracked and
    /// the megaflow looks at them (a field whose mask bits are all zero cannot tell two keys
    /// apart).
    mark_or_label: bool,
    mark_label: (u32, u128),
}

impl KeyMeta {
    /// Packet `p`'s (without tunnel metadata); its mark and label if `mark_or_label`.
    #[inline(always)]
    pub(in crate::pmd) fn of(p: &Packet, mark_or_label: bool) -> KeyMeta {
        let m = &p.meta;
        let mark_or_label = mark_or_label && m.ct_state != 0;
        KeyMeta {
            recirc_id: m.recirc_id,
            dp_hash: m.dp_hash,
            pkt_mark: m.pkt_mark,
            packet_type: m.packet_type,
            ct_state: m.ct_state,
            ct_zone: m.ct_zone,
            mark_or_label,
            mark_label: if mark_or_label {
                crate::ct::mark_and_label(p)
            } else {
                (0, 0)
            },
        }
    }

    /// Whether packet `p`'s key would get the same metadata words, on the bits the megaflow
    /// looks at.
    #[inline(always)]
    pub(in crate::pmd) fn same(&self, p: &Packet) -> bool {
        let m = &p.meta;
        let differ = (m.recirc_id ^ self.recirc_id)
            | (m.dp_hash ^ self.dp_hash)
            | (m.pkt_mark ^ self.pkt_mark)
            | (m.packet_type ^ self.packet_type);
        differ == 0 && self.same_connection(p)
    }

    /// [`Self::same`] for a batch whose packets agree with the first one on the rest
    /// ([`MetaSplit`]'s `fixed`; `recirc` gave them all one recirc_id): on the connection
    /// fields `ct()` set, and the tunnel metadata.
    #[inline(always)]
    pub(in crate::pmd) fn same_connection(&self, p: &Packet) -> bool {
        let m = &p.meta;
        let differ = u32::from(m.ct_state ^ self.ct_state)
            | u32::from(m.ct_zone ^ self.ct_zone)
            | u32::from(m.tunnel != TnlMd::None);
        differ == 0 && (!self.mark_or_label || crate::ct::mark_and_label(p) == self.mark_label)
    }
}
