br0 in_port=2,dl_vlan=30,dl_vlan_pcp=0,dl_src=50:54:00:00:00:02,dl_dst=ff:ff:ff:ff:ff:ff,udp,nw_src=10.0.0.1,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_dst=10.0.0.9,udp_src=5000,udp_dst=53
