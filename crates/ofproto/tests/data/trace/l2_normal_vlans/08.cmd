br0 in_port=3,dl_vlan=30,dl_vlan_pcp=0,dl_src=50:54:00:00:00:03,dl_dst=50:54:00:00:00:09,udp,nw_src=10.0.0.3,nw_dst=10.0.0.9,nw_tos=0,nw_ecn=0,nw_ttl=64,udp_src=53,udp_dst=5000
