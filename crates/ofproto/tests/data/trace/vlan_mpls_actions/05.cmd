br0 in_port=3,dl_src=50:54:00:00:00:03,dl_dst=50:54:00:00:00:01,mpls,mpls_label=1000,mpls_tc=0,mpls_ttl=10,mpls_bos=1
