br0 in_port=1,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,tcp6,ipv6_src=2001:db8::1,ipv6_dst=2001:db8::2,nw_tos=0,nw_ttl=64,tcp_src=40000,tcp_dst=80
