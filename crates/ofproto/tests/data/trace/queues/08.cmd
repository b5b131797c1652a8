br0 in_port=3,dl_src=50:54:00:00:00:03,dl_dst=50:54:00:00:00:01,tcp,nw_src=10.0.0.3,nw_dst=10.0.0.1,nw_tos=0,nw_ecn=0,nw_ttl=64,tcp_src=80,tcp_dst=40000
