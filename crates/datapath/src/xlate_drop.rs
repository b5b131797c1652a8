//! Why translation dropped a packet (OVS's `enum xlate_error`), carried by a megaflow's
//! explicit drop action ([`crate::actions::DpAction::Drop`]) so that the datapath counts each
//! packet such a megaflow drops under its reason, as OVS's `drop_action_*` coverage
//! counters do. A megaflow whose actions simply end without an output (the pipeline sent the
//! packet nowhere: no flow matched, or the flows said drop) is OVS's `drop_action_of_pipeline`
//! and needs no reason.

macro_rules! xlate_drops {
    ($($(#[$doc:meta])* $v:ident => $counter:literal, $text:literal;)*) => {
        /// A reason translation dropped a packet for.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum XlateDrop {
            $($(#[$doc])* $v,)*
        }

        impl XlateDrop {
            /// Every reason, in declaration order (for per-reason counter arrays).
            pub const ALL: &'static [XlateDrop] = &[$(XlateDrop::$v,)*];

            /// OVS's coverage counter of the packets dropped for this reason.
            pub fn counter(self) -> &'static str {
                match self {
                    $(XlateDrop::$v => $counter,)*
                }
            }

            /// OVS's words for the reason (`xlate_strerror()`).
            pub fn text(self) -> &'static str {
                match self {
                    $(XlateDrop::$v => $text,)*
                }
            }
        }
    };
}

xlate_drops! {
    /// A frozen packet's bridge is gone.
    BridgeNotFound => "drop_action_bridge_not_found", "Bridge not found";
    /// Resubmits nested too deep.
    RecursionTooDeep => "drop_action_recursion_too_deep", "Recursion too deep";
    /// Too many resubmits in all.
    TooManyResubmits => "drop_action_too_many_resubmit", "Too many resubmits";
    /// The actions' stack outgrew its limit.
    StackTooDeep => "drop_action_stack_too_deep", "Stack too deep";
    /// A recirculated packet whose frozen state is gone.
    NoRecirculationContext => "drop_action_no_recirculation_context", "No recirculation context";
    /// Recirculation state that conflicts with what the packet carries.
    RecirculationConflict => "drop_action_recirculation_conflict", "Recirculation conflict";
    /// More MPLS labels than the datapath parses.
    TooManyMplsLabels => "drop_action_too_many_mpls_labels", "Too many MPLS labels";
    /// GENEVE options the bridge cannot take: an unknown critical option, a mapped option
    /// of another length than its TLV map entry, a malformed option area.
    InvalidTunnelMetadata => "drop_action_invalid_tunnel_metadata", "Invalid tunnel metadata";
    /// A packet type the actions cannot handle.
    UnsupportedPacketType => "drop_action_unsupported_packet_type", "Unsupported packet type";
    /// An outer ECN CE mark over an inner packet that is not ECN-capable (RFC 6040).
    Congestion => "drop_action_congestion", "Congestion Drop";
    /// The input port does not forward (STP/RSTP).
    ForwardingDisabled => "drop_action_forwarding_disabled", "Forwarding is disabled";
}

/// Number of [`XlateDrop`] reasons.
pub const N_XLATE_DROPS: usize = XlateDrop::ALL.len();

impl XlateDrop {
    /// The reason OVS's `xlate_strerror()` calls `text`, if any.
    pub fn from_text(text: &str) -> Option<XlateDrop> {
        XlateDrop::ALL.iter().copied().find(|r| r.text() == text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_round_trips_through_its_text_and_has_an_ovs_counter() {
        for &r in XlateDrop::ALL {
            assert_eq!(XlateDrop::from_text(r.text()), Some(r));
            assert!(r.counter().starts_with("drop_action_"));
        }
        assert_eq!(XlateDrop::from_text("OK"), None);
    }
}
