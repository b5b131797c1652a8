//! `flowpath run --ovsdb`: `ovs-vsctl` configures flowpath through Debian's own `ovsdb-server`
//! as it configures `ovs-vswitchd` (bridges, ports of several types, a bad type, ofport
//! requests, controllers, deletions), `ovs-vsctl --timeout=5` never times out, ofports survive
//! a restart of flowpath, an `ovsdb-server` restart is resynchronised without touching running
//! ports, a second flowpath waits for the lock, and packets cross a bridge made by `ovs-vsctl`.
//! Interfaces are dummy ports (`--enable-dummy`), so that no root is needed. Skipped, with the
//! reason printed, where OVS's tools are not installed.

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::netns::{in_path, wait_until};
use common::ofctl::{client, exchange, port_statuses, unhex};
use common::ovsdb::ADD_BR0;
use common::{Reap, ctl, ok, scratch_dir};

/// A private `ovsdb-server` with a fresh Open_vSwitch database in `dir`.
struct Ovsdb {
    dir: PathBuf,
}

impl Ovsdb {
    fn create(dir: &Path) -> Ovsdb {
        let db = dir.join("conf.db");
        let o = Command::new("ovsdb-tool")
            .arg("create")
            .arg(&db)
            .arg("/usr/share/openvswitch/vswitch.ovsschema")
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        let s = Ovsdb {
            dir: dir.to_path_buf(),
        };
        s.start();
        s.vsctl_ok(&["--no-wait", "init"]);
        s
    }

    fn start(&self) {
        let d = self.dir.display();
        let o = Command::new("ovsdb-server")
            .arg(self.dir.join("conf.db"))
            .arg(format!("--remote=punix:{d}/db.sock"))
            .arg(format!("--unixctl={d}/ovsdb-server.ctl"))
            .arg(format!("--pidfile={d}/ovsdb-server.pid"))
            .arg(format!("--log-file={d}/ovsdb-server.log"))
            .arg("--detach")
            .env("OVS_RUNDIR", &self.dir)
            .env("OVS_DBDIR", &self.dir)
            .env("OVS_LOGDIR", &self.dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    }

    fn stop(&self) {
        let _ = Command::new("ovs-appctl")
            .arg("-t")
            .arg(self.dir.join("ovsdb-server.ctl"))
            .arg("exit")
            .output();
        let sock = self.dir.join("db.sock");
        wait_until(Duration::from_secs(5), || !sock.exists());
    }

    fn target(&self) -> String {
        format!("unix:{}", self.dir.join("db.sock").display())
    }

    /// `ovs-vsctl --timeout=5 ARGS`: status, stdout, stderr.
    fn vsctl(&self, args: &[&str]) -> (bool, String, String) {
        let o = Command::new("ovs-vsctl")
            .arg(format!("--db={}", self.target()))
            .arg("--timeout=5")
            .args(args)
            .env("OVS_RUNDIR", &self.dir)
            .output()
            .unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).trim().to_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// `ovs-vsctl` that must succeed (it times out if flowpath never catches up with
    /// next_cfg) and print no error: its output.
    fn vsctl_ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.vsctl(args);
        assert!(ok && err.is_empty(), "ovs-vsctl {args:?}: {err}");
        out
    }
}

