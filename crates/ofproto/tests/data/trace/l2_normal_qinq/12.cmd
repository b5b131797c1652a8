br0 in_port=1,dl_vlan=10,dl_vlan_pcp=0,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:03,udp,nw_src=10.0.0.1,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_dst=10.0.0.3,udp_src=5000,udp_dst=53 -generate
