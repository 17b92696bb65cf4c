//! The platform's AWS credentials (lease-native's `cloud-credentials`,
//! which the `lease` CLI and services have), against moto with signature
//! checking on: moto accepts only keys its IAM knows, so a request signed
//! with anything but the key the chain found is refused. The chain's
//! endpoints are stand-ins on 127.0.0.1 (`lease_tests::servers::
//! IdentityStandIn`): ECS container credentials, EC2 instance metadata
//! (IMDSv2). Each process gets a home and AWS files of its own, and
//! instance metadata is off unless the test is about it, so nothing of
//! the machine's is read.

mod support;

use lease_tests::servers::{IdentityStandIn, Issued, Moto, MotoCredentials};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

/// A directory of the test's own, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("lease-creds-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `cmd` (a `lease` or the example service) reaching moto with no key
/// set: the credentials are the chain's, from `env` only.
fn no_keys(cmd: &mut Command, home: &Path, env: &[(&str, String)]) {
    for var in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("HOME", home)
        .env("AWS_CONFIG_FILE", home.join("no-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", home.join("no-credentials"))
        .env("AWS_EC2_METADATA_DISABLED", "true");
    for (k, v) in env {
        cmd.env(k, v);
    }
}

/// The variables that point the chain at `ecs`'s container credentials.
fn ecs_env(ecs: &IdentityStandIn) -> Vec<(&'static str, String)> {
    vec![
        (
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            format!("{}{}", ecs.endpoint(), IdentityStandIn::ECS_PATH),
        ),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN",
            IdentityStandIn::ECS_TOKEN.to_string(),
        ),
    ]
}

/// `lease` against `moto` with the chain's credentials.
fn lease_with(moto: &Moto, key: &str, home: &Path, env: &[(&str, String)]) -> Command {
    let mut settings = moto_settings(moto);
    settings.credentials = None;
    let mut cmd = lease(&settings, key);
    no_keys(&mut cmd, home, env);
    cmd
}

/// A key of moto's IAM user as the endpoints hand out a role's
/// credentials, lasting `lasts`. The session token is empty: moto refuses
/// a token it did not issue with an IAM user's key (`InvalidToken`), and
/// an empty token is no token to the chain as to AWS.
/// The example leader (ttl 4 s, as `holder`) against `moto` with the
/// chain's credentials from `env`, its stdout lines on the channel.
fn leader(
    moto: &Moto,
    home: &Path,
    holder: &str,
    env: &[(&str, String)],
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut settings = moto_settings(moto);
    settings.credentials = None;
    let mut cmd = example_leader_command(&settings, holder, "4s");
    no_keys(&mut cmd, home, env);
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the example starts");
    let stdout = child.stdout.take().expect("piped");
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = send.send(line);
        }
    });
    (child, lines)
}

fn issued(key: &MotoCredentials, lasts: Duration) -> Issued {
    Issued {
        access_key_id: key.access_key_id.clone(),
        secret_access_key: key.secret_access_key.clone(),
        token: String::new(),
        lasts,
    }
}

/// Nothing secret in what a process printed.
fn assert_no_secrets(out: &str, keys: &[&MotoCredentials], tokens: &[&str]) {
    for k in keys {
        assert!(
            !out.contains(&k.secret_access_key),
            "a secret key leaked:\n{out}"
        );
    }
    for t in tokens {
        assert!(!out.contains(t), "a token leaked:\n{out}");
    }
}

#[test]
fn the_cli_signs_with_a_named_profile_and_its_key_is_what_moto_checks() {
    let moto = moto(false);
    let key = moto.credentials().expect("auth on").clone();
    let home = Dir::new("profile");
    let files = |secret: &str| {
        std::fs::write(
            home.0.join("config"),
            "[default]\nregion = eu-west-3\n\n[profile leases]\nregion = us-east-1\n",
        )
        .unwrap();
        std::fs::write(
            home.0.join("credentials"),
            format!(
                "[leases]\naws_access_key_id = {}\naws_secret_access_key = {secret}\n",
                key.access_key_id
            ),
        )
        .unwrap();
    };
    let env = [
        ("AWS_PROFILE", "leases".to_string()),
        (
            "AWS_CONFIG_FILE",
            home.0.join("config").display().to_string(),
        ),
        (
            "AWS_SHARED_CREDENTIALS_FILE",
            home.0.join("credentials").display().to_string(),
        ),
    ];
    files(&key.secret_access_key);
    let (code, json, out) =
        lease_json(lease_with(&moto, "creds/profile", &home.0, &env).args(["acquire", "--json"]));
    assert_eq!(code, 0, "{out}");
    assert_eq!(json["lease"]["token"], 1, "{out}");
    assert_no_secrets(&out, &[&key], &[]);
    // The same profile with a wrong secret: moto refuses the signature,
    // so it was the profile's key that signed.
    files("wJalrXUtnFEMI/K7MDENG/bPxRfiCYWRONGSECRET");
    let (code, _, out) =
        lease_json(lease_with(&moto, "creds/profile", &home.0, &env).args(["inspect", "--json"]));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("SignatureDoesNotMatch") || out.contains("denied"),
        "{out}"
    );
    assert_no_secrets(&out, &[], &["WRONGSECRET"]);
}

