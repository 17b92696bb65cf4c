//! What every dialect and signer implements, and their errors.

use crate::store::{StoreOp, StoreReply};
use crate::time::UnixMillis;
use core::fmt;

/// Renders store calls to HTTP requests and classifies HTTP responses.
pub trait Dialect {
    /// The request for `op` (unsigned).
    fn render(&self, op: &StoreOp) -> Result<http::Request<Vec<u8>>, RenderError>;
    /// Classifies the response to the request rendered for `op`. Total: any
    /// status, headers and body map to some reply class.
    fn parse(&self, op: &StoreOp, response: &http::Response<Vec<u8>>) -> StoreReply;
    /// The shortest time the store allows between writes to one object
    /// (GCS: one second); zero when it sets no such limit.
    fn min_write_interval(&self) -> core::time::Duration {
        core::time::Duration::ZERO
    }
}

/// Adds authentication to a rendered request.
pub trait Signer {
    /// Signs `request` in place as of wall-clock time `at` (passed in: the
    /// core never reads a clock).
    fn sign(&self, request: &mut http::Request<Vec<u8>>, at: UnixMillis) -> Result<(), SignError>;
}

/// A store call that cannot be expressed as a request.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RenderError {
    /// The key is empty, too long or contains characters the store rejects.
    InvalidKey {
        /// Excerpt of the key.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The configured endpoint or bucket does not form a valid URI.
    InvalidEndpoint {
        /// What is wrong.
        reason: String,
    },
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RenderError::InvalidKey { key, reason } => {
                write!(f, "invalid object key {key:?}: {reason}")
            }
            RenderError::InvalidEndpoint { reason } => {
                write!(f, "invalid endpoint or bucket: {reason}")
            }
        }
    }
}

impl std::error::Error for RenderError {}

/// A request that could not be signed. Never contains secret material.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignError {
    /// What went wrong, for humans.
    pub reason: String,
}

impl fmt::Display for SignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "could not sign request: {}", self.reason)
    }
}

impl std::error::Error for SignError {}
