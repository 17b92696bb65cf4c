//! One conditional PutObject (`If-None-Match: *`) per invocation, with the
//! SDK's defaults: the yardstick for lease-lambda's size and cold start.

use aws_sdk_s3::primitives::ByteStream;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::{json, Value};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let config = aws_config::load_from_env().await;
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    );
    let bucket = std::env::var("LEASE_BUCKET")?;
    let s3 = &s3;
    let bucket = &bucket;
    lambda_runtime::run(service_fn(|_: LambdaEvent<Value>| async move {
        let put = s3
            .put_object()
            .bucket(bucket)
            .key("sdk-baseline/lease.json")
            .if_none_match("*")
            .body(ByteStream::from_static(b"{}"))
            .send()
            .await;
        Ok::<_, Error>(match put {
            Ok(out) => json!({"etag": out.e_tag()}),
            Err(e) => json!({"error": e.to_string()}),
        })
    }))
    .await
}
