//! Azurite (3.35.0, from `tests/node_modules`): Microsoft's Azure Blob
//! Storage emulator, with atomic conditional writes.

use super::http::http_request;
use super::paths::node_modules_dir;
use super::process::{spawn_on_free_port, ServerProcess};
use lease_core::wire::SharedKeySigner;
use lease_core::wire::Signer;
use lease_core::UnixMillis;
use std::io::Read;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// An Azurite blob service on `127.0.0.1` with one storage account of a
/// freshly drawn key (no well-known key is used or committed) and one
/// container; on drop the process is stopped by its PID.
///
/// What it does (checked against Azurite 3.35.0):
/// - Put Blob with `If-None-Match: *` on an existing blob: **409
///   `BlobAlreadyExists`** (not 412); `If-Match` wrong or on a missing
///   blob: 412 `ConditionNotMet`; conditional Delete Blob honoured.
/// - Conditional writes are atomic under concurrency.
/// - Every request needs SharedKey or SAS authentication; a wrong key gets
///   403 `AuthorizationFailure`/`AuthenticationFailed`.
/// - The account is part of the path: `http://127.0.0.1:PORT/{account}`.
pub struct Azurite {
    process: ServerProcess,
    account: String,
    key: String,
    container: String,
}

impl Azurite {
    /// The storage account name.
    pub const ACCOUNT: &'static str = "leaseaccount";

    /// Starts `azurite-blob --blobHost 127.0.0.1 --blobPort PORT
    /// --inMemoryPersistence --loose --skipApiVersionCheck
    /// --disableTelemetry` with `AZURITE_ACCOUNTS` naming one account and a
    /// random key, waits for it to answer, and creates `container`.
    pub fn start(container: &str) -> Result<Azurite, String> {
        let bin = node_modules_dir()?.join(".bin").join("azurite-blob");
        let key = random_key()?;
        let accounts = format!("{}:{key}", Azurite::ACCOUNT);
        let process = spawn_on_free_port("azurite", "/", |port, dir| {
            let mut command = Command::new(&bin);
            command
                .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
                .args(["--inMemoryPersistence", "--loose", "--skipApiVersionCheck"])
                .arg("--disableTelemetry")
                // In memory: nothing is written, but any debug file lands
                // in the private directory (--location refuses to combine
                // with --inMemoryPersistence).
                .current_dir(dir)
                .env("AZURITE_ACCOUNTS", &accounts);
            command
        })?;
        let azurite = Azurite {
            process,
            account: Azurite::ACCOUNT.to_string(),
            key,
            container: container.to_string(),
        };
        azurite.create_container(container)?;
        Ok(azurite)
    }

    /// The account's blob endpoint: `http://127.0.0.1:PORT/{account}`.
    pub fn endpoint(&self) -> String {
        format!("{}/{}", self.process.endpoint(), self.account)
    }

    /// The account name.
    pub fn account(&self) -> &str {
        &self.account
    }

    /// The account key (base64), drawn at start.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The container created at start.
    pub fn container(&self) -> &str {
        &self.container
    }

    /// The PID of the node process running Azurite.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The last `lines` lines of Azurite's log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }

    /// Creates a container (Create Container, signed with the account key).
    pub fn create_container(&self, name: &str) -> Result<(), String> {
        let path = format!("/{}/{name}?restype=container", self.account);
        let mut request = http::Request::builder()
            .method("PUT")
            .uri(format!("{}{path}", self.process.endpoint()))
            .header("x-ms-version", lease_core::wire::AZURE_API_VERSION)
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let signer = SharedKeySigner::new(&self.account, &self.key).map_err(|e| e.to_string())?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|e| e.to_string())?;
        signer
            .sign(&mut request, UnixMillis(now.as_millis() as u64))
            .map_err(|e| e.to_string())?;
        let headers: Vec<(&str, &str)> = request
            .headers()
            .iter()
            .filter_map(|(n, v)| Some((n.as_str(), v.to_str().ok()?)))
            .collect();
        let reply = http_request(&self.process.endpoint(), "PUT", &path, &headers, b"")?;
        if reply.status != 201 {
            return Err(format!(
                "azurite: Create Container {name} answered {} {}; last lines of its log:\n{}",
                reply.status,
                reply.text(),
                self.log_tail(20)
            ));
        }
        Ok(())
    }
}

/// 64 random base64 characters (a 48-byte key), from the OS's generator.
fn random_key() -> Result<String, String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bytes = [0u8; 64];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("azurite: cannot draw a key from /dev/urandom: {e}"))?;
    Ok(bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(b % 64)]))
        .collect())
}
