//! Provider presets: documented in the layer's docs (`wire/mod.rs`, "Provider presets").

use crate::store::{StoreOp, StoreReply};
#[cfg(feature = "azure")]
use crate::wire::azure::AzureDialect;
use crate::wire::gcs::GcsDialect;
use crate::wire::s3::{EtagQuoting, S3Dialect};
use crate::wire::{Dialect, RenderError};
use core::fmt;
use std::time::Duration;

/// An object store family with a preset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Provider {
    /// Amazon S3.
    Aws,
    /// Cloudflare R2 through its S3 API.
    R2,
    /// MinIO.
    Minio,
    /// Tigris.
    Tigris,
    /// Google Cloud Storage, XML API with an HMAC key.
    Gcs,
    /// Azure Blob Storage (and Azurite).
    Azure,
    /// Any other S3-compatible server (path-style, quoted etags): run the
    /// probe before trusting it.
    #[default]
    Generic,
}

/// Which HTTP dialect a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DialectKind {
    /// [`wire::s3`](crate::wire#the-s3-dialect).
    S3,
    /// [`wire::gcs`](crate::wire#the-gcs-dialect).
    Gcs,
    /// `crate::wire::azure` (lease-core's feature `azure`).
    Azure,
}

/// A provider's small table of facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preset {
    /// The provider.
    pub provider: Provider,
    /// The dialect it speaks.
    pub dialect: DialectKind,
    /// Endpoint shape; `{region}`, `{account}` are filled from settings,
    /// empty when the endpoint must be given.
    pub endpoint: &'static str,
    /// Path-style addressing by default (S3 dialects).
    pub path_style: bool,
    /// Signing region when none is set (`None`: the region must be given).
    pub region: Option<&'static str>,
    /// How `If-Match` etags are written.
    pub etag_quoting: EtagQuoting,
    /// Shortest time between two writes to one object.
    pub min_write_interval: Duration,
    /// Known quirks, for `docs/protocols.md` and `lease providers`.
    pub quirks: &'static str,
}

impl Provider {
    /// Every provider, in documentation order.
    pub const ALL: [Provider; 7] = [
        Provider::Aws,
        Provider::R2,
        Provider::Minio,
        Provider::Tigris,
        Provider::Gcs,
        Provider::Azure,
        Provider::Generic,
    ];

