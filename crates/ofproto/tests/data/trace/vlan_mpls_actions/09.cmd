br0 in_port=3,dl_src=50:54:00:00:00:03,dl_dst=ff:ff:ff:ff:ff:ff,arp,arp_op=1,arp_spa=10.0.0.3,arp_tpa=10.0.0.2,arp_sha=50:54:00:00:00:03,arp_tha=00:00:00:00:00:00
