//! Bucket policies: documented in the layer's docs (`wire/mod.rs`, "Bucket policies").

use serde_json::{json, Value};

/// The statement `lease policy` prints: deny `s3:PutObject` under
/// `prefix` in `bucket` when the request has neither condition. Merge it
/// into the bucket's policy (a bucket has one); `prefix` is matched as a
/// prefix (`locks/` covers every lease under it, `locks/nightly` that
/// lease, its epochs and the probe's scratch objects).
pub fn s3_conditional_writes_only(bucket: &str, prefix: &str) -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "LeaseWritesMustBeConditional",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:PutObject",
            "Resource": format!("arn:aws:s3:::{bucket}/{prefix}*"),
            "Condition": {
                "Null": {
                    "s3:if-none-match": "true",
                    "s3:if-match": "true"
                }
            }
        }]
    })
}

/// [`s3_conditional_writes_only`] with a second statement: deny
/// `s3:DeleteObject` under `prefix` when the request has no `If-Match`
/// (`s3:if-match`; AWS S3 honours conditional deletes on general purpose
/// buckets). For cas and mutex leases only (see the module docs).
pub fn s3_conditional_deletes_only(bucket: &str, prefix: &str) -> Value {
    let mut policy = s3_conditional_writes_only(bucket, prefix);
    let deletes = json!({
        "Sid": "LeaseDeletesMustBeConditional",
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:DeleteObject",
        "Resource": format!("arn:aws:s3:::{bucket}/{prefix}*"),
        "Condition": {"Null": {"s3:if-match": "true"}}
    });
    if let Some(statements) = policy["Statement"].as_array_mut() {
        statements.push(deletes);
    }
    policy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statement_denies_puts_with_neither_condition_under_the_prefix() {
        let p = s3_conditional_writes_only("locks", "jobs/");
        let s = &p["Statement"][0];
        assert_eq!(s["Effect"], "Deny");
        assert_eq!(s["Action"], "s3:PutObject");
        assert_eq!(s["Resource"], "arn:aws:s3:::locks/jobs/*");
        // `Null` with two keys: both absent (the keys are ANDed).
        assert_eq!(s["Condition"]["Null"]["s3:if-none-match"], "true");
        assert_eq!(s["Condition"]["Null"]["s3:if-match"], "true");
    }

    #[test]
    fn with_deletes_a_second_statement_denies_deletes_without_if_match() {
        let p = s3_conditional_deletes_only("locks", "jobs/");
        assert_eq!(
            p["Statement"][0],
            s3_conditional_writes_only("locks", "jobs/")["Statement"][0]
        );
        let d = &p["Statement"][1];
        assert_eq!(d["Effect"], "Deny");
        assert_eq!(d["Action"], "s3:DeleteObject");
        assert_eq!(d["Resource"], "arn:aws:s3:::locks/jobs/*");
        assert_eq!(d["Condition"]["Null"], json!({"s3:if-match": "true"}));
    }
}
