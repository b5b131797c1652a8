"""A MAC-learning switch for OpenFlow 1.3, as an os-ken application (the learning switch of
os-ken's and Ryu's tutorials, simple_switch_13, which the os-ken package no longer ships).

When a switch connects, a table-miss flow (priority 0) sends every packet to the controller.
Each packet-in teaches the switch's table which port the source address is behind; a packet
to a known address is sent there and gets a flow (priority 1), so its followers stay in the
switch; any other is flooded.

Run: osken-manager --ofp-listen-host 127.0.0.1 --ofp-tcp-listen-port PORT learning_switch_13.py
"""

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ethernet, packet
from os_ken.ofproto import ofproto_v1_3


class LearningSwitch13(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Datapath id -> {MAC address: port}.
        self.where = {}

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def switch_connected(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        to_controller = parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)
        self.install(dp, 0, parser.OFPMatch(), [to_controller])

    def install(self, dp, priority, match, actions):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        apply = parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)
        dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=priority, match=match,
                                      instructions=[apply]))

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        in_port = msg.match["in_port"]
        eth = packet.Packet(msg.data).get_protocol(ethernet.ethernet)
        if eth is None:
            return
        ports = self.where.setdefault(dp.id, {})
        ports[eth.src] = in_port
        out = ports.get(eth.dst, ofp.OFPP_FLOOD)
        actions = [parser.OFPActionOutput(out)]
        if out != ofp.OFPP_FLOOD:
            match = parser.OFPMatch(in_port=in_port, eth_src=eth.src, eth_dst=eth.dst)
            self.install(dp, 1, match, actions)
        data = msg.data if msg.buffer_id == ofp.OFP_NO_BUFFER else None
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=msg.buffer_id,
                                        in_port=in_port, actions=actions, data=data))
