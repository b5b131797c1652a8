br0 in_port=2,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,tcp,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_tos=32,nw_ecn=0,nw_ttl=30,tcp_src=40000,tcp_dst=80
