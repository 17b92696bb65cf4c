//! moto (5.2.5, from `.venv`): an S3 emulator that honours conditional
//! writes and, optionally, checks SigV4 signatures.

use super::http::{http_request, HttpResponse};
use super::paths::{venv_dir, workspace_root};
use super::process::{spawn_on_free_port, ServerProcess};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

/// How to run moto.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MotoOptions {
    /// Check request signatures (off by default, as in moto).
    ///
    /// The server is started with `INITIAL_NO_AUTH_ACTION_COUNT=0`, which
    /// is what turns moto's authentication on. moto then accepts only
    /// access keys that exist in its own IAM: no fixed test key works
    /// (`test`/`test` and `AKIAIOSFODNN7EXAMPLE` get 403
    /// `InvalidAccessKeyId`). So [`Moto::start`] creates an IAM user
    /// (`lease-tests`, allowed every action) and an access key for it, and
    /// [`Moto::credentials`] returns that key: sign requests with it for
    /// region [`Moto::REGION`] and service `s3`. A wrong secret gets 403
    /// `SignatureDoesNotMatch`; a request without an `Authorization`
    /// header gets **500** in moto 5.2.5 (an unhandled `KeyError`), not
    /// 403, and is not carried out.
    pub auth: bool,
    /// Handle one request at a time.
    ///
    /// moto's own server gives each connection a thread, and its
    /// conditional writes check, then write, without a lock: two concurrent
    /// `If-None-Match: *` PUTs of one key can both get 200. With
    /// `serialized`, moto's WSGI app is served by `tests/servers/moto_serial.py`
    /// instead: werkzeug with `threaded=False`, one connection at a time,
    /// HTTP/1.0 (no keep-alive). Use it for tests whose outcome depends on
    /// conditional writes being atomic.
    pub serialized: bool,
}

/// The access key [`Moto::start`] creates in moto's IAM when
/// [`MotoOptions::auth`] is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MotoCredentials {
    /// The access key id (`AKIA` and 16 random characters).
    pub access_key_id: String,
    /// The secret access key (40 random characters).
    pub secret_access_key: String,
}

/// A moto server on `127.0.0.1`, stopped by its PID on drop.
///
/// Send every S3 request with an `Authorization` header, even with
/// [`MotoOptions::auth`] off: moto then does not check it, but a request
/// without one is anonymous, and moto 5.2.5 refuses anonymous requests on
/// an existing key with 403 (empty body) before it looks at `If-None-Match`
/// or `If-Match`. Any SigV4 header does, e.g. one signed with `test`/`test`
/// or [`Moto::UNCHECKED_AUTHORIZATION`]. Send `Content-Type:
/// application/octet-stream` on PUTs.
///
/// With [`MotoOptions::auth`] on, [`Moto::create_bucket`] and the start
/// itself briefly suspend authentication through moto's
/// `POST /moto-api/reset-auth` (see [`Moto::with_auth_suspended`]): create
/// buckets before the signed traffic under test starts.
pub struct Moto {
    process: ServerProcess,
    options: MotoOptions,
    credentials: Option<MotoCredentials>,
    /// Serialises the harness's own suspend/resume of authentication.
    admin: Mutex<()>,
}

/// A SigV4-looking `Authorization` header whose credential scope names IAM.
/// moto picks the backend of a request from this scope (it ignores `Host`),
/// so the IAM calls of the set-up carry it; the signature itself is not
/// checked while authentication is suspended.
const IAM_ROUTING_AUTH: &str = "AWS4-HMAC-SHA256 \
     Credential=AKIAHARNESSSETUP0000/20260101/us-east-1/iam/aws4_request, \
     SignedHeaders=host, Signature=0";

/// The policy of the IAM user the harness creates: everything allowed.
const ALLOW_ALL_POLICY: &str =
    r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#;

impl Moto {
    /// The region to sign requests for.
    pub const REGION: &'static str = "us-east-1";

