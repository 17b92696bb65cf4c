//! Stand-ins for the endpoints that hand out the platform's credentials,
//! in process on `127.0.0.1`, answering as the providers document:
//!
//! | endpoint | request | answer |
//! |---|---|---|
//! | EC2 instance metadata (IMDSv2) | `PUT /latest/api/token` with `x-aws-ec2-metadata-token-ttl-seconds` | the session token, the TTL header echoed |
//! | | `GET /latest/meta-data/iam/security-credentials/` with `x-aws-ec2-metadata-token` | the role's name |
//! | | `GET /latest/meta-data/iam/security-credentials/{role}` | the credentials JSON below |
//! | ECS container credentials | `GET` [`IdentityStandIn::ECS_PATH`] with `Authorization:` [`IdentityStandIn::ECS_TOKEN`] | the credentials JSON |
//! | an OAuth 2.0 token endpoint (Google's `token_uri`, Azure's App Service identity) | `POST /token`, `GET /msi/token?resource=...` | `{"access_token", "expires_in"}`, `{"access_token", "expires_on", "resource", "token_type"}` |
//!
//! The credentials JSON is AWS's: `{"Code": "Success", "AccessKeyId",
//! "SecretAccessKey", "Token", "Expiration": "2026-11-27T22:25:18Z"}`.
//! What is handed out is set with [`IdentityStandIn::issue`] and may be
//! changed at any time (a rotation); every request is logged. A request
//! missing its token header is answered 401. Stopped when dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Credentials the stand-in hands out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    /// AWS access key id (AWS endpoints).
    pub access_key_id: String,
    /// AWS secret access key.
    pub secret_access_key: String,
    /// The session token (AWS), or the OAuth access token.
    pub token: String,
    /// How long they last from each request that hands them out.
    pub lasts: Duration,
}

impl Issued {
    /// An OAuth 2.0 access token lasting `lasts` from each request.
    pub fn bearer(token: &str, lasts: Duration) -> Issued {
        Issued {
            access_key_id: String::new(),
            secret_access_key: String::new(),
            token: token.into(),
            lasts,
        }
    }
}

/// A request the stand-in answered: method, path, and its status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asked {
    /// `GET`, `PUT`, `POST`.
    pub method: String,
    /// The path with its query.
    pub path: String,
    /// The status answered.
    pub status: u16,
    /// The body sent (form posts).
    pub body: String,
}

