//! HTTP dialects: pure translations between [`StoreOp`](crate::store::StoreOp)/[`StoreReply`](crate::store::StoreReply) and
//! `http` requests and responses, one per provider family ([`S3Dialect`],
//! [`GcsDialect`], `AzureDialect` with the feature `azure`), chosen by
//! [`Provider`] and its presets.
//!
//! A dialect never performs I/O. [`HttpStore`] combines a dialect, an
//! optional [`Signer`] and a transport. The signers are here too
//! (`SigV4Signer` with the feature `sigv4`, [`BearerSigner`], Azure's with
//! `azure`), and the IAM policies that allow only conditional writes
//! ([`s3_conditional_writes_only`]).
//!
//! # The S3 dialect
//!
//! The S3 dialect: AWS S3 (path-style and virtual-hosted), Cloudflare R2,
//! MinIO, Tigris, moto and other servers speaking the S3 REST API.
//!
//! ## Requests
//!
//! | op | request |
//! |---|---|
//! | `Get` | `GET /{key}` |
//! | `GetIfNoneMatch` | `GET /{key}` with `If-None-Match: <etag>` (GCS: without, as generations are not etags) |
//! | `Put` | `PUT /{key}` with `Content-Type`, `Content-Length` and `If-None-Match: *` ([`PutCondition::IfAbsent`](crate::store::PutCondition::IfAbsent)) or `If-Match: <etag>` ([`PutCondition::IfMatch`](crate::store::PutCondition::IfMatch)) |
//! | `Delete` | `DELETE /{key}`, with `If-Match: <etag>` when given |
//! | `List` | ListObjectsV2: `GET /?list-type=2&prefix=..&continuation-token=..&max-keys=..` |
//!
//! Path-style addressing puts `/{bucket}` in front of every path;
//! virtual-hosted addressing puts `{bucket}.` in front of the host. Keys are
//! percent-encoded byte by byte (everything but `A-Z a-z 0-9 - . _ ~`, and
//! `/` between segments), which is also the form SigV4 signs, so a signed
//! request is sent exactly as it was signed. Every request carries an explicit
//! `host` header because SigV4 signs it. Payload hashes
//! (`x-amz-content-sha256`) are the signer's business, not the dialect's.
//!
//! ## Replies
//!
//! | status | reply |
//! |---|---|
//! | 200 to `Get` | [`Found`](crate::store::ReplyKind::Found) (no `ETag` header: `Unexpected`, code `MissingETag`) |
//! | 304 to `GetIfNoneMatch` | [`NotModified`](crate::store::ReplyKind::NotModified) |
//! | 200 to `Put` | [`Written`](crate::store::ReplyKind::Written) |
//! | 200, 204 to `Delete` | [`Deleted`](crate::store::ReplyKind::Deleted) |
//! | 200 to `List` | [`Listed`](crate::store::ReplyKind::Listed) (bad XML: `Unexpected`, code `MalformedListing`) |
//! | 404 | `NoSuchBucket` for code `NoSuchBucket`, else [`Missing`](crate::store::ReplyKind::Missing), for every op (S3 answers a `PUT` with `If-Match` on a missing key 404 `NoSuchKey`) |
//! | 412 | [`PreconditionFailed`](crate::store::ReplyKind::PreconditionFailed) |
//! | 409 | `Conflict` for codes `ConditionalRequestConflict`, `OperationAborted`; else `Unexpected` |
//! | 429, 503 | [`Throttled`](crate::store::ReplyKind::Throttled), with `Retry-After` |
//! | other 5xx | [`ServerError`](crate::store::ReplyKind::ServerError) |
//! | 401, 403 | [`Denied`](crate::store::ReplyKind::Denied) |
//! | 400 `ExpiredToken`, `InvalidToken`, `AuthorizationHeaderMalformed` | `Denied` (AWS sends these as 400) |
//! | 400 `NotImplemented`, `InvalidArgument`, `InvalidRequest` to a conditional write | [`Unsupported`](crate::store::ReplyKind::Unsupported) |
//! | 501 | `Unsupported` |
//! | anything else | [`Unexpected`](crate::store::ReplyKind::Unexpected) |
//!
//! Every 503 counts as throttling, not only `SlowDown`: S3 documents that a
//! 503 `SlowDown` request was not applied, and a 503 from a gateway in front
//! of the store means the request never reached it. A server that applies a
//! write and then answers 503 breaks that contract; the machines still treat
//! a throttled write as not applied only after re-reading the record.
//!
//! Error bodies (`<Error><Code>..</Code><Message>..</Message></Error>`) are
//! read for their code and message; a missing, HTML or garbled body gives no
//! code. Messages are cut to [`MAX_MESSAGE_CHARS`] characters. Parsing is
//! total: any status, headers and body bytes give some reply.
//!
//! # The GCS dialect
//!
//! The Google Cloud Storage dialect, over the XML API
//! (`https://storage.googleapis.com`), authenticated with an HMAC key and
//! SigV4 (`SIGNING_REGION`, `SIGNING_SERVICE`).
//!
//! The XML API is S3-shaped (paths, `ListBucketResult`, `<Error>` bodies),
//! so this dialect is the [S3 dialect](crate::wire#the-s3-dialect) with one difference: an
//! object's version is its **generation**, not its etag.
//!
//! | op | request |
//! |---|---|
//! | `Get` | `GET /{bucket}/{key}`; the reply's `x-goog-generation` is the version |
//! | `Put` | `PUT /{bucket}/{key}` with `x-goog-if-generation-match: 0` ([`PutCondition::IfAbsent`](crate::store::PutCondition::IfAbsent)) or `: <generation>` ([`PutCondition::IfMatch`](crate::store::PutCondition::IfMatch)) |
//! | `Delete` | `DELETE /{bucket}/{key}`, with `x-goog-if-generation-match: <generation>` when given |
//! | `List` | `GET /{bucket}?list-type=2&prefix=..`; each entry's version is its `<Generation>` |
//!
//! Replies are classed as in the S3 dialect: 412 `PreconditionFailed` is a
//! failed condition, 404 `NoSuchKey` missing, 429 and 503 throttling (GCS
//! answers 429 when an object is written more than about once a second).
//! A 200 to `GET` or `PUT` without `x-goog-generation` is `Unexpected`, code
//! `MissingGeneration`.
//!
//! **One write per second per object.** GCS limits how often one object may
//! be written. [`GCS_MIN_WRITE_INTERVAL`] is what the GCS
//! [preset](crate::wire::provider::Provider::Gcs) puts in
//! [`LeaseConfig::min_write_interval`](crate::config::LeaseConfig::min_write_interval),
//! so a machine never writes the same key within a second of its last write.
//!
//! # The Azure dialect
//!
//! The Azure Blob Storage dialect (and Azurite, its emulator), with
//! authentication by account key ([`SharedKeySigner`], feature `sharedkey`)
//! or by a shared access signature ([`SasSigner`]).
//!
//! ## Requests
//!
//! | op | request |
//! |---|---|
//! | `Get` | Get Blob: `GET {endpoint}/{container}/{key}` |
//! | `GetIfNoneMatch` | Get Blob with `If-None-Match: "<etag>"` |
//! | `Put` | Put Blob: `PUT {endpoint}/{container}/{key}` with `x-ms-blob-type: BlockBlob`, `Content-Type`, `Content-Length` and `If-None-Match: *` or `If-Match: "<etag>"` |
//! | `Delete` | Delete Blob: `DELETE {endpoint}/{container}/{key}`, with `If-Match` when given |
//! | `List` | List Blobs: `GET {endpoint}/{container}?restype=container&comp=list&prefix=..&marker=..&maxresults=..` |
//!
//! Every request carries `x-ms-version` ([`AZURE_API_VERSION`] unless
//! configured). The endpoint is the account's blob service URL,
//! `https://{account}.blob.core.windows.net`, or an emulator's
//! `http://127.0.0.1:10000/{account}` (the account is then part of the path).
//!
//! ## Replies
//!
//! The error code is read from the `x-ms-error-code` header, else from the
//! XML body (`<Error><Code>..</Code><Message>..</Message></Error>`).
//!
//! | status | reply |
//! |---|---|
//! | 200 to `Get` | [`Found`](crate::store::ReplyKind::Found) (no `ETag`: `Unexpected`, code `MissingETag`) |
//! | 304 to `GetIfNoneMatch` | [`NotModified`](crate::store::ReplyKind::NotModified) |
//! | 201 (or 200) to `Put` | [`Written`](crate::store::ReplyKind::Written) |
//! | 202 (or 200, 204) to `Delete` | [`Deleted`](crate::store::ReplyKind::Deleted) |
//! | 200 to `List` | [`Listed`](crate::store::ReplyKind::Listed) (bad XML: `Unexpected`, code `MalformedListing`) |
//! | 404 `ContainerNotFound` | [`NoSuchBucket`](crate::store::ReplyKind::NoSuchBucket) |
//! | other 404 (`BlobNotFound`) | [`Missing`](crate::store::ReplyKind::Missing) |
//! | 412 (`ConditionNotMet`) | [`PreconditionFailed`](crate::store::ReplyKind::PreconditionFailed) |
//! | **409 `BlobAlreadyExists` to a create** | `PreconditionFailed`: Azure's answer to `If-None-Match: *` on an existing blob |
//! | other 409 (a blob lease, a container being deleted) | [`Unexpected`](crate::store::ReplyKind::Unexpected), with the code |
//! | 429, 503 (`ServerBusy`) | [`Throttled`](crate::store::ReplyKind::Throttled), with `Retry-After` |
//! | other 5xx (`InternalError`, `OperationTimedOut`) | [`ServerError`](crate::store::ReplyKind::ServerError): the outcome of a write is unknown |
//! | 401, 403 (`AuthenticationFailed`, `AuthorizationFailure`...) | [`Denied`](crate::store::ReplyKind::Denied) |
//! | 400 `InvalidAuthenticationInfo`, `AuthenticationFailed` | `Denied` |
//! | 400 `UnsupportedHeader`, `InvalidHeaderValue`, `NotImplemented` to a conditional write | [`Unsupported`](crate::store::ReplyKind::Unsupported) |
//! | 501 | `Unsupported` |
//! | anything else | `Unexpected` |
//!
//! # SigV4 signing
//!
//! AWS Signature Version 4 for S3-compatible stores (feature `sigv4`).
//!
//! [`SigV4Signer`] signs a rendered request in place with the settings S3
//! needs: the payload hash goes in `x-amz-content-sha256`, and the path is
//! signed exactly as rendered (no second percent-encoding, no dot-segment
//! normalisation). The signing time is an argument: nothing here reads a
//! clock, so signing works on `wasm32-unknown-unknown`, where
//! the standard library's clock panics.
//!
//! The algorithm is written here on RustCrypto's `hmac` and `sha2` rather
//! than taken from `aws-sigv4`, because `aws-sigv4` pulls `tokio` into the
//! core's dependency tree (through `aws-smithy-async`) and about 40 KB into
//! every wasm module. `aws-sigv4` stays the reference: a property test
//! checks that both produce the same `Authorization` header for arbitrary
//! requests, and three signatures are fixed from botocore.
//!
//! The secret access key and the session token never appear in `Debug`
//! output or in a [`SignError`]; only the access key id (which AWS itself
//! treats as an identifier, not a secret) is shown.
//!
//! # Bearer tokens
//!
//! OAuth 2.0 bearer tokens: Google Cloud Storage's XML API and Azure Blob
//! Storage accept `Authorization: Bearer <token>` from a service account,
//! a workload identity or a managed identity. The token comes from the
//! adapter (which fetches and refreshes it); this only writes it in.
//!
//! # Bucket policies
//!
//! A bucket policy for the lease prefix (`lease policy`): AWS S3 can refuse
//! a PUT that carries neither `If-None-Match` nor `If-Match` (the condition
//! keys `s3:if-none-match` and `s3:if-match`), so a misconfigured client,
//! or a script with a plain `aws s3 cp`, cannot overwrite a lease.
//!
//! Deletes can be covered too ([`s3_conditional_deletes_only`], `lease
//! policy --deletes`): a DELETE without `If-Match` is refused. That suits
//! cas and mutex leases, which delete only with `If-Match`; not epochs,
//! which deletes the epochs it superseded without it. The capability
//! probe's cleanup of its scratch objects (`<key>.probe/…`) deletes
//! without `If-Match` and is refused too: best effort, the probe's verdict
//! is unchanged and the scratch objects stay. Other stores have no such
//! policy (R2, GCS, Azure Blob): `docs/operations.md` says what protects
//! the prefix there.
//!
//! # Provider presets
//!
//! Provider presets: what each object store needs so users do not have to
//! find its quirks themselves. A [`Provider`] picks the dialect, the
//! endpoint shape, addressing, signing region and the limits the machines
//! must respect; [`StoreSettings`](crate::settings::StoreSettings) reads it
//! from `LEASE_PROVIDER`, and [`AnyDialect`] runs the dialect it names.
//!
//! The capability probe ([`protocol::probe`](crate::protocol#the-capability-probe)) remains the judge: a preset says
//! what the provider documents, the probe checks what the endpoint does.