    /// An `Authorization` header value for requests to a moto started
    /// without [`MotoOptions::auth`]: a SigV4 header for `s3` in
    /// [`Moto::REGION`] with a dummy key and signature, which moto does not
    /// check, but which makes the request non-anonymous (see [`Moto`]).
    /// With auth on it gets 403 `InvalidAccessKeyId`.
    pub const UNCHECKED_AUTHORIZATION: &'static str = "AWS4-HMAC-SHA256 \
         Credential=test/20260101/us-east-1/s3/aws4_request, \
         SignedHeaders=host, Signature=0";

    /// The IAM user whose access key [`Moto::credentials`] returns.
    pub const IAM_USER: &'static str = "lease-tests";

    /// Starts moto on a free port of `127.0.0.1` and waits until it
    /// answers (about 1 s).
    ///
    /// Runs `.venv/bin/moto_server -H 127.0.0.1 -p PORT`, or
    /// `.venv/bin/python tests/servers/moto_serial.py -H 127.0.0.1 -p PORT`
    /// when [`MotoOptions::serialized`]. `INITIAL_NO_AUTH_ACTION_COUNT` is
    /// set to `0` when [`MotoOptions::auth`] is on and removed from the
    /// environment otherwise. With auth on, an IAM user and its access key
    /// are created (see [`MotoOptions::auth`]). Fails with "run `make setup`
    /// first" when the venv is missing.
    pub fn start(opts: MotoOptions) -> Result<Moto, String> {
        let venv = venv_dir()?;
        let serial_script = workspace_root().join("tests/servers/moto_serial.py");
        let name = if opts.serialized {
            "moto (serialized)"
        } else {
            "moto"
        };
        let process = spawn_on_free_port(name, "/moto-api/reset-auth", |port, _dir| {
            let mut command = if opts.serialized {
                let mut c = Command::new(venv.join("bin/python"));
                c.arg(&serial_script);
                c
            } else {
                Command::new(venv.join("bin/moto_server"))
            };
            command
                .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                .env("PYTHONUNBUFFERED", "1")
                .env("MOTO_PORT", port.to_string());
            if opts.auth {
                command.env("INITIAL_NO_AUTH_ACTION_COUNT", "0");
            } else {
                command.env_remove("INITIAL_NO_AUTH_ACTION_COUNT");
            }
            command
        })?;
        let mut moto = Moto {
            process,
            options: opts,
            credentials: None,
            admin: Mutex::new(()),
        };
        // The first S3 request loads moto's S3 backend (about 0.5 s): do it
        // now rather than in the middle of a timed test.
        let credentials = moto.with_auth_suspended(|| {
            moto.expect_ok(moto.request("GET", "/", &[], b""), "ListBuckets")?;
            if opts.auth {
                moto.create_iam_credentials().map(Some)
            } else {
                Ok(None)
            }
        })?;
        moto.credentials = credentials;
        Ok(moto)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        self.process.endpoint()
    }

    /// The port moto listens on.
    pub fn port(&self) -> u16 {
        self.process.port()
    }

    /// The PID of the server process itself (the Python interpreter running
    /// moto, not a wrapper).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The options it was started with.
    pub fn options(&self) -> MotoOptions {
        self.options
    }

    /// The access key to sign with: `Some` exactly when
    /// [`MotoOptions::auth`] is on.
    pub fn credentials(&self) -> Option<&MotoCredentials> {
        self.credentials.as_ref()
    }

