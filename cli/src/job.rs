//! `lease run`'s CMD as a contained job: CMD and everything it starts are
//! stopped together (TERM, then KILL), before the lease's deadline, also
//! when `lease run` itself is killed with `SIGKILL`.
//!
//! `lease run` does not start CMD itself. It starts a **keeper**: its own
//! binary again, in a hidden mode (the first argument is
//! [`KEEPER_MARKER`]; nothing of it reaches CMD's argv or environment),
//! connected to `lease run` by a socket that only `lease run` holds the
//! other end of. The keeper ([`keep`]):
//!
//! - on Linux, makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`),
//!   so every process CMD starts stays its descendant, even after its
//!   parent died, a double fork or `setsid` (they are reparented to the
//!   keeper, not to init);
//! - on Linux with cgroup v2 writable and `cgroup.kill` (kernel 5.14), runs
//!   CMD in a cgroup of its own (`lease-run-<pid>` under `lease run`'s
//!   cgroup, made by [`Cgroup::create`]): the KILL is then one write to
//!   `cgroup.kill`, which no fork can race, and reaches the job even when
//!   the keeper itself is gone (`lease run` sweeps the cgroup then);
//! - elsewhere (macOS, the BSDs), runs CMD in a process group of its own
//!   and signals that group, unless `lease run` is in the foreground of a
//!   terminal (a job there must be able to read it);
//! - gives CMD the parent-death signal (`SIGKILL`, Linux) through the hook
//!   the binary passes (it needs `pre_exec`, which is `unsafe`);
//! - relays `lease run`'s requests to the whole job: `T` (TERM), `K`
//!   (KILL until nothing is left); an end of file on the socket means
//!   `lease run` is gone (even by `SIGKILL`): the job is killed at once;
//! - when CMD exits but left processes running, TERMs them, and KILLs what
//!   is left after the grace period, before it exits: `lease run` releases
//!   the lease only once the keeper has exited, so nothing of the job runs
//!   unleased;
//! - exits with CMD's status (128 + signal when a signal ended it), which
//!   `lease run` reports as its own.
//!
//! On Linux "the whole job" is every descendant of the keeper (read from
//! `/proc/<pid>/stat`) and every member of its cgroup; the keeper exits
//! when `waitpid` says it has no child left, which with the subreaper
//! means no descendant is left. What is not contained: a process that
//! leaves the cgroup by privilege and whose keeper is gone, and, without a
//! cgroup, whatever the job started when the keeper itself is `SIGKILL`ed
//! (CMD still dies with it). Elsewhere, a process that leaves CMD's process
//! group is not contained.

use serde_json::{json, Value};
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The signals the keeper blocks for itself (the job's, and a terminal's,
/// must not end it before the job). CMD inherits a blocked mask across
/// exec, so the hook [`keep`] is given unblocks them again in CMD.
pub const KEEPER_BLOCKS: [nix::sys::signal::Signal; 4] = [
    nix::sys::signal::Signal::SIGINT,
    nix::sys::signal::Signal::SIGTERM,
    nix::sys::signal::Signal::SIGHUP,
    nix::sys::signal::Signal::SIGQUIT,
];

/// The first argument that puts the `lease` binary in keeper mode.
pub const KEEPER_MARKER: &str = "__lease-run-keeper";

/// The exit code of a keeper that could not start CMD.
pub const CANNOT_RUN: u8 = crate::args::code::CANNOT_RUN;

/// What `lease run` tells its keeper, as arguments after
/// [`KEEPER_MARKER`]: `<fd> <grace_ms> <json:0|1> <cgroup or -> -- CMD...`.
#[derive(Clone, Debug, PartialEq)]
pub struct KeeperArgs {
    /// The keeper's end of the socket to `lease run` (an inherited fd).
    pub control_fd: i32,
    /// How long processes CMD left behind have between TERM and KILL.
    pub grace: Duration,
    /// Notes on stderr as JSON.
    pub json: bool,
    /// The cgroup to run CMD in, made by `lease run`.
    pub cgroup: Option<PathBuf>,
    /// CMD and its arguments.
    pub cmd: Vec<OsString>,
}

impl KeeperArgs {
    /// The arguments that follow [`KEEPER_MARKER`].
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            self.control_fd.to_string().into(),
            self.grace.as_millis().to_string().into(),
            if self.json { "1" } else { "0" }.into(),
            self.cgroup
                .as_ref()
                .map_or_else(|| OsString::from("-"), |p| p.clone().into_os_string()),
            "--".into(),
        ];
        args.extend(self.cmd.iter().cloned());
        args
    }

    /// Parses what [`to_args`](Self::to_args) made.
    pub fn parse(args: &[OsString]) -> Result<KeeperArgs, String> {
        let usage = || {
            format!(
                "{KEEPER_MARKER} is internal to `lease run` (usage: {KEEPER_MARKER} FD GRACE_MS JSON CGROUP -- CMD...)"
            )
        };
        let [fd, grace, json, cgroup, dashes, cmd @ ..] = args else {
            return Err(usage());
        };
        let text = |s: &OsString| s.to_str().map(str::to_string).ok_or_else(usage);
        let control_fd: i32 = text(fd)?.parse().map_err(|_| usage())?;
        // 0, 1 and 2 are the job's stdio, never the socket.
        if control_fd < 3 || dashes != "--" || cmd.is_empty() {
            return Err(usage());
        }
        let grace = Duration::from_millis(text(grace)?.parse().map_err(|_| usage())?);
        let json = match text(json)?.as_str() {
            "0" => false,
            "1" => true,
            _ => return Err(usage()),
        };
        let cgroup = if cgroup == "-" {
            None
        } else {
            let path = PathBuf::from(cgroup);
            if !path.is_absolute() {
                return Err(usage());
            }
            Some(path)
        };
        Ok(KeeperArgs {
            control_fd,
            grace,
            json,
            cgroup,
            cmd: cmd.to_vec(),
        })
    }
}

