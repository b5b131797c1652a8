br1 in_port=4,dl_vlan=5,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,icmp,nw_src=10.0.0.1,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_dst=10.0.0.2,icmp_type=8,icmp_code=0
