//! The Azure Blob dialect against Azurite, the real emulator: 20
//! contenders with one winner per epoch, the probe, SharedKey and SAS
//! authentication (a container SAS runs the conformance lifecycle), and the
//! settings path (`LEASE_PROVIDER=azure`) the adapters use. The three
//! protocols' lifecycles on Azurite are in `conformance.rs`.

mod support;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use lease_conformance::{Expect, Options};
use lease_core::protocol::{Check, Probe};
use lease_core::settings::AzureAuth;
use lease_core::store::{PutCondition, ReplyKind};
use lease_core::wire::Provider;
use lease_core::{AcquireOutcome, LeaseError, LeaseOp, Protocol, ReleaseOutcome, StoreOp};
use lease_native::os_entropy;
use lease_tests::servers::Azurite;
use sha2::Sha256;
use std::time::Duration;
use support::*;

/// 20 contenders at once, three rounds: each round has exactly one winner,
/// and each winner's token is the previous winner's + 1. Azurite is not
/// serialised: its conditional writes are atomic.
#[test]
fn twenty_contenders_one_winner_per_epoch() {
    let azurite = azurite();
    let settings = azure_settings(&azurite);
    for protocol in Protocol::ALL {
        let key = format!("race/{protocol}");
        let mut last_token = None;
        for round in 0..3 {
            let outcomes = contend(&settings, protocol, &key, 20, Duration::from_secs(30));
            assert_eq!(
                tally(&outcomes),
                (1, 19),
                "{protocol} round {round}: {outcomes:?}"
            );
            let winner = outcomes
                .into_iter()
                .find_map(|o| match o {
                    Ok(AcquireOutcome::Acquired(lease)) => Some(lease),
                    _ => None,
                })
                .expect("one winner");
            if protocol.fences() {
                if let Some(last) = last_token {
                    assert_eq!(
                        winner.token,
                        support::next_after_release(protocol, last),
                        "{protocol} round {round}"
                    );
                }
            }
            last_token = Some(winner.token);
            let cfg = config(
                protocol,
                &key,
                &winner.record.holder,
                Duration::from_secs(30),
            );
            let store = store(&settings);
            assert_eq!(
                run(&store, LeaseOp::release(cfg, os_entropy(), winner.clone())),
                Ok(ReleaseOutcome::Released {
                    token: winner.token
                }),
                "{protocol} round {round}"
            );
        }
    }
}

#[test]
fn the_probe_passes_for_every_protocol() {
    let azurite = azurite();
    let store = store(&azure_settings(&azurite));
    let cfg = config(Protocol::Cas, "probe/here", "prober", TTL * 10);
    let report = run(&store, Probe::new(cfg, os_entropy())).expect("probe runs");
    for protocol in Protocol::ALL {
        assert!(report.supports(protocol).is_ok(), "{protocol}: {report}");
    }
    for check in [
        Check::IfMatchCurrent,
        Check::IfMatchMissingNotCreated,
        Check::SecondCreateRefused,
        Check::DeleteIfMatchStale,
        Check::DeleteIfMatchCurrent,
        Check::ListAfterWrite,
        Check::ListPages,
    ] {
        assert!(report.passed(check), "{check:?}: {report}");
    }
}