/// The stand-in (see the module docs).
pub struct IdentityStandIn {
    port: u16,
    issued: Arc<Mutex<Issued>>,
    log: Arc<Mutex<Vec<Asked>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl IdentityStandIn {
    /// The path of the ECS credentials (set
    /// `AWS_CONTAINER_CREDENTIALS_FULL_URI` to the endpoint and this).
    pub const ECS_PATH: &'static str = "/v2/credentials/lease-task";
    /// The `Authorization` the ECS endpoint wants
    /// (`AWS_CONTAINER_AUTHORIZATION_TOKEN`).
    pub const ECS_TOKEN: &'static str = "ecs-authorization-token";
    /// The instance's role.
    pub const ROLE: &'static str = "lease-role";
    /// IMDSv2's session token.
    const IMDS_TOKEN: &'static str = "imds-session-token";
    /// The header App Service's identity endpoint wants (`IDENTITY_HEADER`).
    pub const IDENTITY_HEADER: &'static str = "identity-header-secret";

    /// Listens on a free port of `127.0.0.1`, handing out `first`.
    pub fn start(first: Issued) -> IdentityStandIn {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.set_nonblocking(true).expect("non-blocking");
        let port = listener.local_addr().expect("bound").port();
        let issued = Arc::new(Mutex::new(first));
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (issued, log, stop) = (issued.clone(), log.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let (issued, log) = (issued.clone(), log.clone());
                            thread::spawn(move || serve(stream, &issued, &log));
                        }
                        Err(_) => thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        IdentityStandIn {
            port,
            issued,
            log,
            stop,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Hands out `next` from now on.
    pub fn issue(&self, next: Issued) {
        *self.issued.lock().unwrap_or_else(|e| e.into_inner()) = next;
    }

    /// The requests answered so far.
    pub fn log(&self) -> Vec<Asked> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// How many answers handed out credentials.
    pub fn handed_out(&self) -> usize {
        self.log()
            .iter()
            .filter(|a| a.status == 200 && credential_path(&a.path))
            .count()
    }
}

impl Drop for IdentityStandIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn credential_path(path: &str) -> bool {
    path == IdentityStandIn::ECS_PATH
        || path.ends_with(&format!("/security-credentials/{}", IdentityStandIn::ROLE))
        || path.starts_with("/token")
        || path.starts_with("/msi/token")
}

fn serve(stream: TcpStream, issued: &Mutex<Issued>, log: &Mutex<Vec<Asked>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_string(),
        parts.next().unwrap_or("").to_string(),
    );
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = h.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let length: usize = header("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let body = String::from_utf8_lossy(&body).into_owned();
    let now = issued.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let expires_at = SystemTime::now() + now.lasts;
    let imds_ok = header("x-aws-ec2-metadata-token") == Some(IdentityStandIn::IMDS_TOKEN);
    let role_path = "/latest/meta-data/iam/security-credentials/";
    let (status, extra, answer): (u16, Vec<(&str, String)>, String) =
        match (method.as_str(), path.as_str()) {
            ("PUT", "/latest/api/token") => match header("x-aws-ec2-metadata-token-ttl-seconds") {
                Some(ttl) => (
                    200,
                    vec![("x-aws-ec2-metadata-token-ttl-seconds", ttl.to_string())],
                    IdentityStandIn::IMDS_TOKEN.to_string(),
                ),
                None => (400, vec![], String::new()),
            },
            ("GET", p) if p == role_path && imds_ok => {
                (200, vec![], IdentityStandIn::ROLE.to_string())
            }
            ("GET", p) if p == format!("{role_path}{}", IdentityStandIn::ROLE) && imds_ok => {
                (200, vec![], aws_json(&now, expires_at))
            }
            ("GET", IdentityStandIn::ECS_PATH)
                if header("authorization") == Some(IdentityStandIn::ECS_TOKEN) =>
            {
                (200, vec![], aws_json(&now, expires_at))
            }
            ("POST", "/token") => (200, vec![], google_json(&now, expires_at)),
            ("GET", p)
                if p.starts_with("/msi/token")
                    && header("x-identity-header") == Some(IdentityStandIn::IDENTITY_HEADER) =>
            {
                (200, vec![], azure_json(&now, expires_at))
            }
            _ => (401, vec![], String::new()),
        };
    log.lock().unwrap_or_else(|e| e.into_inner()).push(Asked {
        method,
        path,
        status,
        body,
    });
    let mut out = format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nContent-Type: {}\r\nConnection: close\r\n",
        answer.len(),
        if answer.starts_with('{') {
            "application/json"
        } else {
            "text/plain"
        }
    );
    for (name, value) in extra {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(&answer);
    let mut stream = stream;
    let _ = stream.write_all(out.as_bytes());
}

fn seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn aws_json(i: &Issued, expires_at: SystemTime) -> String {
    serde_json::json!({
        "Code": "Success",
        "Type": "AWS-HMAC",
        "AccessKeyId": i.access_key_id,
        "SecretAccessKey": i.secret_access_key,
        "Token": i.token,
        "Expiration": iso8601(seconds(expires_at)),
        "LastUpdated": iso8601(seconds(SystemTime::now())),
    })
    .to_string()
}

fn google_json(i: &Issued, expires_at: SystemTime) -> String {
    let left = seconds(expires_at).saturating_sub(seconds(SystemTime::now()));
    serde_json::json!({"access_token": i.token, "expires_in": left, "token_type": "Bearer"})
        .to_string()
}

fn azure_json(i: &Issued, expires_at: SystemTime) -> String {
    serde_json::json!({
        "access_token": i.token,
        "expires_on": seconds(expires_at).to_string(),
        "resource": "https://storage.azure.com",
        "token_type": "Bearer",
    })
    .to_string()
}

/// `2026-11-27T22:25:18Z` for a Unix time in seconds.
pub fn iso8601(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_as_aws_writes_them() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(1_795_818_318), "2026-11-27T22:25:18Z");
    }
}
