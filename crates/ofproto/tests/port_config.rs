//! What a port's OpenFlow configuration and a table's miss configuration do to packets, as
//! OVS's translation has them: `no_flood` leaves a port out of FLOOD (not ALL) and of NORMAL's
//! flooding, `no_fwd` drops output to it, `no_recv` drops its input; a table whose miss
//! configuration is `continue` passes a miss to the next table, `controller` sends it to the
//! controller unless the input port has `no_packet_in`.

mod common;

use ofproto::ofproto::Ofproto;
use ofproto::port_config::{PC_NO_FLOOD, PC_NO_FWD, PC_NO_PACKET_IN, PC_NO_RECV};
use ofproto::table_config::TableMiss;

fn switch() -> std::sync::Arc<Ofproto> {
    common::bridge_with_ports(3)
}

/// The datapath actions `ofproto/trace` gives a packet from port 1.
fn actions(of: &Ofproto) -> String {
    let flow = "in_port=1,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02";
    let t = of.trace("br0", &[flow.into()], false).unwrap();
    let last = t.lines().last().unwrap_or_default();
    last.strip_prefix("Datapath actions: ")
        .unwrap_or_else(|| panic!("{t}"))
        .to_owned()
}

#[test]
fn no_flood_no_fwd_and_no_recv_change_where_packets_go() {
    let of = switch();
    of.port_mod("br0", 2, PC_NO_FLOOD, PC_NO_FLOOD).unwrap();
    of.add_flow("br0", "actions=FLOOD").unwrap();
    assert_eq!(actions(&of), "3");
    of.add_flow("br0", "actions=ALL").unwrap();
    assert_eq!(actions(&of), "2,3");
    of.add_flow("br0", "actions=NORMAL").unwrap();
    assert_eq!(actions(&of), "3");
    of.port_mod("br0", 3, PC_NO_FWD, PC_NO_FWD).unwrap();
    of.add_flow("br0", "actions=output:3,output:2").unwrap();
    assert_eq!(actions(&of), "2");
    of.port_mod("br0", 1, PC_NO_RECV, PC_NO_RECV).unwrap();
    assert_eq!(actions(&of), "drop");
    of.port_mod("br0", 1, 0, PC_NO_RECV).unwrap();
    assert_eq!(actions(&of), "2");
}

#[test]
fn a_tables_miss_configuration_continues_or_asks_the_controller() {
    let of = switch();
    of.add_flow("br0", "table=2,actions=output:2").unwrap();
    assert_eq!(actions(&of), "drop");
    of.table_mod("br0", 0, |c| c.miss = TableMiss::Continue)
        .unwrap();
    assert_eq!(actions(&of), "drop", "table 1 drops its misses");
    of.table_mod("br0", 1, |c| c.miss = TableMiss::Continue)
        .unwrap();
    assert_eq!(actions(&of), "2");
    of.table_mod("br0", 1, |c| c.miss = TableMiss::Controller)
        .unwrap();
    assert!(actions(&of).contains("userspace("), "{}", actions(&of));
    of.port_mod("br0", 1, PC_NO_PACKET_IN, PC_NO_PACKET_IN)
        .unwrap();
    assert_eq!(actions(&of), "drop");
}
