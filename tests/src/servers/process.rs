//! Server processes owned by a test: free ports, readiness probes, and a
//! stop by PID on drop.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long the servers get to answer their first HTTP request after they
/// are spawned (moto needs about 1 s here, s3rver less; the margin is for
/// slow CI machines).
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a server gets to exit after `SIGTERM` before it is sent
/// `SIGKILL`.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// How many free ports [`spawn_on_free_port`] tries when the server cannot
/// bind (another process took the port between the check and the bind).
const PORT_ATTEMPTS: usize = 3;

const LOG_FILE: &str = "server.log";
const SIGTERM: i32 = 15;
const EPERM: i32 = 1;

extern "C" {
    /// kill(2) from the C library, which std already links on Unix.
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// Sends `sig` to exactly process `pid`. Refuses PIDs that kill(2) would
/// treat as a group or as "every process" (0, negative, or too large).
pub fn send_signal(pid: u32, sig: i32) -> std::io::Result<()> {
    let pid = i32::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| std::io::Error::other(format!("refusing to signal pid {pid}")))?;
    // SAFETY: kill(2) takes plain integers and touches no memory of ours;
    // `pid` is a single positive process id.
    if unsafe { libc_kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether a process with this PID exists (a zombie counts until it is
/// reaped). Tests use it to check that a dropped server is gone.
pub fn process_exists(pid: u32) -> bool {
    match send_signal(pid, 0) {
        Ok(()) => true,
        Err(e) => e.raw_os_error() == Some(EPERM),
    }
}

/// A TCP port on `127.0.0.1` that was free a moment ago (bound to port 0 and
/// released). Another process can take it before the server binds it:
/// [`spawn_on_free_port`] retries on another port in that case.
pub fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| format!("cannot bind 127.0.0.1:0 to find a free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("cannot read the free port: {e}"))
}

/// Waits until something accepts TCP connections on `127.0.0.1:port`, for
/// at most `timeout`.
pub fn wait_for_port(port: u16, timeout: Duration) -> Result<(), String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let deadline = Instant::now() + timeout;
    loop {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() >= deadline => {
                return Err(format!(
                    "nothing accepted connections on {addr} within {timeout:?}: {e}"
                ))
            }
            Err(_) => sleep(Duration::from_millis(25)),
        }
    }
}

/// One `GET path` on `addr`; `Ok(status)` as soon as a status line arrives.
fn probe_http(addr: SocketAddr, path: &str, timeout: Duration) -> Result<u16, String> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout.min(Duration::from_millis(500)))
        .map_err(|e| format!("connect: {e}"))?;
    let io_timeout = Some(timeout.max(Duration::from_millis(10)));
    stream
        .set_read_timeout(io_timeout)
        .and_then(|()| stream.set_write_timeout(io_timeout))
        .map_err(|e| format!("socket: {e}"))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("send: {e}"))?;
    let mut head = [0u8; 32];
    let mut len = 0;
    while len < 12 {
        match stream.read(&mut head[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    let text = String::from_utf8_lossy(&head[..len]);
    text.strip_prefix("HTTP/")
        .and_then(|rest| rest.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP response: {text:?}"))
}

/// A private temporary directory, removed on drop.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new(name: &str) -> Result<Self, String> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "lease-tests-{name}-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(ScratchDir(dir))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server process owned by a test.
///
/// Spawned with stdin closed and stdout and stderr going to a log file in
/// its own temporary directory (a pipe nobody reads would block a chatty
/// server). Dropping it stops the process by its PID: `SIGTERM`, then
/// `SIGKILL` after [`STOP_GRACE`], then it is reaped and the directory is
/// removed. During a panic the end of the log is printed to stderr first
/// (the test harness shows it with the failure).
///
/// The PID is the server's own, provided the command execs the server
/// directly (a script with a `#!` line is fine; a shell wrapper or `npx`
/// is not, as its child would survive the stop).
pub struct ServerProcess {
    name: String,
    command: String,
    child: Child,
    port: u16,
    stopped: bool,
    // Declared last: dropped after the process is stopped.
    dir: ScratchDir,
}

impl ServerProcess {
    /// Creates a temporary directory, lets `build` make the command (it gets
    /// the directory, for data the server keeps), and spawns it with its
    /// output going to `<dir>/server.log`. `name` labels messages; `port` is
    /// the one the command was told to listen on.
    pub fn spawn(
        name: &str,
        port: u16,
        build: impl FnOnce(&Path) -> Command,
    ) -> Result<ServerProcess, String> {
        let dir = ScratchDir::new(name)?;
        let mut command = build(&dir.0);
        let log_path = dir.0.join(LOG_FILE);
        let log = File::create(&log_path)
            .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
        let log_err = log
            .try_clone()
            .map_err(|e| format!("cannot reopen {}: {e}", log_path.display()))?;
        command
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err));
        let description = format!("{command:?}");
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {name} ({description}): {e}"))?;
        Ok(ServerProcess {
            name: name.to_string(),
            command: description,
            child,
            port,
            stopped: false,
            dir,
        })
    }

    /// The server's PID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The port the server was told to listen on (on `127.0.0.1`).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The server's temporary directory (removed on drop).
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// The file that receives the server's stdout and stderr.
    pub fn log_path(&self) -> PathBuf {
        self.dir.0.join(LOG_FILE)
    }

    /// The last `lines` lines of the server's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read(self.log_path())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_else(|e| format!("(cannot read {}: {e})", self.log_path().display()));
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The exit status if the process has already exited (it is reaped).
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits until the server answers `GET path` on its port with any HTTP
    /// status, for at most `timeout`. Fails at once if the process exits,
    /// and after `timeout` otherwise; the error names the server, its PID
    /// and command, and ends with the last lines of its log (its stderr).
    pub fn wait_for_http(&mut self, path: &str, timeout: Duration) -> Result<(), String> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let start = Instant::now();
        let deadline = start + timeout;
        loop {
            if let Some(status) = self.exit_status() {
                return Err(self.failure(&format!(
                    "exited ({status}) before answering HTTP on {addr}"
                )));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let last = match probe_http(addr, path, left.min(Duration::from_secs(5))) {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(self.failure(&format!(
                    "did not answer GET {path} on {addr} within {timeout:?} (last attempt: {last})"
                )));
            }
            sleep(Duration::from_millis(25));
        }
    }

    fn failure(&self, what: &str) -> String {
        format!(
            "{} (pid {}, {}) {what}; last lines of {}:\n{}",
            self.name,
            self.pid(),
            self.command,
            self.log_path().display(),
            self.log_tail(40)
        )
    }

    /// Stops the process as [`Drop`] does; later calls do nothing.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        if self.exit_status().is_some() {
            return;
        }
        let pid = self.pid();
        let _ = send_signal(pid, SIGTERM);
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if self.exit_status().is_some() {
                return;
            }
            sleep(Duration::from_millis(10));
        }
        // Child::kill sends SIGKILL to this child's PID only.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- {} (pid {}) on port {}: last lines of {} ---\n{}\n--- end of {} log ---",
                self.name,
                self.pid(),
                self.port,
                self.log_path().display(),
                self.log_tail(40),
                self.name
            );
        }
        self.stop();
    }
}

/// Starts a server on a free port and waits until it answers `GET
/// probe_path` (within [`START_TIMEOUT`]).
///
/// `build(port, dir)` makes the command: it must listen on
/// `127.0.0.1:port` and may keep data in `dir`. If the server exits because
/// the port was taken meanwhile (its log says "in use"), it is tried again
/// on another port, up to three times.
pub fn spawn_on_free_port(
    name: &str,
    probe_path: &str,
    build: impl Fn(u16, &Path) -> Command,
) -> Result<ServerProcess, String> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let port = free_port()?;
        let mut server = ServerProcess::spawn(name, port, |dir| build(port, dir))?;
        match server.wait_for_http(probe_path, START_TIMEOUT) {
            Ok(()) => return Ok(server),
            Err(e) => {
                let port_taken = server.exit_status().is_some()
                    && server.log_tail(40).to_ascii_lowercase().contains("in use");
                if !port_taken || attempt >= PORT_ATTEMPTS {
                    return Err(e);
                }
            }
        }
    }
}