#[cfg(feature = "azure")]
pub(crate) mod azure;
#[cfg(any(feature = "sharedkey", feature = "trace"))]
pub(crate) mod base64;
pub(crate) mod bearer;
mod dialect;
pub(crate) mod gcs;
pub(crate) mod policy;
pub(crate) mod provider;
pub(crate) mod s3;
#[cfg(feature = "sigv4")]
pub(crate) mod sign;
mod text;
mod transport;

#[cfg(all(feature = "azure", feature = "sharedkey"))]
pub use azure::SharedKeySigner;
#[cfg(feature = "azure")]
pub use azure::{AzureConfig, AzureDialect, SasSigner, AZURE_API_VERSION};
pub use bearer::BearerSigner;
pub use dialect::{Dialect, RenderError, SignError, Signer};
pub use gcs::{GcsConfig, GcsDialect, GCS_MIN_WRITE_INTERVAL};
pub use policy::{s3_conditional_deletes_only, s3_conditional_writes_only};
pub use provider::{AnyDialect, DialectKind, Preset, Provider};
pub use s3::{Addressing, EtagQuoting, S3Config, S3Dialect, R2_MIN_WRITE_INTERVAL};
#[cfg(feature = "sigv4")]
pub use sign::SigV4Signer;
pub use text::{reply_header, MAX_KEY_BYTES, MAX_MESSAGE_CHARS, REPLY_HEADERS};
pub use transport::{HttpStore, HttpTransport, TransportError};
