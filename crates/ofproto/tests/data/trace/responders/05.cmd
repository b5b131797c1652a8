br0 in_port=1,dl_src=00:00:00:00:00:11,dl_dst=00:00:00:00:00:12,icmp6,ipv6_src=fe80::11,ipv6_dst=fe80::12,nw_tos=0,nw_ecn=0,nw_ttl=64,icmpv6_type=128,icmpv6_code=0