/// How a job is contained, as the keeper reports it when CMD has started.
#[derive(Clone, Debug, PartialEq)]
pub struct Containment {
    /// CMD's pid.
    pub pid: u32,
    /// The job's cgroup, if it runs in one.
    pub cgroup: Option<PathBuf>,
    /// Why there is no cgroup (`None` when there is one).
    pub cgroup_note: Option<String>,
    /// Whether the keeper is a child subreaper (Linux).
    pub subreaper: bool,
    /// Whether CMD has a process group of its own (not on Linux, where the
    /// job stays in `lease run`'s group, so that signals to that group and
    /// the terminal's still reach it; the keeper finds it by descent).
    pub own_group: bool,
}

impl Containment {
    /// The strongest mechanism in effect: `cgroup`, `subreaper` (with the
    /// walk of the keeper's descendants), `process-group`, or `none` (only
    /// CMD itself is signalled).
    pub fn mechanism(&self) -> &'static str {
        if self.cgroup.is_some() {
            "cgroup"
        } else if self.subreaper {
            "subreaper"
        } else if self.own_group {
            "process-group"
        } else {
            "none"
        }
    }

    /// As JSON (the keeper's report, and `lease run --json`'s `job` note).
    pub fn to_json(&self) -> Value {
        json!({
            "pid": self.pid,
            "mechanism": self.mechanism(),
            "cgroup": self.cgroup.as_ref().map(|p| p.display().to_string()),
            "cgroup_note": self.cgroup_note,
            "subreaper": self.subreaper,
            "own_group": self.own_group,
        })
    }

    /// Reads [`to_json`](Self::to_json)'s output.
    pub fn from_json(v: &Value) -> Option<Containment> {
        Some(Containment {
            pid: u32::try_from(v["pid"].as_u64()?).ok()?,
            cgroup: v["cgroup"].as_str().map(PathBuf::from),
            cgroup_note: v["cgroup_note"].as_str().map(str::to_string),
            subreaper: v["subreaper"].as_bool()?,
            own_group: v["own_group"].as_bool()?,
        })
    }
}

/// Whether `lease run` makes a cgroup per run: `LEASE_RUN_CGROUP` is
/// `auto` (the default: when cgroup v2 is writable) or `off`.
pub fn cgroup_wanted(lookup: impl Fn(&str) -> Option<String>) -> Result<bool, String> {
    match lookup("LEASE_RUN_CGROUP").as_deref().map(str::trim) {
        None | Some("") | Some("auto") => Ok(true),
        Some("off") => Ok(false),
        Some(other) => Err(format!(
            "LEASE_RUN_CGROUP is {other:?}: it must be `auto` (a cgroup per run where cgroup v2 allows) or `off`"
        )),
    }
}

