//! The S3 dialect against responses captured from a real S3 emulator, and
//! property tests that rendering and parsing are total.
//!
//! The files in `tests/data/moto/` were captured from moto 5.2.1
//! (`moto_server`) with `tests/data/moto/capture.py`: raw responses, headers
//! as sent (moto sends both `Server` and `server`), bodies verbatim.

mod support;
use lease_core::store::{ListEntry, PutCondition, ReplyKind};
use lease_core::time::StoreDate;
use lease_core::wire::{Dialect, RenderError};
use lease_core::wire::{S3Config, S3Dialect};
use lease_core::{Etag, StoreOp, StoreReply, UnixMillis};
use proptest::prelude::*;
use support::{moto, percent_decode};

/// The dialect the captures were made with: path-style on loopback.
fn dialect() -> S3Dialect {
    S3Dialect::new(S3Config::custom(
        "http://127.0.0.1:9000",
        "locks",
        "us-east-1",
    ))
    .unwrap()
}

fn parse(op: &StoreOp, name: &str) -> StoreReply {
    dialect().parse(op, &moto(name))
}

fn get(key: &str) -> StoreOp {
    StoreOp::Get { key: key.into() }
}

fn put(key: &str, condition: PutCondition) -> StoreOp {
    StoreOp::Put {
        key: key.into(),
        body: br#"{"x":2}"#.to_vec(),
        condition,
    }
}

fn delete(key: &str, if_match: Option<&str>) -> StoreOp {
    StoreOp::Delete {
        key: key.into(),
        if_match: if_match.map(Etag::new),
    }
}

fn list(prefix: &str) -> StoreOp {
    StoreOp::List {
        prefix: prefix.into(),
        continuation: None,
        max_keys: None,
    }
}

const LEASE_ETAG: &str = "ac3ef48caa08fa3ed5e025da69edc645";

#[test]
fn found_carries_etag_body_and_date() {
    let reply = parse(&get("leases/a"), "get_found");
    assert_eq!(
        reply.kind,
        ReplyKind::Found {
            etag: Etag::new(LEASE_ETAG),
            body: br#"{"x":1}"#.to_vec()
        }
    );
    // Sun, 22 Nov 2026 03:10:47 GMT
    assert_eq!(
        reply.date,
        Some(StoreDate::from_http_date(UnixMillis(1_795_317_047_000)))
    );
}

#[test]
fn every_capture_is_dated() {
    let dir = format!("{}/tests/data/moto", env!("CARGO_MANIFEST_DIR"));
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "http") {
            let name = path.file_stem().unwrap().to_str().unwrap();
            assert!(parse(&get("k"), name).date.is_some(), "{name}");
            seen += 1;
        }
    }
    assert_eq!(seen, 18);
}

#[test]
fn writes() {
    assert_eq!(
        parse(&put("leases/a", PutCondition::IfAbsent), "put_created").kind,
        ReplyKind::Written {
            etag: Some(Etag::new(LEASE_ETAG))
        }
    );
    for (op, name) in [
        (
            put("leases/a", PutCondition::IfAbsent),
            "put_if_none_match_exists",
        ),
        (
            put("leases/a", PutCondition::IfMatch(Etag::new("deadbeef"))),
            "put_if_match_stale",
        ),
        (
            delete("leases/a", Some("deadbeef")),
            "delete_if_match_stale",
        ),
    ] {
        assert_eq!(
            parse(&op, name).kind,
            ReplyKind::PreconditionFailed,
            "{name}"
        );
    }
    // moto, like AWS, answers If-Match on a missing key 404 NoSuchKey.
    let op = put("leases/zz", PutCondition::IfMatch(Etag::new("deadbeef")));
    assert_eq!(
        parse(&op, "put_if_match_missing_key").kind,
        ReplyKind::Missing
    );
}

#[test]
fn deletes_answer_204_whether_or_not_the_key_existed() {
    for name in ["delete_ok", "delete_missing"] {
        assert_eq!(
            parse(&delete("leases/a", None), name).kind,
            ReplyKind::Deleted
        );
    }
}

#[test]
fn missing_key_and_bucket() {
    assert_eq!(
        parse(&get("leases/a"), "get_no_such_key").kind,
        ReplyKind::Missing
    );
    assert_eq!(
        parse(&get("leases/a"), "get_no_such_bucket").kind,
        ReplyKind::NoSuchBucket
    );
    assert_eq!(
        parse(&list("leases/"), "list_no_such_bucket").kind,
        ReplyKind::NoSuchBucket
    );
}

#[test]
fn listings() {
    assert_eq!(
        parse(&list(""), "list_truncated").kind,
        ReplyKind::Listed {
            entries: vec![ListEntry {
                key: "leases/a".into(),
                etag: Some(Etag::new(LEASE_ETAG)),
                size: 7
            }],
            next: Some("bbdb7322586c16b943b16e372fabe4f9".into()),
        }
    );
    assert_eq!(
        parse(&list("none/"), "list_empty").kind,
        ReplyKind::Listed {
            entries: vec![],
            next: None
        }
    );
}

#[test]
fn odd_keys_round_trip_through_listing_and_render() {
    let ReplyKind::Listed { entries, next } = parse(&list("odd/"), "list_odd_keys").kind else {
        panic!("not a listing");
    };
    assert_eq!(next, None);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].key, "odd/a b&c+é<x>");
    // capture.py wrote that key with exactly this path.
    let request = dialect().render(&get(&entries[0].key)).unwrap();
    assert_eq!(request.uri().path(), "/locks/odd/a%20b%26c%2B%C3%A9%3Cx%3E");
}

