//! A [`Store`] over HTTP: a [`Dialect`] renders and classifies, a
//! [`Signer`] signs, an [`HttpTransport`] (the adapter's few dozen lines)
//! sends.

use super::{Dialect, Signer};
use crate::store::{ReplyKind, Store, StoreOp, StoreReply, TransportErrorKind};
use crate::time::Clock;
use core::fmt;
use core::future::Future;
use std::time::Duration;

/// A transport failure: no HTTP response was received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransportError {
    /// What went wrong.
    pub kind: TransportErrorKind,
    /// Details for humans (must not contain credentials).
    pub message: String,
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

impl std::error::Error for TransportError {}

/// Sends one HTTP request and returns the response, with no retries and
/// with a timeout of its own.
pub trait HttpTransport {
    /// Sends `request`.
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> impl Future<Output = Result<http::Response<Vec<u8>>, TransportError>>;
}

/// A [`Store`] over HTTP: render with a dialect, sign, send, classify.
pub struct HttpStore<D, T, C> {
    dialect: D,
    transport: T,
    clock: C,
    signer: Option<Box<dyn Signer + Send + Sync>>,
}

impl<D, T, C> fmt::Debug for HttpStore<D, T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpStore")
            .field("signed", &self.signer.is_some())
            .finish_non_exhaustive()
    }
}

impl<D: Dialect, T: HttpTransport, C: Clock> HttpStore<D, T, C> {
    /// An unsigned store; `clock` supplies the signing time once a signer
    /// is added.
    pub fn new(dialect: D, transport: T, clock: C) -> Self {
        HttpStore {
            dialect,
            transport,
            clock,
            signer: None,
        }
    }

    /// Signs every request with `signer`.
    pub fn with_signer(mut self, signer: impl Signer + Send + Sync + 'static) -> Self {
        self.signer = Some(Box::new(signer));
        self
    }

    /// The request that `op` becomes, signed when a signer is set (for
    /// logs, demos and tests; [`Store::call`] sends exactly this).
    pub fn request(&self, op: &StoreOp) -> Result<http::Request<Vec<u8>>, ReplyKind> {
        self.request_signed(op, self.signer.as_deref().map(|s| s as &dyn Signer))
    }

    fn request_signed(
        &self,
        op: &StoreOp,
        signer: Option<&dyn Signer>,
    ) -> Result<http::Request<Vec<u8>>, ReplyKind> {
        let mut request = self.dialect.render(op).map_err(|e| ReplyKind::Invalid {
            reason: e.to_string(),
        })?;
        if let Some(signer) = signer {
            signer
                .sign(&mut request, self.clock.now().wall)
                .map_err(|e| ReplyKind::Invalid {
                    reason: e.to_string(),
                })?;
        }
        Ok(request)
    }

    /// [`Store::call`], signed by `signer` instead of the store's own: for
    /// credentials that change (refreshed before they expire), each call
    /// signed whole by one set of them.
    pub async fn call_signed_by(&self, op: StoreOp, signer: &(dyn Signer + Sync)) -> StoreReply {
        self.send(&op, self.request_signed(&op, Some(signer))).await
    }

    async fn send(
        &self,
        op: &StoreOp,
        request: Result<http::Request<Vec<u8>>, ReplyKind>,
    ) -> StoreReply {
        let request = match request {
            Ok(r) => r,
            Err(kind) => return StoreReply::new(kind),
        };
        match self.transport.send(request).await {
            Ok(response) => self.dialect.parse(op, &response),
            Err(e) => StoreReply::transport(e.kind, e.message),
        }
    }

    /// The dialect.
    pub fn dialect(&self) -> &D {
        &self.dialect
    }
}

impl<D: Dialect, T: HttpTransport, C: Clock> Store for HttpStore<D, T, C> {
    fn min_write_interval(&self) -> Duration {
        self.dialect.min_write_interval()
    }

    async fn call(&self, op: StoreOp) -> StoreReply {
        let request = match self.request(&op) {
            Ok(r) => r,
            Err(kind) => return StoreReply::new(kind),
        };
        match self.transport.send(request).await {
            Ok(response) => self.dialect.parse(&op, &response),
            Err(e) => StoreReply::transport(e.kind, e.message),
        }
    }
}