/// A cgroup v2 directory of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    /// The cgroup at `dir` (not created).
    pub fn at(dir: impl Into<PathBuf>) -> Cgroup {
        Cgroup { dir: dir.into() }
    }

    /// Creates `<this process's cgroup>/<name>` on the cgroup v2 hierarchy,
    /// and checks it has `cgroup.kill` (kernel 5.14). The error says why
    /// not (no cgroup v2, not writable, too old a kernel, not Linux).
    pub fn create(name: &str) -> Result<Cgroup, String> {
        if !cfg!(target_os = "linux") {
            return Err("cgroups are Linux only".into());
        }
        let own = own_cgroup_dir()?;
        let dir = own.join(name);
        // A directory left by an earlier run with this pid (its processes
        // gone): remove it, or fail below.
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let cgroup = Cgroup { dir };
        if !cgroup.dir.join("cgroup.kill").exists() {
            let _ = cgroup.remove();
            return Err("no cgroup.kill (Linux before 5.14)".into());
        }
        Ok(cgroup)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Moves process `pid` into this cgroup.
    pub fn enter(&self, pid: u32) -> io::Result<()> {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
    }

    /// The processes in it now.
    pub fn procs(&self) -> Vec<u32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// `SIGKILL` to every process in it and its descendants, at once.
    pub fn kill(&self) -> io::Result<()> {
        std::fs::write(self.dir.join("cgroup.kill"), "1")
    }

    /// Whether no process is left in it.
    pub fn is_empty(&self) -> bool {
        match std::fs::read_to_string(self.dir.join("cgroup.events")) {
            Ok(events) => events.lines().any(|l| l.trim() == "populated 0"),
            Err(_) => self.procs().is_empty(),
        }
    }

    /// Removes the (empty) directory; gone already is fine.
    pub fn remove(&self) -> io::Result<()> {
        match std::fs::remove_dir(&self.dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

/// This process's cgroup v2 directory: the `cgroup2` mount from
/// `/proc/self/mountinfo` joined with the `0::` line of `/proc/self/cgroup`.
pub fn own_cgroup_dir() -> Result<PathBuf, String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let (root, mountpoint) = cgroup2_mount(&mountinfo).ok_or("no cgroup2 file system mounted")?;
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let own = unified_cgroup(&cgroup).ok_or("no cgroup v2 line (0::) in /proc/self/cgroup")?;
    cgroup_dir(&root, &mountpoint, &own)
        .ok_or_else(|| format!("our cgroup {own} is not under the cgroup2 mount's root {root}"))
}

/// The root and mount point of the first `cgroup2` mount in a
/// `mountinfo` text.
pub fn cgroup2_mount(mountinfo: &str) -> Option<(String, PathBuf)> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let fields: Vec<&str> = left.split_whitespace().collect();
        Some((
            unescape_mountinfo(fields.get(3)?),
            PathBuf::from(unescape_mountinfo(fields.get(4)?)),
        ))
    })
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        if let Some(d) = octal {
            let value = d.iter().fold(0u32, |v, b| v * 8 + u32::from(b - b'0'));
            if let Ok(byte) = u8::try_from(value) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup v2 path (`0::<path>`) in a `/proc/<pid>/cgroup` text.
pub fn unified_cgroup(proc_cgroup: &str) -> Option<String> {
    proc_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim().to_string())
}

/// Where the cgroup `own` (as `/proc/self/cgroup` names it) is, given the
/// cgroup2 mount's root and mount point; `None` when it is not below that
/// root (or names a parent, as outside a cgroup namespace it may).
pub fn cgroup_dir(root: &str, mountpoint: &Path, own: &str) -> Option<PathBuf> {
    if own.split('/').any(|part| part == "..") || !own.starts_with('/') {
        return None;
    }
    let rel = if root == "/" {
        own
    } else {
        let rest = own.strip_prefix(root.trim_end_matches('/'))?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        rest
    };
    Some(mountpoint.join(rel.trim_start_matches('/')))
}

/// `(pid, ppid, pgrp)` from a `/proc/<pid>/stat` line (the command name
/// may hold spaces and parentheses: the fields after it start after its
/// last `)`).
pub fn parse_stat(stat: &str) -> Option<(u32, u32, u32)> {
    let (head, tail) = stat.rsplit_once(')')?;
    let pid = head.split_whitespace().next()?.parse().ok()?;
    let mut fields = tail.split_whitespace();
    let _state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((pid, ppid, pgrp))
}