#[test]
fn the_cli_signs_with_container_credentials() {
    let moto = moto(false);
    let key = moto.credentials().expect("auth on").clone();
    let ecs = IdentityStandIn::start(issued(&key, Duration::from_secs(3600)));
    let home = Dir::new("ecs");
    let env = ecs_env(&ecs);
    let (code, json, out) =
        lease_json(lease_with(&moto, "creds/ecs", &home.0, &env).args(["acquire", "--json"]));
    assert_eq!(code, 0, "{out}");
    assert_eq!(json["lease"]["token"], 1, "{out}");
    assert_eq!(ecs.handed_out(), 1, "{:?}", ecs.log());
    assert_no_secrets(&out, &[&key], &[IdentityStandIn::ECS_TOKEN]);
    // Without the endpoint's authorization token it hands out nothing,
    // and the command says why without sending a request unsigned.
    let env = [env[0].clone()];
    let (code, _, out) =
        lease_json(lease_with(&moto, "creds/ecs", &home.0, &env).args(["inspect", "--json"]));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("no usable credentials from the AWS default credential chain"),
        "{out}"
    );
}

#[test]
fn the_cli_signs_with_instance_metadata() {
    let moto = moto(false);
    let key = moto.credentials().expect("auth on").clone();
    let imds = IdentityStandIn::start(issued(&key, Duration::from_secs(3600)));
    let home = Dir::new("imds");
    let env = [
        ("AWS_EC2_METADATA_DISABLED", "false".to_string()),
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint()),
    ];
    let (code, json, out) =
        lease_json(lease_with(&moto, "creds/imds", &home.0, &env).args(["acquire", "--json"]));
    assert_eq!(code, 0, "{out}");
    assert_eq!(json["lease"]["token"], 1, "{out}");
    // IMDSv2: the session token first, then the role, then its keys.
    let asked: Vec<String> = imds
        .log()
        .iter()
        .map(|a| format!("{} {} {}", a.method, a.path, a.status))
        .collect();
    assert_eq!(
        asked[..3],
        [
            "PUT /latest/api/token 200".to_string(),
            "GET /latest/meta-data/iam/security-credentials/ 200".to_string(),
            format!(
                "GET /latest/meta-data/iam/security-credentials/{} 200",
                IdentityStandIn::ROLE
            ),
        ],
        "{asked:?}"
    );
    assert_no_secrets(&out, &[&key], &[]);
}

