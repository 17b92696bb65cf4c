//! The GCS dialect: documented in the layer's docs (`wire/mod.rs`, "The GCS dialect").

use super::s3::{Addressing, EtagQuoting, S3Config, S3Dialect, Versions};
use super::{Dialect, RenderError};
use crate::store::{StoreOp, StoreReply};
use std::time::Duration;

/// The XML API endpoint.
pub const ENDPOINT: &str = "https://storage.googleapis.com";

/// The region SigV4 signs with for GCS (any value is accepted; `auto` is
/// what Google documents for HMAC keys).
pub const SIGNING_REGION: &str = "auto";

/// The SigV4 service name GCS accepts in interoperability mode.
#[cfg(feature = "sigv4")]
pub const SIGNING_SERVICE: &str = "s3";

/// GCS allows about one write per second to one object name.
pub const GCS_MIN_WRITE_INTERVAL: Duration = Duration::from_secs(1);

/// Where a GCS bucket is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GcsConfig {
    /// XML API endpoint without the bucket (`https://storage.googleapis.com`, or an emulator's
    /// `http://127.0.0.1:PORT`).
    pub endpoint: String,
    /// Bucket name (GCS rules: `a-z 0-9 . - _`).
    pub bucket: String,
    /// Path-style (`endpoint/bucket/key`, the default: bucket names with
    /// dots work over https) or virtual-hosted (`bucket.endpoint/key`).
    pub addressing: Addressing,
    /// `Content-Type` of every PUT.
    pub content_type: String,
}

impl GcsConfig {
    /// `bucket` on Google Cloud Storage, path-style.
    pub fn new(bucket: impl Into<String>) -> Self {
        GcsConfig::custom(ENDPOINT, bucket)
    }

    /// `bucket` behind another endpoint (an emulator, a private endpoint).
    pub fn custom(endpoint: impl Into<String>, bucket: impl Into<String>) -> Self {
        GcsConfig {
            endpoint: endpoint.into(),
            bucket: bucket.into(),
            addressing: Addressing::PathStyle,
            content_type: "application/json".to_string(),
        }
    }

    /// Checks that the settings form valid request URLs and headers.
    pub fn validate(&self) -> Result<(), RenderError> {
        GcsDialect::new(self.clone()).map(drop)
    }

    fn s3_config(&self) -> S3Config {
        S3Config {
            endpoint: self.endpoint.clone(),
            bucket: self.bucket.clone(),
            region: SIGNING_REGION.to_string(),
            addressing: self.addressing,
            etag_quoting: EtagQuoting::Quoted,
            content_type: self.content_type.clone(),
            // The GCS dialect spaces writes itself (`GCS_MIN_WRITE_INTERVAL`).
            min_write_interval: Duration::ZERO,
        }
    }
}

/// Renders [`StoreOp`]s as GCS XML API requests and classifies its replies.
#[derive(Clone, Debug)]
pub struct GcsDialect {
    config: GcsConfig,
    inner: S3Dialect,
}

impl GcsDialect {
    /// A dialect for `config`.
    pub fn new(config: GcsConfig) -> Result<Self, RenderError> {
        let inner = S3Dialect::with_versions(config.s3_config(), Versions::Generations)?;
        Ok(GcsDialect { config, inner })
    }

    /// The configuration this dialect was built from.
    pub fn config(&self) -> &GcsConfig {
        &self.config
    }
}

impl Dialect for GcsDialect {
    fn min_write_interval(&self) -> core::time::Duration {
        GCS_MIN_WRITE_INTERVAL
    }

    fn render(&self, op: &StoreOp) -> Result<http::Request<Vec<u8>>, RenderError> {
        self.inner.render(op)
    }

    fn parse(&self, op: &StoreOp, response: &http::Response<Vec<u8>>) -> StoreReply {
        self.inner.parse(op, response)
    }
}

#[cfg(test)]
mod tests {
    use super::super::text::testing::{header, response};
    use super::*;
    use crate::store::{Etag, ListEntry, PutCondition, ReplyKind};

    fn dialect() -> GcsDialect {
        GcsDialect::new(GcsConfig::new("lease_bucket.example")).unwrap()
    }

    fn put(condition: PutCondition) -> StoreOp {
        StoreOp::Put {
            key: "locks/nightly".into(),
            body: b"{}".to_vec(),
            condition,
        }
    }

    #[test]
    fn urls_are_path_style_on_storage_googleapis_com() {
        let r = dialect()
            .render(&StoreOp::Get {
                key: "locks/a b".into(),
            })
            .unwrap();
        assert_eq!(
            r.uri(),
            "https://storage.googleapis.com/lease_bucket.example/locks/a%20b"
        );
        assert_eq!(header(&r, "host"), Some("storage.googleapis.com"));
    }

    #[test]
    fn conditions_are_generation_matches() {
        let d = dialect();
        let create = d.render(&put(PutCondition::IfAbsent)).unwrap();
        assert_eq!(header(&create, "x-goog-if-generation-match"), Some("0"));
        assert_eq!(header(&create, "if-none-match"), None);

        let update = d
            .render(&put(PutCondition::IfMatch(Etag::new("1700000000123456"))))
            .unwrap();
        assert_eq!(
            header(&update, "x-goog-if-generation-match"),
            Some("1700000000123456")
        );
        assert_eq!(header(&update, "if-match"), None);

        let plain = d.render(&put(PutCondition::None)).unwrap();
        assert_eq!(header(&plain, "x-goog-if-generation-match"), None);

        let delete = d
            .render(&StoreOp::Delete {
                key: "k".into(),
                if_match: Some(Etag::new("42")),
            })
            .unwrap();
        assert_eq!(header(&delete, "x-goog-if-generation-match"), Some("42"));
    }

