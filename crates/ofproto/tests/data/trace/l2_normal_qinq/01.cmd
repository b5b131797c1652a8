br0 in_port=1,dl_src=50:54:00:00:00:01,dl_dst=ff:ff:ff:ff:ff:ff,arp,arp_op=1,arp_spa=10.0.0.1,arp_tpa=10.0.0.3,arp_sha=50:54:00:00:00:01,arp_tha=00:00:00:00:00:00
