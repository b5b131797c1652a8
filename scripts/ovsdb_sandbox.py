"""A private Open vSwitch database with a switch driving it, for the OVSDB scripts
(capture-vsctl-script, ovsdb-idl-writers, ovsdb-scale).

A temporary directory holds a fresh conf.db (Debian's vswitch.ovsschema, OVS 3.1) served by a
private ovsdb-server on DIR/db.sock, and one switch: Debian's ovs-vswitchd (--enable-dummy=override
--disable-system --disable-system-route: nothing of the host's is touched) or `flowpath run
--ovsdb unix:DIR/db.sock --enable-dummy=override --rundir DIR` (the same promise). OVS_RUNDIR, OVS_DBDIR, OVS_LOGDIR and OVS_SYSCONFDIR
point at the directory, so ovs-vsctl and ovs-appctl find the private daemons only.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time

SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"


class Sandbox:
    """ovsdb-server and a switch (`ovs` or `flowpath`, whose binary is `flowpath_bin`)."""

    def __init__(self, switch="ovs", flowpath_bin=None, prefix="ovsdb-sandbox-"):
        self.switch = switch
        self.flowpath_bin = flowpath_bin
        self.dir = tempfile.mkdtemp(prefix=prefix)
        d = self.dir
        self.env = dict(os.environ, OVS_RUNDIR=d, OVS_LOGDIR=d, OVS_DBDIR=d, OVS_SYSCONFDIR=d)
        self.db = f"unix:{d}/db.sock"
        self.child = None
        self.syncs = 0
        self._run("ovsdb-tool", "create", f"{d}/conf.db", SCHEMA)
        self._run("ovsdb-server", "--detach", "--no-chdir", f"--pidfile={d}/ovsdb-server.pid",
                  f"--remote=punix:{d}/db.sock", f"--unixctl={d}/ovsdb-server.ctl",
                  f"--log-file={d}/ovsdb-server.log", f"{d}/conf.db")
        self._run("ovs-vsctl", f"--db={self.db}", "--no-wait", "init")

    def _run(self, *argv):
        subprocess.run(argv, check=True, env=self.env, capture_output=True)

    def start_switch(self):
        """Starts the switch; returns once it can be asked things (not once it configured)."""
        d = self.dir
        if self.switch == "ovs":
            self._run("ovs-vswitchd", "--detach", "--no-chdir", f"--pidfile={d}/ovs-vswitchd.pid",
                      f"--unixctl={d}/ovs-vswitchd.ctl", "--enable-dummy=override",
                      "--disable-system", "--disable-system-route",
                      f"--log-file={d}/ovs-vswitchd.log", self.db)
            return
        log = open(f"{d}/flowpath.log", "ab")
        self.child = subprocess.Popen(
            [self.flowpath_bin, "run", "--ovsdb", self.db, "--enable-dummy=override", "--rundir", d,
             f"--unixctl={d}/ovs-vswitchd.ctl"],
            env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        for _ in range(200):
            if os.path.exists(f"{d}/ovs-vswitchd.ctl") or self.child.poll() is not None:
                break
            time.sleep(0.05)

    def stop_switch(self):
        """Stops the switch and waits until it is gone."""
        if self.switch == "flowpath":
            if self.child is not None:
                self.child.send_signal(signal.SIGTERM)
                try:
                    self.child.wait(10)
                except subprocess.TimeoutExpired:
                    self.child.kill()
                    self.child.wait()
                self.child = None
            return
        pid = _pid(f"{self.dir}/ovs-vswitchd.pid")
        subprocess.run(["ovs-appctl", "-t", f"{self.dir}/ovs-vswitchd.ctl", "exit"],
                       env=self.env, capture_output=True)
        _wait_gone(pid)

    def vsctl(self, *args, timeout=5):
        """ovs-vsctl ARGS on the private database: (exit status, stdout, stderr)."""
        argv = ["ovs-vsctl", f"--db={self.db}"]
        if timeout:
            argv.append(f"--timeout={timeout}")
        p = subprocess.run(argv + list(args), env=self.env, capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr

    def appctl(self, *args):
        """ovs-appctl ARGS against the switch: (exit status, stdout, stderr)."""
        argv = ["ovs-appctl", "-t", f"{self.dir}/ovs-vswitchd.ctl", "--timeout=5"]
        p = subprocess.run(argv + list(args), env=self.env, capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr

    def wait_configured(self, timeout=30):
        """A change that makes ovs-vsctl wait for the switch to catch up (cur_cfg), which is
        how a restarted switch is known to have read the database: the exit status."""
        self.syncs += 1
        return self.vsctl("set", "Open_vSwitch", ".", f"external_ids:vsctl-sync={self.syncs}",
                          timeout=timeout)[0]

    def close(self):
        """Stops both daemons and removes the directory."""
        try:
            self.stop_switch()
        finally:
            pid = _pid(f"{self.dir}/ovsdb-server.pid")
            if pid:
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass
                _wait_gone(pid)
            shutil.rmtree(self.dir, ignore_errors=True)


def _pid(path):
    try:
        return int(open(path).read())
    except (OSError, ValueError):
        return None


def _running(pid):
    """Whether process `pid` runs. A detached daemon that exited is a zombie until init reaps
    it, which some inits do only every few seconds: a zombie has stopped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_gone(pid, limit=10.0):
    if not pid:
        return
    t = time.time()
    while time.time() - t < limit:
        if not _running(pid):
            return
        time.sleep(0.02)
