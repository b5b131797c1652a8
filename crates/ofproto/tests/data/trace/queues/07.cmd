br0 in_port=2,skb_priority=0x9,pkt_mark=1,dl_src=50:54:00:00:00:02,dl_dst=50:54:00:00:00:01,arp,arp_op=1,arp_spa=10.0.0.2,arp_tpa=10.0.0.1,arp_sha=50:54:00:00:00:02,arp_tha=00:00:00:00:00:00
