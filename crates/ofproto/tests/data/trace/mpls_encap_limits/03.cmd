ovs-dummy in_port(2),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x8847),mpls(label=1,tc=0,ttl=64,bos=0,label=2,tc=0,ttl=64,bos=0,label=3,tc=0,ttl=64,bos=0)
