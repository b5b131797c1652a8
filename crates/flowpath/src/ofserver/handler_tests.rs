//! The handler against what ovs-vswitchd 3.1 answered (`testdata/openflow/ovs-replies.txt`).
