//! `cargo lambda watch`: the Runtime API emulator from the `cargo-lambda`
//! package (installed into `.venv` by `make setup`), running a function of
//! this workspace the way Lambda would: one process per concurrent
//! invocation, events in, responses out.

use super::http::{http_request, HttpResponse};
use super::paths::{venv_dir, workspace_root};
use super::process::{spawn_on_free_port, ServerProcess};
use std::process::Command;

/// A running `cargo lambda watch` serving one package's functions.
pub struct CargoLambda {
    server: ServerProcess,
}

impl CargoLambda {
    /// Runs `cargo lambda watch` in `package_dir` (relative to the
    /// workspace), with up to `concurrency` function processes, each
    /// inheriting `env`. Functions are started with `cargo run` at their
    /// first invocation, so build them first.
    pub fn start(
        package_dir: &str,
        concurrency: u32,
        env: &[(&str, &str)],
    ) -> Result<CargoLambda, String> {
        let bin = venv_dir()?.join("bin");
        let cargo_lambda = bin.join("cargo-lambda");
        if !cargo_lambda.exists() {
            return Err(format!(
                "{} is missing: run `make setup` first",
                cargo_lambda.display()
            ));
        }
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let dir = workspace_root().join(package_dir);
        let server = spawn_on_free_port("cargo-lambda", "/", |port, scratch| {
            let mut cmd = Command::new(&cargo_lambda);
            cmd.args(["lambda", "watch", "--ignore-changes", "--locked"])
                .args(["-A", "127.0.0.1", "-P", &port.to_string()])
                .args(["--concurrency", &concurrency.to_string()])
                .current_dir(&dir)
                .env("PATH", &path)
                .env("XDG_CACHE_HOME", scratch)
                .env_remove("AWS_LAMBDA_RUNTIME_API");
            for (k, v) in env {
                cmd.env(k, v);
            }
            cmd
        })?;
        Ok(CargoLambda { server })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        self.server.endpoint()
    }

    /// The emulator's own PID (a SIGTERM to it stops its functions too).
    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// Invokes `function` with `event` (JSON) and waits for the answer:
    /// 200 with the handler's output, or 500 with `{"errorType",
    /// "errorMessage"}` when the handler failed.
    pub fn invoke(&self, function: &str, event: &str) -> Result<HttpResponse, String> {
        http_request(
            &self.endpoint(),
            "POST",
            &format!("/2015-03-31/functions/{function}/invocations"),
            &[("Content-Type", "application/json")],
            event.as_bytes(),
        )
    }

    /// The end of the emulator's log (its functions' output included).
    pub fn log_tail(&self, lines: usize) -> String {
        self.server.log_tail(lines)
    }
}
