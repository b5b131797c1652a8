//! `scripts/proc.sh`, which the scripts that stop OVS daemons source: a process that has exited
//! and waits for its reaper (a zombie) is not running, though `kill -0` still finds it. A
//! detached daemon's reaper is init, which in some containers reaps only every second or two:
//! a script waiting by `kill -0` would wait that long for a daemon that stopped at once.

use std::path::Path;
use std::process::Command;

#[test]
fn a_process_waiting_for_its_reaper_is_not_running() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // The inner bash starts a sleep, then becomes another, which never reaps it: the first,
    // once killed, is a zombie until the second ends. No step depends on how fast it runs.
    let script = r#"
        . scripts/proc.sh
        read -r zombie parent < <(bash -c 'sleep 60 & echo $! $$; exec sleep 60')
        proc_running "$zombie" && echo "running while it sleeps"
        proc_wait "$zombie" 1 || echo "still running after a tenth of a second"
        kill "$zombie"
        proc_wait "$zombie" 50 && echo "stopped"
        grep -q '^State:.*Z' "/proc/$zombie/status" && echo "a zombie"
        kill -0 "$zombie" && echo "which kill -0 finds"
        proc_running "$zombie" || echo "not running"
        proc_running "$parent" && echo "its parent running"
        kill "$parent"
        proc_running 0 || echo "no process 0"
    "#;
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(&root)
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout,
        "running while it sleeps\nstill running after a tenth of a second\nstopped\n\
         a zombie\nwhich kill -0 finds\nnot running\nits parent running\nno process 0\n",
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