#[test]
fn denials_keep_code_and_message() {
    for (name, code, message) in [
        support::DENIED_SIGNATURE_MISMATCH,
        (
            "denied_invalid_access_key",
            "InvalidAccessKeyId",
            "The AWS Access Key Id you provided does not exist in our records.",
        ),
        ("denied_access_denied", "AccessDenied", "Access Denied"),
    ] {
        assert_eq!(
            parse(&get("leases/a"), name).kind,
            ReplyKind::Denied {
                code: Some(code.into()),
                message: Some(message.into())
            },
            "{name}"
        );
    }
}

#[test]
fn html_error_page_has_no_code() {
    assert_eq!(
        parse(
            &put("leases/a", PutCondition::IfAbsent),
            "unsigned_html_500"
        )
        .kind,
        ReplyKind::ServerError {
            status: 500,
            code: None
        }
    );
}

fn any_op() -> impl Strategy<Value = StoreOp> {
    let key = "[a-z/]{1,12}";
    let etag = "[ -~]{0,12}".prop_map(|e| Etag::new(&e));
    let condition = prop_oneof![
        Just(PutCondition::IfAbsent),
        Just(PutCondition::None),
        etag.clone().prop_map(PutCondition::IfMatch),
    ];
    prop_oneof![
        key.prop_map(|key| StoreOp::Get { key }),
        (key, any::<Vec<u8>>(), condition).prop_map(|(key, body, condition)| StoreOp::Put {
            key,
            body,
            condition
        }),
        (key, proptest::option::of(etag))
            .prop_map(|(key, if_match)| StoreOp::Delete { key, if_match }),
        (
            key,
            proptest::option::of(".*"),
            proptest::option::of(any::<u32>())
        )
            .prop_map(|(prefix, continuation, max_keys)| StoreOp::List {
                prefix,
                continuation,
                max_keys
            }),
    ]
}

/// Bodies: raw bytes, or XML-looking soup built from the tokens the parser
/// looks for, so that generated cases reach past the first `<`.
fn any_body() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just("<?xml version=\"1.0\"?>".to_string()),
        Just("\u{feff}".to_string()),
        "</?(Error|Code|Message|ListBucketResult|Contents|Key|ETag|Size|IsTruncated|NextContinuationToken|s3:Code)>"
            .prop_map(String::from),
        "<(Contents|Prefix)/>".prop_map(String::from),
        "&(amp|lt|quot|nbsp|#[0-9]{1,8}|#x[0-9a-fA-F]{1,7});".prop_map(String::from),
        Just("<![CDATA[x]]>".to_string()),
        Just("true".to_string()),
        "[0-9]{1,25}".prop_map(String::from),
        ".{0,8}".prop_map(String::from),
    ];
    prop_oneof![
        any::<Vec<u8>>(),
        proptest::collection::vec(token, 0..40).prop_map(|t| t.concat().into_bytes()),
    ]
}

fn any_headers() -> impl Strategy<Value = Vec<(&'static str, Vec<u8>)>> {
    let name = prop_oneof![
        Just("etag"),
        Just("date"),
        Just("retry-after"),
        Just("content-type"),
        Just("x-amz-request-id"),
    ];
    let value = prop_oneof![
        any::<Vec<u8>>(),
        Just(b"Sun, 22 Nov 2026 03:10:47 GMT".to_vec()),
        "[0-9]{1,30}".prop_map(String::into_bytes),
        "\"[ -~]{0,10}\"".prop_map(String::into_bytes),
    ];
    proptest::collection::vec((name, value), 0..6)
}

proptest! {
    #[test]
    fn parse_is_total(
        op in any_op(),
        status in 100u16..600,
        headers in any_headers(),
        body in any_body(),
    ) {
        let mut response = http::Response::new(body);
        *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
        for (name, value) in headers {
            // Bytes no HTTP parser would deliver as a header value are skipped.
            if let Ok(value) = http::HeaderValue::from_bytes(&value) {
                response.headers_mut().append(name, value);
            }
        }
        let reply = dialect().parse(&op, &response);
        if reply.date.is_some() {
            prop_assert!(response.headers().contains_key("date"));
        }
        // Success classes only for the matching verb; parse never invents
        // a transport failure.
        let consistent = match &reply.kind {
            ReplyKind::Found { .. } => status == 200 && op.verb() == "GET",
            ReplyKind::Listed { .. } => status == 200 && op.verb() == "LIST",
            ReplyKind::Written { .. } => status == 200 && op.verb() == "PUT",
            ReplyKind::Deleted => op.verb() == "DELETE",
            ReplyKind::Transport { .. } => false,
            _ => true,
        };
        prop_assert!(consistent, "{:?} for {} {}", reply.kind, op.verb(), status);
    }

    #[test]
    fn rendered_paths_decode_to_the_key(key in any::<String>()) {
        match dialect().render(&get(&key)) {
            Ok(request) => {
                let path = request.uri().path().strip_prefix("/locks/").unwrap();
                prop_assert_eq!(percent_decode(path), key.into_bytes());
            }
            Err(RenderError::InvalidKey { key: excerpt, .. }) => {
                prop_assert!(key.starts_with(&excerpt));
            }
            Err(other) => prop_assert!(false, "{other:?}"),
        }
    }
}
