//! The data stack of `push:` and `pop:` (OVS's `nxm_execute_stack_push/pop()`): a stack of
//! byte strings that lives for one translation. It survives `resubmit` and `goto_table` (it is
//! how OVN saves registers across a call into another table), is copied into a `clone` and
//! restored after it, starts empty in the peer bridge of a patch port, and is frozen with the
//! rest of the state when translation recirculates.
//!
//! The layout is OVS's: each value is pushed as its subfield's bytes (the width rounded up to
//! whole bytes, most significant first) followed by one byte holding that length, so a pop
//! reads the length and then the value. Popping from an empty stack is reported and does
//! nothing; a translation whose stack has reached 64 kB when it looks up a table fails
//! (`Stack too deep`).

use super::{Ctx, NodeKind};
use crate::fields::Subfield;
use crate::syntax::value::put_field_value;

/// The stack size at which a table lookup fails (OVS's limit).
pub(super) const STACK_MAX: usize = 65536;

impl Ctx<'_> {
    /// `push:SRC`: the subfield's bits, which the megaflow then matches.
    pub(super) fn stack_push(&mut self, sf: &Subfield) {
        sf.unwildcard(&mut self.wc);
        let v = sf.read(&self.flow);
        let bytes = sf.n_bits.div_ceil(8) as usize;
        // A field wider than 128 bits has zeros above what the pipeline holds.
        self.stack
            .resize(self.stack.len() + bytes.saturating_sub(16), 0);
        let n = bytes.min(16);
        self.stack.extend_from_slice(&v.to_be_bytes()[16 - n..]);
        self.stack.push(bytes as u8);
    }

    /// `pop:DST`: the top value, its low bits written to the subfield (a shorter value is
    /// zero-extended).
    pub(super) fn stack_pop(&mut self, sf: &Subfield) {
        let Some(&len) = self.stack.last() else {
            self.trace_add(NodeKind::Error, "stack underflow");
            return;
        };
        let len = usize::from(len);
        let end = self.stack.len() - 1;
        let start = end - len;
        let v = self.stack[start..end]
            .iter()
            .fold(0u128, |v, &b| (v << 8) | u128::from(b));
        self.stack.truncate(start);
        sf.unwildcard(&mut self.wc);
        sf.write(&mut self.flow, v);
        if self.trace.is_some() {
            let text = report_subfield(sf, &self.flow);
            self.note(text);
        }
    }
}

/// OVS's `xlate_report_subfield()`: `NXM_NX_REG0[] is now 0x5`, the whole field in its own
/// syntax, part of one in hexadecimal.
pub(super) fn report_subfield(sf: &Subfield, flow: &crate::pipekey::PipeKey) -> String {
    let f = sf.field.field();
    let mut s = format!("{sf} is now ");
    if sf.ofs == 0 && sf.n_bits >= f.n_bits {
        put_field_value(
            &mut s,
            f,
            f.get(flow),
            f.full_mask(),
            &crate::syntax::NoPortNames,
        );
    } else {
        match sf.read(flow) {
            0 => s.push('0'),
            v => s.push_str(&format!("{v:#x}")),
        }
    }
    s
}