    /// The setting's spelling (`aws`, `r2`, `minio`, `tigris`, `gcs`,
    /// `azure`, `generic`).
    pub fn name(self) -> &'static str {
        match self {
            Provider::Aws => "aws",
            Provider::R2 => "r2",
            Provider::Minio => "minio",
            Provider::Tigris => "tigris",
            Provider::Gcs => "gcs",
            Provider::Azure => "azure",
            Provider::Generic => "generic",
        }
    }

    /// Parses a setting's value (case-insensitive; `s3` means `aws`).
    pub fn parse(s: &str) -> Option<Provider> {
        let s = s.trim().to_ascii_lowercase();
        match s.as_str() {
            "s3" => Some(Provider::Aws),
            _ => Provider::ALL.into_iter().find(|p| p.name() == s),
        }
    }

    /// The preset.
    pub fn preset(self) -> Preset {
        let s3 = Preset {
            provider: self,
            dialect: DialectKind::S3,
            endpoint: "",
            path_style: true,
            region: Some("us-east-1"),
            etag_quoting: EtagQuoting::Quoted,
            min_write_interval: Duration::ZERO,
            quirks: "",
        };
        match self {
            Provider::Aws => Preset {
                endpoint: "https://s3.{region}.amazonaws.com",
                path_style: false,
                region: None,
                quirks: "about 3,500 PUT/s per prefix; a 409 ConditionalRequestConflict under \
                         concurrent conditional writes is retried after a re-read",
                ..s3
            },
            Provider::R2 => Preset {
                endpoint: "https://{account}.r2.cloudflarestorage.com",
                region: Some("auto"),
                min_write_interval: crate::wire::s3::R2_MIN_WRITE_INTERVAL,
                quirks: "region `auto`; about one write per second per object (429 beyond), so \
                         writes to one object are spaced 1 s apart; etag formats differ from \
                         S3's (etags are compared with quotes normalised); the Workers binding \
                         refuses a conditional DELETE (the probe then refuses `mutex`)",
                ..s3
            },
            Provider::Minio => Preset {
                quirks: "endpoint required; older releases created the object on `If-Match` to \
                         a missing key (MinIO issue 21526): run the probe",
                ..s3
            },
            Provider::Tigris => Preset {
                endpoint: "https://t3.storage.dev",
                region: Some("auto"),
                quirks: "region `auto`; not tested here: run the probe against the bucket \
                         before relying on it",
                ..s3
            },
            Provider::Gcs => Preset {
                dialect: DialectKind::Gcs,
                endpoint: crate::wire::gcs::ENDPOINT,
                region: Some(crate::wire::gcs::SIGNING_REGION),
                min_write_interval: crate::wire::gcs::GCS_MIN_WRITE_INTERVAL,
                quirks: "versions are generations (x-goog-if-generation-match); about one write \
                         per second per object, so writes to one object are spaced 1 s apart; \
                         HMAC key with SigV4",
                ..s3
            },
            Provider::Azure => Preset {
                dialect: DialectKind::Azure,
                endpoint: "https://{account}.blob.core.windows.net",
                path_style: true,
                region: None,
                quirks: "`If-None-Match: *` on an existing blob answers 409 BlobAlreadyExists \
                         (read as a failed precondition); SharedKey or SAS authentication; blob \
                         names ending in '.' or '/' are refused (Azure would rewrite them)",
                ..s3
            },
            Provider::Generic => Preset {
                quirks: "endpoint required; nothing is assumed: run the probe (some servers \
                         ignore the conditional headers)",
                ..s3
            },
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One of the three dialects, chosen at run time from settings.
#[derive(Clone, Debug)]
pub enum AnyDialect {
    /// S3 and S3-compatible stores.
    S3(S3Dialect),
    /// Google Cloud Storage (XML API).
    Gcs(GcsDialect),
    /// Azure Blob Storage (lease-core's feature `azure`).
    #[cfg(feature = "azure")]
    Azure(AzureDialect),
}

impl Dialect for AnyDialect {
    fn min_write_interval(&self) -> Duration {
        match self {
            AnyDialect::S3(d) => d.min_write_interval(),
            AnyDialect::Gcs(d) => d.min_write_interval(),
            #[cfg(feature = "azure")]
            AnyDialect::Azure(d) => d.min_write_interval(),
        }
    }

    fn render(&self, op: &StoreOp) -> Result<http::Request<Vec<u8>>, RenderError> {
        match self {
            AnyDialect::S3(d) => d.render(op),
            AnyDialect::Gcs(d) => d.render(op),
            #[cfg(feature = "azure")]
            AnyDialect::Azure(d) => d.render(op),
        }
    }

    fn parse(&self, op: &StoreOp, response: &http::Response<Vec<u8>>) -> StoreReply {
        match self {
            AnyDialect::S3(d) => d.parse(op, response),
            AnyDialect::Gcs(d) => d.parse(op, response),
            #[cfg(feature = "azure")]
            AnyDialect::Azure(d) => d.parse(op, response),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in Provider::ALL {
            assert_eq!(Provider::parse(p.name()), Some(p));
            assert_eq!(p.preset().provider, p);
            assert!(!p.preset().quirks.is_empty(), "{p}");
        }
        assert_eq!(Provider::parse(" GCS "), Some(Provider::Gcs));
        assert_eq!(Provider::parse("s3"), Some(Provider::Aws));
        assert_eq!(Provider::parse("dropbox"), None);
    }

    #[test]
    fn gcs_and_r2_space_writes() {
        for p in Provider::ALL {
            let spaced = !p.preset().min_write_interval.is_zero();
            assert_eq!(spaced, matches!(p, Provider::Gcs | Provider::R2), "{p}");
        }
    }
}
