br1 in_port=4,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,mpls,mpls_label=100,mpls_tc=0,mpls_ttl=64,mpls_bos=1
