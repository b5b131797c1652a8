//! The stock `ovs-appctl` (Debian package `openvswitch-common`) against our server: what a user
//! with OVS habits types must work. Each test skips, saying why, when `ovs-appctl` is missing.
//!
//! Behaviour of `ovs-appctl` 3.1 these tests rely on: it prints a result to stdout exactly as
//! received and exits 0; on an error reply it writes the error text to stderr, then
//! `ovs-appctl: TARGET: server returned an error`, and exits 2.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{TempDir, registry};
use unixctl::Server;

fn ovs_appctl(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("ovs-appctl"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        eprintln!(
            "SKIP {test}: ovs-appctl is not on PATH (install the Debian package \
             openvswitch-common to run this test)"
        );
    }
    found
}

fn run(appctl: &Path, args: &[&str]) -> Output {
    Command::new(appctl).args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap()
}

#[test]
fn success_prints_result_and_exits_0_or_skip() {
    let Some(appctl) = ovs_appctl("success_prints_result_and_exits_0_or_skip") else {
        return;
    };
    let dir = TempDir::new();
    let server = Server::bind(dir.sock(), registry()).unwrap();
    let target = server.path().to_str().unwrap();

    let out = run(&appctl, &["-t", target, "echo", "br0", "two words", "ünï"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(text(&out.stdout), "br0 two words ünï\n");
    assert_eq!(text(&out.stderr), "");

    let out = run(&appctl, &["-t", target, "dpif/add", "40", "2"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(text(&out.stdout), "42\n");

    // The timeout options are ovs-appctl's own alarm; the request on the wire is unchanged.
    let out = run(&appctl, &["-T", "5", "-t", target, "version"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(text(&out.stdout), "flowpath (test) 0.1.0\n");
    let out = run(&appctl, &["--timeout=5", "--target", target, "version"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn error_goes_to_stderr_with_exit_2_or_skip() {
    let Some(appctl) = ovs_appctl("error_goes_to_stderr_with_exit_2_or_skip") else {
        return;
    };
    let dir = TempDir::new();
    let server = Server::bind(dir.sock(), registry()).unwrap();
    let target = server.path().to_str().unwrap();

    let out = run(&appctl, &["-t", target, "fail", "no such bridge br9"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(text(&out.stdout), "");
    assert_eq!(
        text(&out.stderr),
        format!("no such bridge br9\novs-appctl: {target}: server returned an error\n")
    );
}

#[test]
fn unknown_command_and_argument_counts_or_skip() {
    let Some(appctl) = ovs_appctl("unknown_command_and_argument_counts_or_skip") else {
        return;
    };
    let dir = TempDir::new();
    let server = Server::bind(dir.sock(), registry()).unwrap();
    let target = server.path().to_str().unwrap();
    let trailer = format!("ovs-appctl: {target}: server returned an error\n");

    let out = run(&appctl, &["-t", target, "dpif/nosuch", "a"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        text(&out.stderr),
        format!(
            "\"dpif/nosuch\" is not a valid command (use \"list-commands\" to see a list of \
             valid commands)\n{trailer}"
        )
    );

    let out = run(&appctl, &["-t", target, "dpif/add", "1"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        text(&out.stderr),
        format!("\"dpif/add\" command requires at least 2 arguments\n{trailer}")
    );

    let out = run(&appctl, &["-t", target, "dpif/add", "1", "2", "3"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        text(&out.stderr),
        format!("\"dpif/add\" command takes at most 2 arguments\n{trailer}")
    );
}

#[test]
fn list_commands_or_skip() {
    let Some(appctl) = ovs_appctl("list_commands_or_skip") else {
        return;
    };
    let dir = TempDir::new();
    let server = Server::bind(dir.sock(), registry()).unwrap();
    let target = server.path().to_str().unwrap();

    let out = run(&appctl, &["-t", target, "list-commands"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        text(&out.stdout),
        "The available commands are:\n\
         \x20 dpif/add                A B\n\
         \x20 echo                    [ARG]...\n\
         \x20 fail                    [TEXT]\n\
         \x20 list-commands           \n\
         \x20 version                 \n"
    );
}

#[test]
fn many_invocations_leave_no_connection_behind_or_skip() {
    let Some(appctl) = ovs_appctl("many_invocations_leave_no_connection_behind_or_skip") else {
        return;
    };
    let dir = TempDir::new();
    let server = Server::bind(dir.sock(), registry()).unwrap();
    let target = server.path().to_str().unwrap();
    for i in 0..20 {
        let arg = i.to_string();
        let out = run(&appctl, &["-t", target, "echo", &arg]);
        assert_eq!(text(&out.stdout), format!("{i}\n"));
    }
    // ovs-appctl closes after its one reply; the server notices EOF and ends the thread.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while server.active_connections() != 0 {
        assert!(std::time::Instant::now() < end, "connections left open");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}