/// Credentials that expire in the middle of a hold: `lease run` holds a
/// 4 s lease for 44 s on container credentials that last 40 s. The keeper
/// fetches the next ones on a task of its own half-way through their life
/// (the stand-in hands out the other key of the IAM user from the first
/// fetch on); the first key is deleted from moto's IAM at 25 s, while it is
/// still valid, so a keeper that only fetched once its grant ran out (at
/// 30 s) would sign renewals with a deleted key; and every renewal past the
/// first key's expiry is signed with the second. The job runs to its end
/// under the lease (exit 0); a build that never refreshes exits 4 (lost).
#[test]
fn a_hold_outlives_the_credentials_it_started_with() {
    let moto = moto(false);
    let first = moto.credentials().expect("auth on").clone();
    let second = moto.create_access_key().expect("a second key");
    let ecs = IdentityStandIn::start(issued(&first, Duration::from_secs(40)));
    let home = Dir::new("refresh");
    let env = ecs_env(&ecs);
    let mut run = lease_with(&moto, "creds/refresh", &home.0, &env);
    let child = run
        .args(["run", "--ttl", "4s", "--", "sleep", "44"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lease run starts");
    // From the first fetch on, the next credentials are the second key's
    // (a loaded machine may take a while to start the command).
    let spawned = Instant::now();
    while ecs.handed_out() == 0 && spawned.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let started = Instant::now();
    ecs.issue(issued(&second, Duration::from_secs(3600)));
    std::thread::sleep(Duration::from_secs(25));
    moto.delete_access_key(&first.access_key_id, &second)
        .expect("the first key deleted");
    let out = child.wait_with_output().expect("lease run ends");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        started.elapsed() > Duration::from_secs(24),
        "the hold outlived the first key"
    );
    assert_eq!(ecs.handed_out(), 2, "{:?} {text}", ecs.log());
    assert_no_secrets(&text, &[&first, &second], &[IdentityStandIn::ECS_TOKEN]);
}

/// The example service (`native/examples/leader.rs`, leader election on
/// `lease_native::from_env`) leads on instance-metadata credentials and
/// keeps leading across their rotation and the first key's deletion.
#[test]
fn a_leader_keeps_its_lease_across_a_credentials_rotation() {
    let moto = moto(false);
    let first = moto.credentials().expect("auth on").clone();
    let second = moto.create_access_key().expect("a second key");
    let imds = IdentityStandIn::start(issued(&first, Duration::from_secs(24)));
    let home = Dir::new("leader");
    let spawned = Instant::now();
    let (mut child, lines) = leader(
        &moto,
        &home.0,
        "leader",
        &[
            ("AWS_EC2_METADATA_DISABLED", "false".to_string()),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint()),
        ],
    );
    // Leading once it has fetched (a loaded machine may take a while).
    let first_line = lines.recv_timeout(Duration::from_secs(120));
    let started = Instant::now();
    imds.issue(issued(&second, Duration::from_secs(3600)));
    eprintln!("leading {:?} after the start", spawned.elapsed());
    std::thread::sleep(Duration::from_secs(16));
    moto.delete_access_key(&first.access_key_id, &second)
        .expect("the first key deleted");
    // Past the first key's expiry, still leading: no other line.
    let later = lines.recv_timeout(Duration::from_secs(30).saturating_sub(started.elapsed()));
    let alive = child.try_wait().expect("wait").is_none();
    let _ = child.kill();
    let out = child.wait_with_output().expect("reaped");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(
        first_line.as_deref(),
        Ok("leading with token 1"),
        "{stderr}"
    );
    // No line, and the process alive: still leading, not dead.
    assert_eq!(
        later,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout),
        "{stderr}"
    );
    assert!(alive, "the example exited: {stderr}");
    assert_eq!(imds.handed_out(), 2, "{:?}", imds.log());
    assert_no_secrets(&stderr, &[&first, &second], &[]);
}

/// The example service leads on a named profile and on container
/// credentials, as on instance metadata above.
#[test]
fn a_leader_leads_on_a_profile_and_on_container_credentials() {
    let moto = moto(false);
    let key = moto.credentials().expect("auth on").clone();
    let home = Dir::new("leader-sources");
    std::fs::write(
        home.0.join("credentials"),
        format!(
            "[svc]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            key.access_key_id, key.secret_access_key
        ),
    )
    .unwrap();
    let ecs = IdentityStandIn::start(issued(&key, Duration::from_secs(3600)));
    let sources: [(&str, Vec<(&str, String)>); 2] = [
        (
            "profile",
            vec![
                ("AWS_PROFILE", "svc".to_string()),
                (
                    "AWS_SHARED_CREDENTIALS_FILE",
                    home.0.join("credentials").display().to_string(),
                ),
            ],
        ),
        ("container", ecs_env(&ecs)),
    ];
    for (i, (source, env)) in sources.iter().enumerate() {
        let (mut child, lines) = leader(&moto, &home.0, source, env);
        let line = lines.recv_timeout(Duration::from_secs(120)).ok();
        let _ = child.kill();
        let out = child.wait_with_output().expect("reaped");
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        // Each leads in turn (the one before was killed; its lease expires).
        let token = i + 1;
        assert_eq!(
            line.as_deref(),
            Some(format!("leading with token {token}").as_str()),
            "{source}: {stderr}"
        );
        assert_no_secrets(&stderr, &[&key], &[IdentityStandIn::ECS_TOKEN]);
    }
    assert_eq!(ecs.handed_out(), 1, "{:?}", ecs.log());
}