    #[test]
    fn an_etag_is_not_a_generation() {
        // An S3-style etag handed to the GCS dialect (a record read through
        // another dialect) is refused before anything is sent.
        let err = dialect()
            .render(&put(PutCondition::IfMatch(Etag::new(
                "\"9b2cf535f27731c974343645a3985328\"",
            ))))
            .unwrap_err();
        assert!(err.to_string().contains("generation"), "{err}");
    }

    #[test]
    fn versions_come_from_x_goog_generation() {
        // Headers as the XML API documents them for GET Object.
        let d = dialect();
        let get = StoreOp::Get { key: "k".into() };
        let found = d.parse(
            &get,
            &response(
                200,
                &[
                    ("ETag", "\"5f7e9b1fbb2d2a8e3d8a51dd1b0a1fa5\""),
                    ("x-goog-generation", "1700000000123456"),
                    ("x-goog-metageneration", "1"),
                    ("Date", "Sun, 22 Nov 2026 10:00:00 GMT"),
                ],
                "{}",
            ),
        );
        assert_eq!(
            found.kind,
            ReplyKind::Found {
                etag: Etag::new("1700000000123456"),
                body: b"{}".to_vec()
            }
        );
        assert!(found.date.is_some());

        let written = d.parse(
            &put(PutCondition::IfAbsent),
            &response(200, &[("x-goog-generation", "1700000000999999")], ""),
        );
        assert_eq!(
            written.kind,
            ReplyKind::Written {
                etag: Some(Etag::new("1700000000999999"))
            }
        );

        let no_generation = d.parse(&get, &response(200, &[("ETag", "\"abc\"")], "{}"));
        assert!(matches!(
            no_generation.kind,
            ReplyKind::Unexpected { code: Some(ref c), .. } if c == "MissingGeneration"
        ));
    }

    #[test]
    fn error_replies() {
        let d = dialect();
        let kind = |op: &StoreOp, status: u16, code: &str| {
            let body = format!(
                "<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>\
                 <Message>m</Message></Error>"
            );
            d.parse(op, &response(status, &[], &body)).kind
        };
        let create = put(PutCondition::IfAbsent);
        assert_eq!(
            kind(&create, 412, "PreconditionFailed"),
            ReplyKind::PreconditionFailed
        );
        assert_eq!(
            kind(&StoreOp::Get { key: "k".into() }, 404, "NoSuchKey"),
            ReplyKind::Missing
        );
        assert_eq!(kind(&create, 404, "NoSuchBucket"), ReplyKind::NoSuchBucket);
        assert!(matches!(
            kind(&create, 429, "SlowDown"),
            ReplyKind::Throttled { .. }
        ));
        assert!(matches!(
            kind(&create, 403, "SignatureDoesNotMatch"),
            ReplyKind::Denied { code: Some(ref c), .. } if c == "SignatureDoesNotMatch"
        ));
        assert!(matches!(
            kind(&create, 500, "InternalError"),
            ReplyKind::ServerError { status: 500, .. }
        ));
    }

    #[test]
    fn listing_entries_carry_generations() {
        // The XML API's ListObjectsV2 answer, with its GCS extensions.
        let body = r#"<?xml version='1.0' encoding='UTF-8'?>
<ListBucketResult xmlns="http://doc.s3.amazonaws.com/2006-03-01">
  <Name>lease_bucket.example</Name><Prefix>locks/</Prefix><KeyCount>2</KeyCount>
  <MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated>
  <NextContinuationToken>CgVsb2Nrcy9i</NextContinuationToken>
  <Contents><Key>locks/a</Key><Generation>1700000000000001</Generation>
    <MetaGeneration>1</MetaGeneration><LastModified>2026-11-22T10:00:00.000Z</LastModified>
    <ETag>"e1"</ETag><Size>120</Size></Contents>
  <Contents><Key>locks/b</Key><Generation>1700000000000002</Generation>
    <MetaGeneration>1</MetaGeneration><ETag>"e2"</ETag><Size>7</Size></Contents>
</ListBucketResult>"#;
        let op = StoreOp::List {
            prefix: "locks/".into(),
            continuation: None,
            max_keys: None,
        };
        let request = dialect().render(&op).unwrap();
        assert_eq!(
            request.uri(),
            "https://storage.googleapis.com/lease_bucket.example?list-type=2&prefix=locks%2F"
        );
        let listed = dialect().parse(&op, &response(200, &[], body)).kind;
        assert_eq!(
            listed,
            ReplyKind::Listed {
                entries: vec![
                    ListEntry {
                        key: "locks/a".into(),
                        etag: Some(Etag::new("1700000000000001")),
                        size: 120
                    },
                    ListEntry {
                        key: "locks/b".into(),
                        etag: Some(Etag::new("1700000000000002")),
                        size: 7
                    },
                ],
                next: Some("CgVsb2Nrcy9i".into())
            }
        );
    }

    #[test]
    fn bucket_rules_are_gcs_rules() {
        assert!(GcsConfig::new("under_score").validate().is_ok());
        assert!(GcsConfig::new("Upper").validate().is_err());
        assert!(GcsConfig::new("ab").validate().is_err());
        assert!(GcsConfig::new("-dash").validate().is_err());
        assert!(GcsConfig::custom("ftp://x", "bucket").validate().is_err());
    }
}