/// Azure's answers, as the dialect classifies them: 409
/// `BlobAlreadyExists` on a second create is a failed precondition, names
/// with spaces, `+` and non-ASCII sign and round-trip, and a wrong key is
/// denied by name.
#[test]
fn azure_answers_and_authentication() {
    let azurite = azurite();
    let settings = azure_settings(&azurite);
    let store = store(&settings);
    let on = |op: StoreOp| call(&store, op);

    let key = "odd names/a b+c é".to_string();
    let put = |condition| StoreOp::Put {
        key: key.clone(),
        body: b"{}".to_vec(),
        condition,
    };
    let created = on(put(PutCondition::IfAbsent));
    let ReplyKind::Written { etag: Some(etag) } = created.kind else {
        panic!("create: {created:?}");
    };
    assert!(created.date.is_some(), "Azure dates its replies");
    assert_eq!(
        on(put(PutCondition::IfAbsent)).kind,
        ReplyKind::PreconditionFailed,
        "409 BlobAlreadyExists"
    );
    match on(StoreOp::Get { key: key.clone() }).kind {
        ReplyKind::Found { etag: found, body } => {
            assert_eq!((found, body), (etag.clone(), b"{}".to_vec()))
        }
        other => panic!("get: {other:?}"),
    }
    match on(StoreOp::List {
        prefix: "odd names/".into(),
        continuation: None,
        max_keys: None,
    })
    .kind
    {
        ReplyKind::Listed { entries, next } => {
            assert_eq!(next, None);
            assert_eq!(entries.len(), 1);
            assert_eq!(
                (&entries[0].key, entries[0].etag.as_ref()),
                (&key, Some(&etag))
            );
        }
        other => panic!("list: {other:?}"),
    }
    assert_eq!(
        on(StoreOp::Delete {
            key: key.clone(),
            if_match: Some(lease_core::Etag::new("\"0x1\"")),
        })
        .kind,
        ReplyKind::PreconditionFailed
    );
    assert_eq!(
        on(StoreOp::Delete {
            key: key.clone(),
            if_match: Some(etag),
        })
        .kind,
        ReplyKind::Deleted
    );
    assert_eq!(
        on(StoreOp::Get { key: key.clone() }).kind,
        ReplyKind::Missing
    );

    // The wrong key: denied, and the answer does not carry the key.
    let mut wrong = settings.clone();
    wrong.azure = Some(AzureAuth::Key(STANDARD.encode([7u8; 32])));
    let wrong_store = support::store(&wrong);
    let denied = call(&wrong_store, StoreOp::Get { key: "k".into() });
    match &denied.kind {
        ReplyKind::Denied { code, .. } => {
            assert!(
                matches!(
                    code.as_deref(),
                    Some("AuthorizationFailure" | "AuthenticationFailed")
                ),
                "{denied:?}"
            )
        }
        other => panic!("wrong key: {other:?}"),
    }
    assert!(!format!("{denied:?}").contains(azurite.key()));

    // A missing container is named.
    let mut missing = settings.clone();
    missing.bucket = "no-such-container".into();
    let outcome = run(
        &support::store(&missing),
        LeaseOp::acquire(config(Protocol::Cas, "k", "a", TTL), os_entropy()),
    );
    assert!(
        matches!(outcome, Err(LeaseError::NoSuchBucket { .. })),
        "{outcome:?}"
    );
}

/// A container SAS (signed here with the account key, as `az storage
/// container generate-sas` would) authenticates the whole lease.
#[test]
fn a_sas_token_works_and_a_bad_one_is_denied() {
    let azurite = azurite();
    let sas = container_sas(&azurite, "racwdl", "2099-01-01T00:00:00Z");
    let settings = settings_from(&[
        ("LEASE_PROVIDER", "azure"),
        ("LEASE_ENDPOINT", &azurite.endpoint()),
        ("LEASE_BUCKET", AZURE_CONTAINER),
        ("AZURE_STORAGE_SAS_TOKEN", &sas),
    ])
    .expect("valid settings");
    assert!(!format!("{settings:?}").contains("sig="));
    let mut subject = native_subject("Azurite, container SAS", &settings);
    // The SAS names the container: another one is denied, not missing.
    subject.missing_bucket = None;
    conform(
        &subject,
        &Options::real_time(),
        &[(Protocol::Cas, Expect::Supported)],
    );

    let read_only = container_sas(&azurite, "rl", "2099-01-01T00:00:00Z");
    let mut denied = settings.clone();
    denied.azure = Some(AzureAuth::Sas(read_only));
    let outcome = run(
        &support::store(&denied),
        LeaseOp::acquire(config(Protocol::Cas, "sas/ro", "a", TTL), os_entropy()),
    );
    assert!(
        matches!(outcome, Err(LeaseError::Denied { .. })),
        "{outcome:?}"
    );
}

