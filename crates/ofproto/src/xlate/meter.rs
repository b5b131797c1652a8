//! Meters in translation (OVS's `xlate_meter_action()`): an OpenFlow meter becomes the
//! datapath action `meter(N)` of the datapath meter that runs it, where the rule's instruction
//! puts it (first); a meter the bridge lacks adds nothing. A controller action's `meter_id`
//! meters its packet-ins the same way.

use super::*;

impl Ctx<'_> {
    /// Meters the packet with the bridge's OpenFlow meter `id`.
    pub(super) fn meter(&mut self, id: u32) {
        if let Some(dp) = self.br().meters.dp_id(id) {
            self.out.push(Action::Meter(dp));
        }
    }
}