impl Drop for Ovsdb {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `flowpath run --ovsdb` on `db`, its run directory `rundir`, its stderr in `log`.
fn flowpath(db: &Ovsdb, rundir: &Path, log: &Path) -> Reap {
    let child = Reap(
        Command::new(env!("CARGO_BIN_EXE_flowpath"))
            .args(["run", "--enable-dummy", "--ovsdb", &db.target()])
            .arg("--unixctl=ovs-vswitchd.ctl")
            .arg("--rundir")
            .arg(rundir)
            .stdout(Stdio::null())
            .stderr(File::create(log).unwrap())
            .spawn()
            .unwrap(),
    );
    assert!(
        wait_until(Duration::from_secs(20), || rundir
            .join("ovs-vswitchd.ctl")
            .exists()),
        "no control socket"
    );
    child
}

/// flowpath on a database of its own, with bridge br0 added by `ovs-vsctl`.
struct Br0 {
    // Dropped in this order: the switch, then the database, then the directory.
    _fp: Reap,
    db: Ovsdb,
    rundir: PathBuf,
    log: PathBuf,
    _rm: common::RmDir,
}

fn br0_over_ovsdb(tag: &str) -> Br0 {
    let (dir, rm) = scratch_dir(tag);
    let db = Ovsdb::create(&dir);
    let rundir = dir.join("run");
    let log = dir.join("flowpath.log");
    let fp = flowpath(&db, &rundir, &log);
    db.vsctl_ok(ADD_BR0);
    Br0 {
        _fp: fp,
        db,
        rundir,
        log,
        _rm: rm,
    }
}

/// Whether OVS's tools are here; prints why the test is skipped when not.
fn have_ovs(test: &str) -> bool {
    for tool in ["ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-appctl"] {
        if !in_path(tool) {
            println!("{test}: skipped: {tool} is not installed");
            return false;
        }
    }
    if !Path::new("/usr/share/openvswitch/vswitch.ovsschema").exists() {
        println!("{test}: skipped: no /usr/share/openvswitch/vswitch.ovsschema");
        return false;
    }
    true
}

fn log_count(log: &Path, what: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .matches(what)
        .count()
}

#[test]
fn ovs_vsctl_configures_flowpath_and_reads_back_what_ovs_vswitchd_writes() {
    if !have_ovs("ovsdb_run") {
        return;
    }
    let (dir, _rm) = scratch_dir("fp-ovsdb-run");
    let db = Ovsdb::create(&dir);
    let rundir = dir.join("run");
    let log = dir.join("flowpath.log");
    let mut fp = flowpath(&db, &rundir, &log);

    db.vsctl_ok(ADD_BR0);
    assert_eq!(db.vsctl_ok(&["get", "Interface", "br0", "ofport"]), "65534");
    db.vsctl_ok(&["add-port", "br0", "veth0"]);
    let veth0 = db.vsctl_ok(&["get", "Interface", "veth0", "ofport"]);
    assert!(veth0.parse::<u32>().is_ok_and(|n| n > 0), "{veth0}");
    db.vsctl_ok(&[
        "add-port",
        "br0",
        "p1",
        "--",
        "set",
        "Interface",
        "p1",
        "type=internal",
        "ofport_request=7",
    ]);
    assert_eq!(db.vsctl_ok(&["get", "Interface", "p1", "ofport"]), "7");

    // A bad type: OVS's report from ovs-vsctl, ofport -1, the rest still applies.
    let (success, _, err) = db.vsctl(&[
        "add-port",
        "br0",
        "bogus",
        "--",
        "set",
        "Interface",
        "bogus",
        "type=nonesuch",
    ]);
    assert!(success, "{err}");
    assert!(
        err.contains(
            "Error detected while setting up 'bogus': could not open network device bogus \
             (Address family not supported by protocol)"
        ),
        "{err}"
    );
    assert_eq!(db.vsctl_ok(&["get", "Interface", "bogus", "ofport"]), "-1");

    db.vsctl_ok(&[
        "add-port",
        "br0",
        "gnv0",
        "--",
        "set",
        "Interface",
        "gnv0",
        "type=geneve",
        "options:remote_ip=172.31.0.2",
        "options:key=flow",
    ]);
    let gnv0 = db.vsctl_ok(&["get", "Interface", "gnv0", "ofport"]);
    assert!(gnv0.parse::<u32>().is_ok_and(|n| n > 0), "{gnv0}");
    db.vsctl_ok(&[
        "add-br",
        "br1",
        "--",
        "add-port",
        "br1",
        "patch1",
        "--",
        "set",
        "Interface",
        "patch1",
        "type=patch",
        "options:peer=patch0",
        "--",
        "add-port",
        "br0",
        "patch0",
        "--",
        "set",
        "Interface",
        "patch0",
        "type=patch",
        "options:peer=patch1",
    ]);
    assert_eq!(db.vsctl_ok(&["get", "Interface", "patch1", "error"]), "[]");

    let types = db.vsctl_ok(&["get", "Open_vSwitch", ".", "iface_types"]);
    for t in [
        "internal",
        "geneve",
        "vxlan",
        "patch",
        "dpdkvhostuserclient",
        "system",
    ] {
        assert!(types.contains(t), "{types}");
    }
    assert_eq!(
        db.vsctl_ok(&["get", "Open_vSwitch", ".", "datapath_types"]),
        "[netdev, system]"
    );
    // The Datapath row ovn-controller makes gets the capabilities.
    db.vsctl_ok(&[
        "--",
        "--id=@dp",
        "create",
        "Datapath",
        "external_ids:owner=test",
        "--",
        "set",
        "Open_vSwitch",
        ".",
        "datapaths:netdev=@dp",
    ]);
    let caps = db.vsctl_ok(&["list", "Datapath"]);
    assert!(
        caps.contains("ct_zero_snat") && caps.contains("max_hash_alg"),
        "{caps}"
    );
    let dpid = db.vsctl_ok(&["get", "Bridge", "br0", "datapath_id"]);
    assert_eq!(dpid.trim_matches('"').len(), 16, "{dpid}");
    db.vsctl_ok(&[
        "set",
        "Bridge",
        "br0",
        "other_config:hwaddr=\"02:00:00:00:00:aa\"",
    ]);
    assert!(wait_until(Duration::from_secs(5), || db.vsctl_ok(&[
        "get",
        "Bridge",
        "br0",
        "datapath_id"
    ]) == "\"00000200000000aa\""));
    // A configured datapath id is the bridge's, in the column and on the OpenFlow wire.
    db.vsctl_ok(&[
        "set",
        "Bridge",
        "br0",
        "other_config:datapath-id=0000feedfacef00d",
    ]);
    assert!(wait_until(Duration::from_secs(5), || db.vsctl_ok(&[
        "get",
        "Bridge",
        "br0",
        "datapath_id"
    ]) == "\"0000feedfacef00d\""));
    let show = Command::new("ovs-ofctl")
        .args(["show", &format!("unix:{}/br0.mgmt", rundir.display())])
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(show.contains("dpid:0000feedfacef00d"), "{show}");

    // A controller that answers: is_connected comes true.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        if let Ok((mut s, _)) = listener.accept() {
            // OpenFlow 1.3 HELLO, then keep reading (echo replies are not needed here).
            let _ = s.write_all(&[4, 0, 0, 8, 0, 0, 0, 1]);
            let mut buf = [0; 4096];
            while s.read(&mut buf).is_ok_and(|n| n > 0) {}
        }
    });
    db.vsctl_ok(&["set-controller", "br0", &format!("tcp:127.0.0.1:{port}")]);
    assert!(
        wait_until(Duration::from_secs(10), || db.vsctl_ok(&[
            "get",
            "Controller",
            "br0",
            "is_connected"
        ]) == "true"),
        "{}",
        db.vsctl_ok(&["list", "Controller"])
    );
    db.vsctl_ok(&["del-controller", "br0"]);

    // Packets cross the bridge between two dummy ports (NORMAL floods the first).
    db.vsctl_ok(&[
        "add-port",
        "br0",
        "p2",
        "--",
        "set",
        "Interface",
        "p2",
        "type=dummy",
        "--",
        "add-port",
        "br0",
        "p3",
        "--",
        "set",
        "Interface",
        "p3",
        "type=dummy",
    ]);
    let frame =
        "ffffffffffff00000000000108004500001c0001000040117cce0a0000010a00000204d204d2000800000000";
    ok(ctl(&rundir, &["netdev-dummy/receive", "p2", frame]));
    assert!(
        wait_until(Duration::from_secs(10), || {
            // Absent until the first refresh.
            let (_, s, _) = db.vsctl(&["get", "Interface", "p3", "statistics:tx_packets"]);
            s.parse::<u64>().is_ok_and(|n| n >= 1)
        }),
        "{}",
        db.vsctl_ok(&["get", "Interface", "p3", "statistics"])
    );

    // Restart flowpath: the numbers come back from the database.
    drop(fp);
    let p2 = db.vsctl_ok(&["get", "Interface", "p2", "ofport"]);
    let p3 = db.vsctl_ok(&["get", "Interface", "p3", "ofport"]);
    let _ = std::fs::remove_file(rundir.join("ovs-vswitchd.ctl"));
    fp = flowpath(&db, &rundir, &log);
    db.vsctl_ok(&[
        "add-port",
        "br0",
        "p4",
        "--",
        "set",
        "Interface",
        "p4",
        "type=dummy",
    ]);
    assert_eq!(db.vsctl_ok(&["get", "Interface", "p1", "ofport"]), "7");
    assert_eq!(db.vsctl_ok(&["get", "Interface", "veth0", "ofport"]), veth0);
    assert_eq!(db.vsctl_ok(&["get", "Interface", "gnv0", "ofport"]), gnv0);
    assert_eq!(db.vsctl_ok(&["get", "Interface", "p2", "ofport"]), p2);
    assert_eq!(db.vsctl_ok(&["get", "Interface", "p3", "ofport"]), p3);

    // What the datapath supports, logged once as ovs-vswitchd logs it when its first bridge
    // opens the datapath (OVN's system tests grep for these lines).
    assert_eq!(
        log_count(
            &log,
            "ofproto_dpif|INFO|netdev@flowpath: Datapath supports ct_zero_snat"
        ),
        1
    );
    assert_eq!(log_count(&log, "Datapath supports ct_clear action"), 1);

    // ovsdb-server goes away and comes back: the ports that run are left alone.
    let added = log_count(&log, "added interface p2");
    db.stop();
    ok(ctl(&rundir, &["netdev-dummy/receive", "p2", frame]));
    db.start();
    db.vsctl_ok(&[
        "add-port",
        "br0",
        "p5",
        "--",
        "set",
        "Interface",
        "p5",
        "type=dummy",
    ]);
    assert_eq!(log_count(&log, "added interface p2"), added);
    assert!(db.vsctl_ok(&["get", "Interface", "p5", "ofport"]) != "-1");

    // OVS 3.1's load-based PMD sleep, clamped and logged as OVS logs it.
    db.vsctl_ok(&[
        "set",
        "Open_vSwitch",
        ".",
        "other_config:pmd-maxsleep=50000",
    ]);
    assert!(
        wait_until(Duration::from_secs(10), || log_count(
            &log,
            "PMD max sleep request is 10000 usecs."
        ) == 1
            && log_count(&log, "PMD load based sleeps are enabled.") == 1),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    db.vsctl_ok(&[
        "remove",
        "Open_vSwitch",
        ".",
        "other_config",
        "pmd-maxsleep",
    ]);
    assert!(
        wait_until(Duration::from_secs(10), || log_count(
            &log,
            "PMD load based sleeps are disabled."
        ) >= 1),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );

    // An interface that ran and then cannot (a type nothing opens) is written back failed,
    // its statistics and status cleared (empty maps): the switch catches up and ovs-vsctl
    // returns.
    db.vsctl_ok(&["set", "Interface", "p5", "type=no-such-type"]);
    assert_eq!(db.vsctl_ok(&["get", "Interface", "p5", "ofport"]), "-1");
    assert_eq!(db.vsctl_ok(&["get", "Interface", "p5", "statistics"]), "{}");
    db.vsctl_ok(&["set", "Interface", "p5", "type=dummy"]);
    assert!(db.vsctl_ok(&["get", "Interface", "p5", "ofport"]) != "-1");

    // A second flowpath waits for the lock and says so.
    let rundir2 = dir.join("run2");
    let log2 = dir.join("flowpath2.log");
    let second = flowpath(&db, &rundir2, &log2);
    assert!(
        wait_until(Duration::from_secs(10), || log_count(
            &log2,
            "another ovs-vswitchd process is running, disabling this process until it goes away"
        ) == 1),
        "{}",
        std::fs::read_to_string(&log2).unwrap_or_default()
    );
    drop(second);

    // Deletions release the ports.
    db.vsctl_ok(&["del-port", "br0", "veth0"]);
    db.vsctl_ok(&["del-br", "br1"]);
    db.vsctl_ok(&["del-br", "br0"]);
    let show = ok(ctl(&rundir, &["dpif/show"]));
    assert!(!show.contains("veth0") && !show.contains("p1"), "{show}");
    drop(fp);
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!log_text.contains("panicked"), "{log_text}");
}

