//! HTTP dialects: pure translations between [`StoreOp`](crate::store::StoreOp)/[`StoreReply`](crate::store::StoreReply) and
//! `http` requests and responses, one module per provider family.
//!
//! A dialect never performs I/O. [`HttpStore`] combines a dialect, an
//! optional [`Signer`] and a transport. The signers are here too
//! ([`sign`] for SigV4; Azure's in `azure`, feature `azure`), and the provider presets
//! ([`provider`]).

#[cfg(feature = "azure")]
pub mod azure;
#[cfg(any(feature = "sharedkey", feature = "trace"))]
pub(crate) mod base64;
pub mod bearer;
mod dialect;
pub mod gcs;
pub mod policy;
pub mod provider;
pub mod s3;
#[cfg(feature = "sigv4")]
pub mod sign;
mod text;
mod transport;

pub use dialect::{Dialect, RenderError, SignError, Signer};
pub use text::{reply_header, REPLY_HEADERS};
pub use transport::{HttpStore, HttpTransport, TransportError};
