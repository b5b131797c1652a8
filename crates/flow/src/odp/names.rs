//! [`PortNames`]: datapath port names and numbers, both ways.
//!
//! OVS prints ports by name (`in_port(vxlan_sys_4789)`, `tnl_pop(p0)`) in `dpctl/dump-flows -m`
//! and `--names` output, and accepts names wherever a port number goes. A name the map does not
//! know yet is given a fresh number so that parsing never fails on an unfamiliar dump, and
//! printing with the same map gives the name back.

use std::collections::HashMap;

/// The first number handed to an unknown name; later ones count down from here. It sits just
/// below OVS's reserved `ODPP_NONE` (`0xffffffff`) and far above any real datapath port, so an
/// allocated number never collides with a port a dump prints as a number.
pub const FIRST_ALLOCATED_PORT: u32 = 0xffff_feff;

/// A bidirectional map between datapath port names and numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortNames {
    by_name: HashMap<String, u32>,
    by_number: HashMap<u32, String>,
    next: Option<u32>,
}

impl PortNames {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `name` is port `number`, replacing any earlier mapping of either.
    pub fn insert(&mut self, name: &str, number: u32) {
        if let Some(old) = self.by_name.remove(name) {
            self.by_number.remove(&old);
        }
        if let Some(old) = self.by_number.remove(&number) {
            self.by_name.remove(&old);
        }
        self.by_name.insert(name.to_owned(), number);
        self.by_number.insert(number, name.to_owned());
    }

    /// Forgets port `number` and its name.
    pub fn remove(&mut self, number: u32) {
        if let Some(name) = self.by_number.remove(&number) {
            self.by_name.remove(&name);
        }
    }

    /// The number of port `name`.
    pub fn number(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// The name of port `number`.
    pub fn name(&self, number: u32) -> Option<&str> {
        self.by_number.get(&number).map(String::as_str)
    }

    /// The number of `name`, allocating one (counting down from [`FIRST_ALLOCATED_PORT`],
    /// skipping numbers already named) if the name is new.
    pub fn number_or_allocate(&mut self, name: &str) -> u32 {
        if let Some(n) = self.number(name) {
            return n;
        }
        let mut n = self.next.unwrap_or(FIRST_ALLOCATED_PORT);
        while self.by_number.contains_key(&n) {
            n = n.wrapping_sub(1);
        }
        self.next = Some(n.wrapping_sub(1));
        self.insert(name, n);
        n
    }

    /// Number of named ports.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether no port has a name.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// All (name, number) pairs, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> {
        self.by_name.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

/// Writes port `n`, by name when `names` has one.
pub(crate) fn put_port(out: &mut String, names: Option<&PortNames>, n: u32) {
    match names.and_then(|m| m.name(n)) {
        Some(name) => out.push_str(name),
        None => {
            use std::fmt::Write;
            let _ = write!(out, "{n}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_counts_down_and_round_trips() {
        let mut m = PortNames::new();
        m.insert("p0", 1);
        let a = m.number_or_allocate("vxlan_sys_4789");
        assert_eq!(a, FIRST_ALLOCATED_PORT);
        assert_eq!(m.number_or_allocate("vxlan_sys_4789"), a);
        assert_eq!(m.number_or_allocate("vm0"), FIRST_ALLOCATED_PORT - 1);
        assert_eq!(m.name(a), Some("vxlan_sys_4789"));
        assert_eq!(m.number("p0"), Some(1));
        m.insert("p0", 2);
        assert_eq!(m.name(1), None);
        assert_eq!(m.len(), 3);
    }
}
