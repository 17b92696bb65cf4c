//! A bucket policy for the lease prefix (`lease policy`): AWS S3 can refuse
//! a PUT that carries neither `If-None-Match` nor `If-Match` (the condition
//! keys `s3:if-none-match` and `s3:if-match`), so a misconfigured client,
//! or a script with a plain `aws s3 cp`, cannot overwrite a lease.
//!
//! Only writes are covered: the epochs protocol deletes the epochs it
//! superseded, and the capability probe its scratch objects, without
//! `If-Match`, so a policy that refused unconditional deletes would leave
//! those behind. Other stores have no such policy (R2, GCS, Azure Blob):
//! `docs/operations.md` says what protects the prefix there.

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
}
