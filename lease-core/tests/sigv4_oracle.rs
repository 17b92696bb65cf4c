//! Our SigV4 signer against the reference implementation, `aws-sigv4`, for
//! arbitrary requests as the S3 dialect renders them: keys with any
//! characters, every condition, listings with odd prefixes, session tokens,
//! regions and times. Both must produce the same signed headers.
#![cfg(feature = "sigv4")]

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use aws_sigv4::sign::v4::SigningParams;
use lease_core::store::PutCondition;
use lease_core::wire::SigV4Signer;
use lease_core::wire::{Dialect, Signer};
use lease_core::wire::{S3Config, S3Dialect};
use lease_core::{Etag, StoreOp, UnixMillis};
use proptest::prelude::*;
use std::time::{Duration, UNIX_EPOCH};

/// The signed headers `aws-sigv4` produces for `request` with S3 settings.
fn reference(
    request: &http::Request<Vec<u8>>,
    (akid, secret, token): (&str, &str, Option<&str>),
    region: &str,
    at: UnixMillis,
) -> Vec<(String, String)> {
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    let identity = Credentials::new(akid, secret, token.map(str::to_string), None, "oracle").into();
    let params = SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("s3")
        .time(UNIX_EPOCH + Duration::from_millis(at.0))
        .settings(settings)
        .build()
        .expect("valid params")
        .into();
    let headers = request
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str(), v.to_str().expect("ascii")));
    let signable = SignableRequest::new(
        request.method().as_str(),
        request.uri().to_string(),
        headers,
        SignableBody::Bytes(request.body()),
    )
    .expect("signable");
    let (instructions, _) = sign(signable, &params).expect("signs").into_parts();
    let (headers, _) = instructions.into_parts();
    let mut out: Vec<_> = headers
        .iter()
        .map(|h| (h.name().to_string(), h.value().to_string()))
        .collect();
    out.sort();
    out
}

fn ours(
    request: &http::Request<Vec<u8>>,
    signer: &SigV4Signer,
    at: UnixMillis,
) -> Vec<(String, String)> {
    let mut signed = request.clone();
    signer.sign(&mut signed, at).expect("signs");
    let mut out: Vec<_> = [
        "authorization",
        "x-amz-date",
        "x-amz-content-sha256",
        "x-amz-security-token",
    ]
    .iter()
    .filter_map(|n| {
        signed
            .headers()
            .get(*n)
            .map(|v| (n.to_string(), v.to_str().unwrap_or("").to_string()))
    })
    .collect();
    out.sort();
    out
}

fn op_strategy() -> impl Strategy<Value = StoreOp> {
    let key = "[a-zA-Z0-9 /+&=?%#é~*()!'_.:-]{1,40}".prop_filter("renderable", |k| {
        !k.starts_with('/')
            && !k
                .split('/')
                .any(|seg| seg == "." || seg == ".." || seg.is_empty())
    });
    let condition = prop_oneof![
        Just(PutCondition::IfAbsent),
        "[a-f0-9]{32}".prop_map(|e| PutCondition::IfMatch(Etag::new(&e))),
        Just(PutCondition::None),
    ];
    prop_oneof![
        key.clone().prop_map(|key| StoreOp::Get { key }),
        (
            key.clone(),
            proptest::collection::vec(any::<u8>(), 0..300),
            condition
        )
            .prop_map(|(key, body, condition)| StoreOp::Put {
                key,
                body,
                condition
            }),
        (key.clone(), proptest::option::of("[a-f0-9]{8}")).prop_map(|(key, e)| StoreOp::Delete {
            key,
            if_match: e.map(|e| Etag::new(&e))
        }),
        (
            key,
            proptest::option::of("[a-zA-Z0-9+/=]{1,30}"),
            proptest::option::of(1u32..2000)
        )
            .prop_map(|(prefix, continuation, max_keys)| StoreOp::List {
                prefix,
                continuation,
                max_keys,
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn same_signature_as_aws_sigv4(
        op in op_strategy(),
        virtual_hosted in any::<bool>(),
        region in prop_oneof![Just("us-east-1"), Just("eu-west-3"), Just("auto")],
        token in proptest::option::of("[A-Za-z0-9+/=]{20,60}"),
        secret in "[A-Za-z0-9+/]{40}",
        at in 0u64..4_102_444_800_000,
    ) {
        let config = if virtual_hosted {
            S3Config::aws(region, "lease-bucket")
        } else {
            S3Config::custom("http://127.0.0.1:9000", "lease-bucket", region)
        };
        let Ok(dialect) = S3Dialect::new(config) else { return Ok(()) };
        let Ok(request) = dialect.render(&op) else { return Ok(()) };
        let at = UnixMillis(at);
        let signer = SigV4Signer::new("AKIDEXAMPLE", secret.clone(), token.clone(), region);
        let expected = reference(&request, ("AKIDEXAMPLE", &secret, token.as_deref()), region, at);
        prop_assert_eq!(ours(&request, &signer, at), expected, "{:?}", op);
    }
}