#[test]
fn settings_name_what_is_missing() {
    let cases: [(&[(&str, &str)], &str); 4] = [
        (
            &[("LEASE_PROVIDER", "azure"), ("LEASE_BUCKET", "locks")],
            "AZURE_STORAGE_ACCOUNT is not set",
        ),
        (
            &[
                ("LEASE_PROVIDER", "azure"),
                ("LEASE_BUCKET", "locks"),
                ("AZURE_STORAGE_ACCOUNT", "acct"),
            ],
            "AZURE_STORAGE_KEY is not set",
        ),
        (
            &[
                ("LEASE_PROVIDER", "azure"),
                ("LEASE_BUCKET", "locks"),
                ("AZURE_STORAGE_ACCOUNT", "acct"),
                ("AZURE_STORAGE_SAS_TOKEN", "sv=2023-11-03&sp=r"),
            ],
            "AZURE_STORAGE_SAS_TOKEN is invalid",
        ),
        (
            &[("LEASE_PROVIDER", "dropbox"), ("LEASE_BUCKET", "locks")],
            "LEASE_PROVIDER is invalid",
        ),
    ];
    for (vars, expected) in cases {
        let err = settings_from(vars).unwrap_err();
        assert!(err.starts_with(expected), "{err}");
    }
    let s = settings_from(&[
        ("LEASE_PROVIDER", "azure"),
        ("LEASE_BUCKET", "locks"),
        ("AZURE_STORAGE_ACCOUNT", "acct"),
        ("AZURE_STORAGE_KEY", "a2V5"),
    ])
    .unwrap();
    assert_eq!(s.provider, Provider::Azure);
    assert_eq!(
        s.endpoint.as_deref(),
        Some("https://acct.blob.core.windows.net")
    );
    assert!(!format!("{s:?}").contains("a2V5"));
}

/// A service SAS for the container (version 2020-12-06 and later string to
/// sign), as the portal or `az` would issue it.
fn container_sas(azurite: &Azurite, permissions: &str, expiry: &str) -> String {
    let version = "2023-11-03";
    let resource = format!("/blob/{}/{}", azurite.account(), AZURE_CONTAINER);
    // sp, st, se, canonicalizedresource, si, sip, spr, sv, sr, snapshot,
    // ses, rscc, rscd, rsce, rscl, rsct
    let string_to_sign = [
        permissions,
        "",
        expiry,
        &resource,
        "",
        "",
        "https,http",
        version,
        "c",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
    ]
    .join("\n");
    let key = STANDARD.decode(azurite.key()).expect("base64 key");
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("hmac key");
    mac.update(string_to_sign.as_bytes());
    let sig = STANDARD.encode(mac.finalize().into_bytes());
    let encode = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    char::from(b).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    format!(
        "sv={version}&spr=https%2Chttp&se={}&sr=c&sp={permissions}&sig={}",
        encode(expiry),
        encode(&sig)
    )
}

/// The `lease` CLI on Azure: `--provider azure` with the account key in the
/// environment; the probe, then acquire and a second holder's busy exit.
#[test]
fn the_cli_leases_on_azurite() {
    let azurite = azurite();
    let cli = |args: &[&str], holder: &str| {
        let mut cmd = std::process::Command::new(lease_bin());
        for var in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"] {
            cmd.env_remove(var);
        }
        cmd.env("LEASE_ENDPOINT", azurite.endpoint())
            .env("LEASE_PROBE_CACHE_DIR", "")
            .env("LEASE_BUCKET", AZURE_CONTAINER)
            .env("AZURE_STORAGE_KEY", azurite.key())
            .env("LEASE_HOLDER", holder)
            .args(["--provider", "azure", "--account", azurite.account()])
            .args(["--key", "cli/nightly", "--json"])
            .args(args);
        lease_json(&mut cmd)
    };
    let (code, json, out) = cli(&["probe"], "prober");
    assert_eq!(code, 0, "{out}");
    assert_eq!(json["protocols"]["cas"]["safe"], true, "{out}");
    assert_eq!(json["provider"], "azure", "{out}");
    let (code, json, out) = cli(&["acquire", "--ttl", "30s"], "a");
    assert_eq!(
        (code, json["lease"]["token"].as_u64()),
        (0, Some(1)),
        "{out}"
    );
    let (code, _, out) = cli(&["acquire", "--ttl", "30s"], "b");
    assert_eq!(code, 3, "busy: {out}");
    assert!(!out.contains(azurite.key()), "{out}");
}