    /// The last `lines` lines of moto's output (one line per request, and
    /// a Python traceback for each 500).
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }

    /// The file moto's stdout and stderr go to (removed on drop).
    pub fn log_path(&self) -> PathBuf {
        self.process.log_path()
    }

    /// Creates bucket `name` with an unsigned `PUT /name`.
    ///
    /// With [`MotoOptions::auth`] on, the PUT is sent while authentication
    /// is suspended ([`Moto::with_auth_suspended`]), so it needs no
    /// signature. Fails on any status but 200 (moto answers 409
    /// `BucketAlreadyExists` for a bucket that exists).
    pub fn create_bucket(&self, name: &str) -> Result<(), String> {
        self.with_auth_suspended(|| {
            let path = format!("/{name}");
            self.expect_ok(
                self.request("PUT", &path, &[], b""),
                &format!("CreateBucket {name}"),
            )
            .map(|_| ())
        })
    }

    /// Turns versioning on for bucket `name` (PutBucketVersioning, sent
    /// while authentication is suspended): every write then makes a
    /// version and answers with its `x-amz-version-id`.
    pub fn enable_versioning(&self, name: &str) -> Result<(), String> {
        self.with_auth_suspended(|| {
            let path = format!("/{name}?versioning");
            let body = br#"<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>Enabled</Status></VersioningConfiguration>"#;
            self.expect_ok(
                self.request("PUT", &path, &[("Content-Type", "application/xml")], body),
                &format!("PutBucketVersioning {name}"),
            )
            .map(|_| ())
        })
    }

    /// Runs `f` with moto's authentication suspended, then turns it on
    /// again (even if `f` failed). Does nothing special when
    /// [`MotoOptions::auth`] is off.
    ///
    /// It posts `inf`, then `0`, to moto's `/moto-api/reset-auth` (the
    /// runtime form of `INITIAL_NO_AUTH_ACTION_COUNT`; it also resets
    /// moto's count of requests to 0). While `f` runs, moto accepts
    /// unsigned requests from anyone, so suspend it only around set-up
    /// (buckets, seed objects), not during the traffic a test checks.
    /// Calls on one [`Moto`] are serialised by a lock.
    pub fn with_auth_suspended<T>(
        &self,
        f: impl FnOnce() -> Result<T, String>,
    ) -> Result<T, String> {
        if !self.options.auth {
            return f();
        }
        let _guard = self.admin.lock().unwrap_or_else(|e| e.into_inner());
        self.reset_auth("inf")?;
        let result = f();
        let resumed = self.reset_auth("0");
        let value = result?;
        resumed.map(|()| value)
    }

    fn reset_auth(&self, count: &str) -> Result<(), String> {
        let response = self.request(
            "POST",
            "/moto-api/reset-auth",
            &[("Content-Type", "text/plain")],
            count.as_bytes(),
        );
        self.expect_ok(response, &format!("reset-auth {count}"))
            .map(|_| ())
    }

    /// Another access key of [`Moto::IAM_USER`] (a rotation's next key;
    /// IAM allows a user two). Authentication is suspended meanwhile:
    /// call it before the traffic under test.
    pub fn create_access_key(&self) -> Result<MotoCredentials, String> {
        self.with_auth_suspended(|| {
            let key = self.iam_call(
                "CreateAccessKey",
                &[("UserName", Self::IAM_USER)],
                IAM_ROUTING_AUTH,
            )?;
            Self::access_key_of(&key.text())
        })
    }

    /// Deletes access key `id` of [`Moto::IAM_USER`], asking IAM with a
    /// request signed by `signer` (another key of the user): moto's
    /// authentication stays on, and from then on a request signed with `id`
    /// gets 403 `InvalidAccessKeyId`.
    pub fn delete_access_key(&self, id: &str, signer: &MotoCredentials) -> Result<(), String> {
        use lease_core::wire::SigV4Signer;
        use lease_core::wire::Signer;
        let form = format!(
            "Action=DeleteAccessKey&Version=2010-05-08&UserName={}&AccessKeyId={}",
            form_encode(Self::IAM_USER),
            form_encode(id)
        );
        let mut request = http::Request::post(format!("{}/", self.endpoint()))
            .header("host", format!("127.0.0.1:{}", self.port()))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form.clone().into_bytes())
            .map_err(|e| e.to_string())?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| e.to_string())?;
        SigV4Signer::new(
            signer.access_key_id.clone(),
            signer.secret_access_key.clone(),
            None,
            Self::REGION,
        )
        .with_service("iam")
        .sign(&mut request, lease_core::UnixMillis(now.as_millis() as u64))
        .map_err(|e| e.to_string())?;
        let headers: Vec<(String, String)> = request
            .headers()
            .iter()
            .filter(|(n, _)| n.as_str() != "host")
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect();
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let response = self.request("POST", "/", &headers, form.as_bytes());
        self.expect_ok(response, "IAM DeleteAccessKey").map(|_| ())
    }

    fn iam_call(
        &self,
        action: &str,
        params: &[(&str, &str)],
        authorization: &str,
    ) -> Result<HttpResponse, String> {
        let mut form = format!("Action={action}&Version=2010-05-08");
        for (key, value) in params {
            form.push_str(&format!("&{key}={}", form_encode(value)));
        }
        let response = self.request(
            "POST",
            "/",
            &[
                ("Authorization", authorization),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            form.as_bytes(),
        );
        self.expect_ok(response, &format!("IAM {action}"))
    }

    fn access_key_of(body: &str) -> Result<MotoCredentials, String> {
        let field = |tag: &str| {
            xml_text(body, tag)
                .ok_or_else(|| format!("moto's CreateAccessKey answer has no <{tag}>: {body}"))
        };
        Ok(MotoCredentials {
            access_key_id: field("AccessKeyId")?,
            secret_access_key: field("SecretAccessKey")?,
        })
    }

    /// Creates [`Moto::IAM_USER`], allows it everything, and returns a new
    /// access key of it. Authentication must be suspended.
    /// A second IAM user, `lease-reader`, that may only read and list
    /// (`s3:GetObject`, `s3:ListBucket`), and its access key: an
    /// auditor's or a dashboard's credentials. Needs [`MotoOptions::auth`];
    /// authentication is suspended meanwhile.
    pub fn create_read_only_credentials(&self) -> Result<MotoCredentials, String> {
        const READER: &str = "lease-reader";
        const READ_ONLY: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:GetObject","s3:ListBucket"],"Resource":"*"}]}"#;
        self.with_auth_suspended(|| {
            let iam = |action: &str, params: &[(&str, &str)]| {
                self.iam_call(action, params, IAM_ROUTING_AUTH)
            };
            iam("CreateUser", &[("UserName", READER)])?;
            iam(
                "PutUserPolicy",
                &[
                    ("UserName", READER),
                    ("PolicyName", "read-only"),
                    ("PolicyDocument", READ_ONLY),
                ],
            )?;
            let key = iam("CreateAccessKey", &[("UserName", READER)])?;
            Self::access_key_of(&key.text())
        })
    }

    fn create_iam_credentials(&self) -> Result<MotoCredentials, String> {
        let iam =
            |action: &str, params: &[(&str, &str)]| self.iam_call(action, params, IAM_ROUTING_AUTH);
        iam("CreateUser", &[("UserName", Self::IAM_USER)])?;
        iam(
            "PutUserPolicy",
            &[
                ("UserName", Self::IAM_USER),
                ("PolicyName", "allow-all"),
                ("PolicyDocument", ALLOW_ALL_POLICY),
            ],
        )?;
        let key = iam("CreateAccessKey", &[("UserName", Self::IAM_USER)])?;
        Self::access_key_of(&key.text())
    }

    fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<HttpResponse, String> {
        http_request(&self.endpoint(), method, path, headers, body)
    }

    fn expect_ok(
        &self,
        response: Result<HttpResponse, String>,
        what: &str,
    ) -> Result<HttpResponse, String> {
        match response {
            Ok(r) if r.status == 200 => Ok(r),
            Ok(r) => Err(format!(
                "moto {what}: status {} {}; last lines of its log:\n{}",
                r.status,
                r.text(),
                self.log_tail(20)
            )),
            Err(e) => Err(format!(
                "moto {what}: {e}; last lines of its log:\n{}",
                self.log_tail(20)
            )),
        }
    }
}

/// `application/x-www-form-urlencoded` value encoding.
fn form_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The text of the first `<tag>...</tag>` in `xml`.
fn xml_text(xml: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&format!("</{tag}>"))?;
    Some(xml[start..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_forms_and_reads_xml() {
        assert_eq!(
            form_encode(r#"{"a":"*"} x"#),
            "%7B%22a%22%3A%22%2A%22%7D%20x"
        );
        let xml = "<R><AccessKeyId>AKIA1</AccessKeyId><SecretAccessKey>s/k</SecretAccessKey></R>";
        assert_eq!(xml_text(xml, "AccessKeyId").as_deref(), Some("AKIA1"));
        assert_eq!(xml_text(xml, "SecretAccessKey").as_deref(), Some("s/k"));
        assert_eq!(xml_text(xml, "Missing"), None);
    }
}
