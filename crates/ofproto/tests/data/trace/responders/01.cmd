br0 in_port=1,dl_src=00:00:00:00:00:11,dl_dst=ff:ff:ff:ff:ff:ff,arp,arp_op=1,arp_spa=10.0.0.11,arp_tpa=10.0.0.12,arp_sha=00:00:00:00:00:11,arp_tha=00:00:00:00:00:00