/// Every live descendant of `root` (Linux, from `/proc`), children before
/// their own children. A process that starts while the walk runs may be
/// missed: callers that must catch everything repeat until `waitpid` says
/// nothing is left.
pub fn descendants(root: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut parent_of = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if let Some((pid, ppid, _)) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .as_deref()
            .and_then(parse_stat)
        {
            parent_of.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parent_of
                .iter()
                .filter(|(pid, ppid)| *ppid == parent && *pid != root)
                .map(|(pid, _)| *pid),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// CMD's exit code as the keeper reports it: its code, or 128 + the
/// signal that ended it.
fn code_of(status: nix::sys::wait::WaitStatus) -> Option<(u32, u8)> {
    use nix::sys::wait::WaitStatus;
    match status {
        WaitStatus::Exited(pid, code) => Some((pid.as_raw() as u32, code.clamp(0, 255) as u8)),
        WaitStatus::Signaled(pid, sig, _) => {
            Some((pid.as_raw() as u32, (128 + sig as i32).clamp(0, 255) as u8))
        }
        _ => None,
    }
}

enum Msg {
    /// A byte from `lease run`, or `None`: it is gone.
    Control(Option<u8>),
    /// A child reaped: (pid, exit code).
    Reaped(u32, u8),
    /// `waitpid` says no child is left.
    AllGone,
}

/// Writes one note to stderr (`lease run`'s, shared with CMD: stdout is
/// CMD's): JSON or text. A closed stderr is ignored (the keeper must carry
/// on).
pub fn note(json: bool, value: Value, text: &str) {
    let line = if json {
        value.to_string()
    } else {
        format!("lease: {text}")
    };
    let _ = writeln!(io::stderr(), "{line}");
}

/// Whether this process is in the foreground of the terminal on stdin: a
/// job started here must stay in our process group to read it.
#[cfg(not(target_os = "linux"))]
fn in_terminal_foreground() -> bool {
    let stdin = io::stdin();
    nix::unistd::isatty(&stdin).unwrap_or(false)
        && nix::unistd::tcgetpgrp(&stdin).is_ok_and(|g| g == nix::unistd::getpgrp())
}

/// The keeper (see the module docs): starts CMD as `args` say, with
/// `prepare` applied to its command (the binary's parent-death signal),
/// reports how the job is contained on `control`, then relays `lease
/// run`'s requests to the whole job until no process of it is left.
/// Returns the exit code: CMD's (128 + signal), or [`CANNOT_RUN`].
///
/// It blocks `SIGINT`, `SIGTERM`, `SIGHUP` and `SIGQUIT` (CMD gets an empty
/// mask again): a signal to `lease run`'s process group must not end the
/// keeper before the job; `lease run` passes on what the job should get.
pub fn keep(
    args: &KeeperArgs,
    control: UnixStream,
    prepare: impl FnOnce(&mut std::process::Command),
) -> u8 {
    let mut blocked = nix::sys::signal::SigSet::empty();
    for sig in KEEPER_BLOCKS {
        blocked.add(sig);
    }
    let _ = blocked.thread_block();
    let me = std::process::id();
    let report = |value: Value| {
        let mut line = value.to_string();
        line.push('\n');
        let _ = (&control).write_all(line.as_bytes());
    };

    #[cfg(target_os = "linux")]
    let subreaper = nix::sys::prctl::set_child_subreaper(true).is_ok();
    #[cfg(not(target_os = "linux"))]
    let subreaper = false;

    #[cfg(target_os = "linux")]
    let own_group = false;
    #[cfg(not(target_os = "linux"))]
    let own_group = !in_terminal_foreground();

    let (spawned, cgroup) = spawn_in_cgroup(args.cgroup.as_deref(), me, || {
        spawn_cmd(&args.cmd, own_group, prepare)
    });
    let (cgroup, cgroup_note) = match cgroup {
        Ok(cgroup) => (cgroup, None),
        Err(e) => (None, Some(e)),
    };
    let child = match spawned {
        Ok(child) => child,
        Err(e) => {
            if let Some(cgroup) = &cgroup {
                let _ = cgroup.remove();
            }
            report(json!({"error": format!("cannot run {:?}: {e}", args.cmd[0])}));
            return CANNOT_RUN;
        }
    };
    let cmd_pid = child.id();
    // Reaped below with waitpid(-1), never through `child`.
    drop(child);
    let containment = Containment {
        pid: cmd_pid,
        cgroup: cgroup.as_ref().map(|c| c.path().to_path_buf()),
        cgroup_note,
        subreaper,
        own_group,
    };
    report(containment.to_json());
    let rx = listen(control);
    let job = Members {
        cmd_pid,
        cgroup: cgroup.as_ref(),
        own_group,
    };
    run_keeper(&job, args, &rx)
}

/// CMD as `spawn` starts it, in the job's cgroup at `dir` if there is
/// one: the keeper (`me`) enters it to start CMD, and leaves it again (the
/// keeper must survive the cgroup's KILL). Also the cgroup CMD runs in,
/// or why there is none.
fn spawn_in_cgroup<T>(
    dir: Option<&Path>,
    me: u32,
    spawn: impl FnOnce() -> T,
) -> (T, Result<Option<Cgroup>, String>) {
    let Some(dir) = dir else {
        return (spawn(), Ok(None));
    };
    let cgroup = Cgroup::at(dir);
    let entered = own_cgroup_dir().and_then(|home| match cgroup.enter(me) {
        Ok(()) => Ok(Cgroup::at(home)),
        Err(e) => Err(format!("cannot enter {}: {e}", dir.display())),
    });
    let spawned = spawn();
    let cgroup = entered.and_then(|home| match home.enter(me) {
        Ok(()) => Ok(Some(cgroup)),
        // Still inside: its cgroup.kill would end the keeper first.
        // Contain by descent instead.
        Err(e) => Err(format!(
            "cannot leave {} again: {e}",
            cgroup.path().display()
        )),
    });
    (spawned, cgroup)
}

/// Starts CMD (`cmd`: it and its arguments), in a process group of its own
/// if `own_group`, with `prepare` applied to its command.
fn spawn_cmd(
    cmd: &[OsString],
    own_group: bool,
    prepare: impl FnOnce(&mut std::process::Command),
) -> io::Result<std::process::Child> {
    let mut command = std::process::Command::new(&cmd[0]);
    command.args(&cmd[1..]);
    if own_group {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    prepare(&mut command);
    command.spawn()
}

/// The keeper's messages: from a thread that reads `lease run`'s bytes on
/// `control` (until its end of file), and from one that reaps every child
/// (until `waitpid` says none is left).
fn listen(mut control: UnixStream) -> std::sync::mpsc::Receiver<Msg> {
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = tx.clone();
    std::thread::spawn(move || {
        let mut byte = [0u8; 1];
        loop {
            match control.read(&mut byte) {
                Ok(1) => {
                    if reader.send(Msg::Control(Some(byte[0]))).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // End of file: `lease run` is gone.
                _ => {
                    let _ = reader.send(Msg::Control(None));
                    return;
                }
            }
        }
    });
    std::thread::spawn(move || loop {
        match nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(-1), None) {
            Ok(status) => {
                if let Some((pid, code)) = code_of(status) {
                    if tx.send(Msg::Reaped(pid, code)).is_err() {
                        return;
                    }
                }
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => {
                let _ = tx.send(Msg::AllGone);
                return;
            }
        }
    });
    rx
}

/// What the keeper signals.
struct Members<'a> {
    cmd_pid: u32,
    cgroup: Option<&'a Cgroup>,
    own_group: bool,
}

impl Members<'_> {
    /// The job's processes now (Linux: the keeper's descendants and the
    /// cgroup's members).
    #[cfg(target_os = "linux")]
    fn pids(&self) -> Vec<u32> {
        let me = std::process::id();
        let mut pids = descendants(me);
        if let Some(cgroup) = self.cgroup {
            for pid in cgroup.procs() {
                if pid != me && !pids.contains(&pid) {
                    pids.push(pid);
                }
            }
        }
        pids
    }

    /// `sig` to every process of the job.
    fn signal(&self, sig: nix::sys::signal::Signal) {
        use nix::sys::signal::{kill, killpg};
        use nix::unistd::Pid;
        if self.own_group {
            let _ = killpg(Pid::from_raw(self.cmd_pid as i32), sig);
        }
        #[cfg(target_os = "linux")]
        for pid in self.pids() {
            let _ = kill(Pid::from_raw(pid as i32), sig);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = kill(Pid::from_raw(self.cmd_pid as i32), sig);
    }

    /// One round of KILL: the cgroup at once, then every process found.
    fn kill(&self) {
        if let Some(cgroup) = self.cgroup {
            let _ = cgroup.kill();
        }
        self.signal(nix::sys::signal::Signal::SIGKILL);
    }

    /// Whether any process of the job may still run, once `waitpid` said
    /// the keeper has no child left: on Linux none can (the keeper is a
    /// subreaper); elsewhere, CMD's process group may still have members.
    fn lingers(&self) -> bool {
        #[cfg(not(target_os = "linux"))]
        if self.own_group {
            use nix::sys::signal::killpg;
            return killpg(nix::unistd::Pid::from_raw(self.cmd_pid as i32), None).is_ok();
        }
        false
    }

    /// How many processes of the job are running besides the ones reaped.
    fn count(&self) -> usize {
        #[cfg(target_os = "linux")]
        {
            self.pids().len()
        }
        #[cfg(not(target_os = "linux"))]
        {
            usize::from(self.lingers())
        }
    }
}

/// The keeper's loop: relay, reap, stop leftovers, until nothing is left.
fn run_keeper(job: &Members<'_>, args: &KeeperArgs, rx: &std::sync::mpsc::Receiver<Msg>) -> u8 {
    use nix::sys::signal::Signal;
    use std::sync::mpsc::RecvTimeoutError;
    const KILL_ROUND: Duration = Duration::from_millis(10);
    let mut code: Option<u8> = None;
    let mut termed = false;
    let mut killing = false;
    let mut kill_at: Option<Instant> = None;
    let mut reaped_all = false;
    let mut orphaned = false;
    loop {
        if reaped_all && !job.lingers() {
            break;
        }
        let wait = if killing || reaped_all {
            KILL_ROUND
        } else if let Some(at) = kill_at {
            at.saturating_duration_since(Instant::now())
        } else {
            Duration::from_secs(3600)
        };
        match rx.recv_timeout(wait) {
            Ok(Msg::Control(Some(b'T'))) => {
                termed = true;
                job.signal(Signal::SIGTERM);
            }
            Ok(Msg::Control(Some(b'K'))) => killing = true,
            Ok(Msg::Control(Some(_))) => {}
            Ok(Msg::Control(None)) => {
                // `lease run` is gone (killed, even by SIGKILL): nothing
                // renews the lease now. Kill the job at once.
                if !orphaned && !reaped_all {
                    note(
                        args.json,
                        json!({"orphaned": true, "killed": true}),
                        "`lease run` is gone: killing the job",
                    );
                }
                orphaned = true;
                killing = true;
            }
            Ok(Msg::Reaped(pid, status)) if pid == job.cmd_pid => {
                code = Some(status);
                if !killing {
                    kill_at = stop_leftovers(job, args, &mut termed).or(kill_at);
                }
            }
            Ok(Msg::Reaped(..)) => {}
            Ok(Msg::AllGone) | Err(RecvTimeoutError::Disconnected) => reaped_all = true,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if kill_at.is_some_and(|at| Instant::now() >= at) {
            killing = true;
        }
        if killing {
            job.kill();
        }
    }
    if let Some(cgroup) = job.cgroup {
        let _ = cgroup.remove();
    }
    code.unwrap_or(crate::args::code::ERROR)
}

/// CMD is done: what it left running is stopped now, TERM (unless it had
/// one already, `termed`) then KILL after the grace, before `lease run`
/// may release the lease. Returns when to KILL, `None` if nothing is left.
fn stop_leftovers(job: &Members<'_>, args: &KeeperArgs, termed: &mut bool) -> Option<Instant> {
    let left = job.count();
    if left == 0 {
        return None;
    }
    let signal = if *termed { "none" } else { "TERM" };
    note(
        args.json,
        json!({"leftovers": left, "signal": signal, "grace_ms": args.grace.as_millis() as u64}),
        &format!(
            "CMD exited but left {left} process(es) running: {}KILL in {:?} (before the lease is released)",
            if *termed { "" } else { "TERM to them, " },
            args.grace
        ),
    );
    if !*termed {
        *termed = true;
        job.signal(nix::sys::signal::Signal::SIGTERM);
    }
    Some(Instant::now() + args.grace)
}

/// What `lease run` asks for: CMD, the variables it adds to CMD's
/// environment, the grace period for processes CMD leaves behind, the
/// notes' format, whether to try a cgroup.
#[derive(Clone, Debug)]
pub struct JobSpec {
    /// CMD and its arguments.
    pub cmd: Vec<String>,
    /// Added to CMD's environment (`LEASE_TOKEN`...).
    pub env: Vec<(String, String)>,
    /// TERM to KILL for processes CMD left running when it exited.
    pub grace: Duration,
    /// Notes as JSON.
    pub json: bool,
    /// Try a cgroup per run ([`cgroup_wanted`]).
    pub cgroup: bool,
}

/// Why a job did not start.
#[derive(Clone, Debug, PartialEq)]
pub enum StartError {
    /// CMD could not be started (not found, not executable...).
    CannotRun(String),
    /// The keeper could not be started or did not report.
    Keeper(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::CannotRun(m) | StartError::Keeper(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for StartError {}

/// The path to run the keeper from: this very binary (on Linux through
/// `/proc/self/exe`, which still works if the file was replaced since).
pub fn own_exe() -> io::Result<PathBuf> {
    if cfg!(target_os = "linux") && Path::new("/proc/self/exe").exists() {
        return Ok(PathBuf::from("/proc/self/exe"));
    }
    std::env::current_exe()
}

/// `lease run`'s handle on a running job (CMD under its keeper). Dropping
/// it closes the socket: the keeper then kills the job.
#[derive(Debug)]
pub struct Job {
    keeper: tokio::process::Child,
    control: UnixStream,
    cgroup: Option<Cgroup>,
    containment: Containment,
}

impl Job {
    /// Starts the keeper (`exe` in keeper mode, see [`own_exe`]), which
    /// starts CMD; returns once CMD runs, with how it is contained. The
    /// keeper's report is read with a blocking read (it comes at once).
    pub async fn start(exe: &Path, spec: &JobSpec) -> Result<Job, StartError> {
        use std::os::fd::AsRawFd;
        let keeper_err = |what: &str, e: &dyn std::fmt::Display| {
            StartError::Keeper(format!("cannot start the job's keeper: {what}: {e}"))
        };
        let (ours, theirs) = UnixStream::pair().map_err(|e| keeper_err("socketpair", &e))?;
        // The keeper inherits its end (close-on-exec off); ours stays ours.
        nix::fcntl::fcntl(
            &theirs,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
        )
        .map_err(|e| keeper_err("fcntl", &e))?;
        let (cgroup, cgroup_note) = if !spec.cgroup {
            (None, Some("off (LEASE_RUN_CGROUP=off)".to_string()))
        } else if !cfg!(target_os = "linux") {
            (None, Some("cgroups are Linux only".to_string()))
        } else {
            match Cgroup::create(&format!("lease-run-{}", std::process::id())) {
                Ok(c) => (Some(c), None),
                Err(e) => (None, Some(e)),
            }
        };
        let args = KeeperArgs {
            control_fd: theirs.as_raw_fd(),
            grace: spec.grace,
            json: spec.json,
            cgroup: cgroup.as_ref().map(|c| c.path().to_path_buf()),
            cmd: spec.cmd.iter().map(OsString::from).collect(),
        };
        let mut command = tokio::process::Command::new(exe);
        command
            .arg(KEEPER_MARKER)
            .args(args.to_args())
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .kill_on_drop(false);
        let spawned = command.spawn();
        drop(theirs);
        let mut keeper = match spawned {
            Ok(k) => k,
            Err(e) => {
                if let Some(c) = &cgroup {
                    let _ = c.remove();
                }
                return Err(keeper_err(&exe.display().to_string(), &e));
            }
        };
        let line = read_line(&ours);
        let report: Option<Value> = line.as_deref().and_then(|l| serde_json::from_str(l).ok());
        let containment = report.as_ref().and_then(Containment::from_json);
        let Some(mut containment) = containment else {
            // The keeper could not start CMD, or died: reap it.
            let _ = keeper.wait().await;
            if let Some(c) = &cgroup {
                let _ = c.remove();
            }
            return Err(match report.as_ref().and_then(|r| r["error"].as_str()) {
                Some(message) => StartError::CannotRun(message.to_string()),
                None => {
                    StartError::Keeper("the job's keeper ended before starting CMD".to_string())
                }
            });
        };
        if containment.cgroup_note.is_none() && containment.cgroup.is_none() {
            containment.cgroup_note = cgroup_note;
        }
        // The keeper may have given up the cgroup (it could not enter it).
        let cgroup = cgroup.filter(|c| containment.cgroup.as_deref() == Some(c.path()));
        Ok(Job {
            keeper,
            control: ours,
            cgroup,
            containment,
        })
    }

    /// How the job is contained.
    pub fn containment(&self) -> &Containment {
        &self.containment
    }

    /// TERM to every process of the job.
    pub fn terminate(&mut self) {
        let _ = (&self.control).write_all(b"T");
    }

    /// KILL to every process of the job, until none is left.
    pub fn kill(&mut self) {
        let _ = (&self.control).write_all(b"K");
    }

    /// Waits until the keeper has exited, which it does once no process of
    /// the job is left; returns its status (CMD's). A keeper that was
    /// itself killed leaves its job behind: its cgroup, if any, is then
    /// killed here, and waited for, before this returns. Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        let status = self.keeper.wait().await?;
        if let Some(cgroup) = &self.cgroup {
            if status.signal().is_some() {
                let started = std::time::Instant::now();
                while !cgroup.is_empty() && started.elapsed() < Duration::from_secs(10) {
                    let _ = cgroup.kill();
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
            let _ = cgroup.remove();
        }
        Ok(status)
    }
}

/// One line from the keeper (up to its newline), or `None` at end of file.
fn read_line(stream: &UnixStream) -> Option<String> {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    let mut reader = stream;
    loop {
        match reader.read(&mut byte) {
            Ok(1) if byte[0] == b'\n' => break,
            Ok(1) => line.push(byte[0]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            _ => return None,
        }
    }
    String::from_utf8(line).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeper_args_round_trip_and_refuse_what_they_did_not_make() {
        let args = KeeperArgs {
            control_fd: 5,
            grace: Duration::from_millis(250),
            json: true,
            cgroup: Some(PathBuf::from("/sys/fs/cgroup/a b/lease-run-7")),
            cmd: vec!["sh".into(), "-c".into(), "echo -- hi".into()],
        };
        assert_eq!(KeeperArgs::parse(&args.to_args()), Ok(args.clone()));
        let no_cgroup = KeeperArgs {
            cgroup: None,
            json: false,
            ..args
        };
        assert_eq!(KeeperArgs::parse(&no_cgroup.to_args()), Ok(no_cgroup));
        for bad in [
            &["5", "250", "1", "-", "--"][..],
            &["1", "250", "1", "-", "--", "true"],
            &["x", "250", "1", "-", "--", "true"],
            &["5", "250", "yes", "-", "--", "true"],
            &["5", "250", "1", "relative", "--", "true"],
            &["5", "250", "1", "-", "true"],
        ] {
            let bad: Vec<OsString> = bad.iter().map(OsString::from).collect();
            let err = KeeperArgs::parse(&bad).unwrap_err();
            assert!(err.contains("internal to `lease run`"), "{err}");
        }
    }

    #[test]
    fn containment_reads_back_and_names_its_strongest_mechanism() {
        let c = Containment {
            pid: 42,
            cgroup: None,
            cgroup_note: Some("no cgroup2 file system mounted".into()),
            subreaper: true,
            own_group: false,
        };
        assert_eq!(c.mechanism(), "subreaper");
        assert_eq!(Containment::from_json(&c.to_json()), Some(c.clone()));
        let cg = Containment {
            cgroup: Some("/sys/fs/cgroup/x".into()),
            cgroup_note: None,
            ..c.clone()
        };
        assert_eq!(cg.mechanism(), "cgroup");
        let pg = Containment {
            subreaper: false,
            own_group: true,
            ..c
        };
        assert_eq!(pg.mechanism(), "process-group");
    }

    #[test]
    fn the_cgroup_setting_is_auto_or_off() {
        use lease_core::settings::lookup_in as env;
        assert_eq!(cgroup_wanted(env(&[])), Ok(true));
        assert_eq!(
            cgroup_wanted(env(&[("LEASE_RUN_CGROUP", "auto")])),
            Ok(true)
        );
        assert_eq!(
            cgroup_wanted(env(&[("LEASE_RUN_CGROUP", "off")])),
            Ok(false)
        );
        let err = cgroup_wanted(env(&[("LEASE_RUN_CGROUP", "yes")])).unwrap_err();
        assert!(err.contains("`auto`") && err.contains("`off`"), "{err}");
    }

    #[test]
    fn the_cgroup_is_found_from_mountinfo_and_proc_cgroup() {
        // A hybrid host: v1 controllers, v2 at .../unified.
        let mountinfo = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        let (root, mount) = cgroup2_mount(mountinfo).unwrap();
        assert_eq!(
            (root.as_str(), mount.as_path()),
            ("/", Path::new("/sys/fs/cgroup/unified"))
        );
        let proc_cgroup = "4:memory:/process_api/74a0\n1:cpu:/\n0::/user.slice/a.scope\n";
        let own = unified_cgroup(proc_cgroup).unwrap();
        assert_eq!(
            cgroup_dir(&root, &mount, &own),
            Some(PathBuf::from("/sys/fs/cgroup/unified/user.slice/a.scope"))
        );
        // A mount of a subtree (a container's view), with an escaped space.
        let sub = "50 1 0:40 /kube/pod\\0401 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let (root, mount) = cgroup2_mount(sub).unwrap();
        assert_eq!(root, "/kube/pod 1");
        assert_eq!(
            cgroup_dir(&root, &mount, "/kube/pod 1/app"),
            Some(PathBuf::from("/sys/fs/cgroup/app"))
        );
        assert_eq!(cgroup_dir(&root, &mount, "/kube/pod 10"), None);
        assert_eq!(cgroup_dir("/", &mount, "/../.."), None);
        assert_eq!(cgroup2_mount("31 23 0:28 / /x rw - tmpfs tmpfs rw\n"), None);
        assert_eq!(unified_cgroup("1:cpu:/\n"), None);
    }

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        assert_eq!(
            parse_stat("123 (sh) S 1 123 123 0 -1 4194560 ..."),
            Some((123, 1, 123))
        );
        assert_eq!(parse_stat("77 (a) b (c)) R 76 70 70 0"), Some((77, 76, 70)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn descendants_include_grandchildren_and_not_the_root() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .spawn()
            .unwrap();
        let me = std::process::id();
        let started = std::time::Instant::now();
        let found = loop {
            let found = descendants(me);
            if found.len() >= 3 || started.elapsed() > Duration::from_secs(10) {
                break found;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        for pid in descendants(child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.contains(&child.id()), "{found:?}");
        assert!(!found.contains(&me));
        assert!(found.len() >= 3, "sh and its two sleeps: {found:?}");
    }
}