#[test]
fn other_config_metrics_listen_moves_the_endpoint_while_running() {
    if !have_ovs("ovsdb_run metrics-listen") {
        return;
    }
    let sw = br0_over_ovsdb("fp-ovsdb-metrics");
    let (db, rundir, log) = (&sw.db, sw.rundir.clone(), sw.log.clone());
    let serves = |addr: &str| {
        wait_until(Duration::from_secs(10), || {
            common::http_get(addr, "/metrics", "").is_some_and(|(s, b)| {
                s == 200 && b.contains("flowpath_openflow_rules{bridge=\"br0\"")
            })
        })
    };
    let gone = |addr: &str| {
        wait_until(Duration::from_secs(10), || {
            std::net::TcpStream::connect(addr).is_err()
        })
    };
    let a = format!("127.0.0.1:{}", common::free_port());
    db.vsctl_ok(&[
        "set",
        "Open_vSwitch",
        ".",
        &format!("other_config:metrics-listen={a}"),
    ]);
    assert!(serves(&a), "not serving on {a}");
    let b = format!("127.0.0.1:{}", common::free_port());
    db.vsctl_ok(&[
        "set",
        "Open_vSwitch",
        ".",
        &format!("other_config:metrics-listen={b}"),
    ]);
    assert!(serves(&b), "not serving on {b}");
    assert!(gone(&a), "still listening on {a}");
    // A port in use: logged, the switch runs on and follows the next change.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let t = taken.local_addr().unwrap().to_string();
    db.vsctl_ok(&[
        "set",
        "Open_vSwitch",
        ".",
        &format!("other_config:metrics-listen={t}"),
    ]);
    assert!(
        wait_until(Duration::from_secs(10), || log_count(
            &log,
            &format!("cannot listen on {t}")
        ) == 1),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(gone(&b), "still listening on {b}");
    db.vsctl_ok(&[
        "set",
        "Open_vSwitch",
        ".",
        "other_config:metrics-listen=nonsense",
    ]);
    assert!(
        wait_until(Duration::from_secs(10), || log_count(
            &log,
            "other_config:metrics-listen: 'nonsense' is not an address"
        ) == 1),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    db.vsctl_ok(&[
        "set",
        "Open_vSwitch",
        ".",
        &format!("other_config:metrics-listen={a}"),
    ]);
    assert!(serves(&a), "not serving on {a} again");
    db.vsctl_ok(&[
        "remove",
        "Open_vSwitch",
        ".",
        "other_config",
        "metrics-listen",
    ]);
    assert!(gone(&a), "still listening on {a} after removal");
    assert!(ok(ctl(&rundir, &["dpif/show"])).contains("br0"));
}

#[test]
fn add_br_returns_once_the_bridge_listens_for_openflow() {
    if !have_ovs("ovsdb_run add-br listener") {
        return;
    }
    let (dir, _rm) = scratch_dir("fp-ovsdb-mgmt");
    let db = Ovsdb::create(&dir);
    let rundir = dir.join("run");
    let log = dir.join("flowpath.log");
    let _fp = flowpath(&db, &rundir, &log);
    // As ovs-vswitchd, the socket is there when ovs-vsctl returns: ovn-controller connects
    // to it as soon as it sees the bridge, and logs a warning if it is not.
    for br in ["br0", "br-int", "br-ex"] {
        db.vsctl_ok(&[
            "add-br",
            br,
            "--",
            "set",
            "bridge",
            br,
            "datapath_type=netdev",
        ]);
        let sock = rundir.join(format!("{br}.mgmt"));
        assert!(sock.exists(), "no {} when add-br returned", sock.display());
    }
}

#[test]
fn ovs_vsctl_returns_once_the_port_status_is_sent() {
    if !have_ovs("ovsdb_run port status") {
        return;
    }
    let sw = br0_over_ovsdb("fp-ovsdb-portstatus");
    let (db, rundir) = (&sw.db, sw.rundir.clone());
    // A controller's connection, told of ports (miss_send_len set), as ovn-controller's.
    let mut conn = client(&rundir.join("br0.mgmt"));
    assert!(exchange(&mut conn, &unhex("0409000c000000050000ffff")).is_empty());
    // As ovs-vswitchd, the port's OFPT_PORT_STATUS comes before cur_cfg, so before the answer
    // to a barrier sent when ovs-vsctl returns.
    for n in 1..=5u32 {
        let name = format!("p{n}");
        db.vsctl_ok(&[
            "add-port",
            "br0",
            &name,
            "--",
            "set",
            "interface",
            &name,
            "type=dummy",
            &format!("ofport_request={n}"),
        ]);
        let seen = port_statuses(&exchange(&mut conn, &[]));
        assert_eq!(
            seen.first(),
            Some(&("00".to_owned(), format!("{n:08x}"))),
            "{name}: {seen:?}"
        );
        db.vsctl_ok(&["del-port", "br0", &name]);
        let seen = port_statuses(&exchange(&mut conn, &[]));
        assert!(
            seen.contains(&("01".to_owned(), format!("{n:08x}"))),
            "{name}: no OFPPR_DELETE before the barrier: {seen:?}"
        );
    }
}
