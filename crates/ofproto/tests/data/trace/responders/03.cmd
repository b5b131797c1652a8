br0 in_port=1,dl_src=00:00:00:00:00:11,dl_dst=00:00:00:00:ff:01,icmp,nw_src=10.0.0.11,nw_dst=10.0.0.1,nw_tos=0,nw_ecn=0,nw_ttl=64,icmp_type=8,icmp_code=0
