//! One conditional PUT (`If-None-Match: *`) per invocation, signed with
//! `aws-sigv4` and sent with reqwest: what lease-lambda would weigh if it
//! signed with `aws-sigv4` instead of lease-core's signer.

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use aws_sigv4::sign::v4::SigningParams;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::{json, Value};
use std::time::{Duration, SystemTime};

struct Env {
    url: String,
    region: String,
    credentials: Credentials,
    client: reqwest::Client,
}

async fn put(env: &Env) -> Result<Value, Error> {
    let body = b"{}".to_vec();
    let headers = [("if-none-match", "*"), ("content-type", "application/json")];
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    let identity = env.credentials.clone().into();
    let params = SigningParams::builder()
        .identity(&identity)
        .region(&env.region)
        .name("s3")
        .time(SystemTime::now())
        .settings(settings)
        .build()?
        .into();
    let signable = SignableRequest::new(
        "PUT",
        &env.url,
        headers.iter().copied(),
        SignableBody::Bytes(&body),
    )?;
    let (instructions, _) = sign(signable, &params)?.into_parts();
    let mut request = http::Request::builder().method("PUT").uri(&env.url);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let mut request = request.body(body)?;
    instructions.apply_to_request_http1x(&mut request);
    let response = env.client.execute(request.try_into()?).await?;
    Ok(json!({"status": response.status().as_u16()}))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let var = |name: &str| std::env::var(name).map_err(|_| format!("{name} is not set"));
    let endpoint = var("LEASE_ENDPOINT")?;
    let env = Env {
        url: format!(
            "{}/{}/sigv4-baseline/lease.json",
            endpoint.trim_end_matches('/'),
            var("LEASE_BUCKET")?
        ),
        region: var("AWS_REGION")?,
        credentials: Credentials::new(
            var("AWS_ACCESS_KEY_ID")?,
            var("AWS_SECRET_ACCESS_KEY")?,
            std::env::var("AWS_SESSION_TOKEN").ok(),
            None,
            "environment",
        ),
        client: {
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(2))
                .timeout(Duration::from_secs(5))
                .build()?
        },
    };
    let env = &env;
    lambda_runtime::run(service_fn(
        |_: LambdaEvent<Value>| async move { put(env).await },
    ))
    .await
}
