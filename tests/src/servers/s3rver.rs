//! s3rver (3.7.1, from `tests/node_modules`): an S3 emulator that ignores
//! conditional headers, the negative case for conditional-write probes.

use super::http::http_request;
use super::paths::node_modules_dir;
use super::process::{spawn_on_free_port, ServerProcess};
use std::path::PathBuf;
use std::process::Command;

/// An s3rver on `127.0.0.1` with one bucket, keeping its objects in a
/// temporary directory; on drop the process is stopped by its PID and the
/// directory removed.
///
/// What it does with requests (checked against s3rver 3.7.1):
/// - `If-None-Match` and `If-Match` on `PUT` are ignored: every PUT
///   succeeds and overwrites (that is why it is here).
/// - Unsigned requests are accepted. A signed request must name the access
///   key id [`S3rver::ACCESS_KEY_ID`] (others get 403
///   `InvalidAccessKeyId`); SigV4 signatures are not verified at all, so
///   any secret passes.
pub struct S3rver {
    process: ServerProcess,
    bucket: String,
}

impl S3rver {
    /// The one access key id s3rver knows.
    pub const ACCESS_KEY_ID: &'static str = "S3RVER";
    /// Its secret (not checked for SigV4).
    pub const SECRET_ACCESS_KEY: &'static str = "S3RVER";

    /// Starts s3rver on a free port with `bucket` created, and waits until
    /// `GET /bucket` answers 200.
    ///
    /// Runs `tests/node_modules/.bin/s3rver -a 127.0.0.1 -p PORT -d DIR
    /// --configure-bucket BUCKET` (the `.bin` entry is a `#!/usr/bin/env
    /// node` script, so the PID kept is node's own). Its per-request log
    /// goes to the log file, not to a pipe, so `--silent` is not needed.
    /// Fails with "run `make setup` first" when `tests/node_modules` is
    /// missing.
    pub fn start(bucket: &str) -> Result<S3rver, String> {
        let bin = node_modules_dir()?.join(".bin").join("s3rver");
        let process = spawn_on_free_port("s3rver", &format!("/{bucket}"), |port, dir| {
            let data = dir.join("data");
            let mut command = Command::new(&bin);
            command
                .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-d"])
                .arg(&data)
                .args(["--configure-bucket", bucket]);
            command
        })?;
        let s3rver = S3rver {
            process,
            bucket: bucket.to_string(),
        };
        let listing = http_request(&s3rver.endpoint(), "GET", &format!("/{bucket}"), &[], b"")?;
        if listing.status != 200 {
            return Err(format!(
                "s3rver: GET /{bucket} answered {} {}; last lines of its log:\n{}",
                listing.status,
                listing.text(),
                s3rver.log_tail(20)
            ));
        }
        Ok(s3rver)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        self.process.endpoint()
    }

    /// The PID of the node process running s3rver.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The bucket created at start.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The directory s3rver keeps objects in (removed on drop).
    pub fn data_dir(&self) -> PathBuf {
        self.process.dir().join("data")
    }

    /// The last `lines` lines of s3rver's log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }
}
