//! [`HttpTransport`] on reqwest: rustls (ring), no retries of any kind (every
//! retry is the lease machine's decision, see `docs/design.md` §9, F1), a connect
//! timeout and a whole-request timeout.

use lease_core::store::TransportErrorKind;
use lease_core::{HttpTransport, TransportError};
use std::future::Future;
use std::time::Duration;

/// A reqwest client configured for lease calls.
#[derive(Clone, Debug)]
pub struct ReqwestTransport {
    client: reqwest::Client,
}

impl ReqwestTransport {
    /// A client that gives up connecting after `connect_timeout` and on the
    /// whole exchange after `request_timeout` (set it to the lease
    /// config's `request_timeout`).
    pub fn new(
        connect_timeout: Duration,
        request_timeout: Duration,
    ) -> Result<Self, TransportError> {
        // reqwest is built without a TLS crypto provider: rustls's ring one
        // becomes the process default (unless the program chose another).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .timeout(request_timeout)
            .retry(reqwest::retry::never())
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| TransportError {
                kind: TransportErrorKind::Other,
                message: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(ReqwestTransport { client })
    }
}

fn classify(e: &reqwest::Error) -> TransportErrorKind {
    if e.is_timeout() {
        TransportErrorKind::Timeout
    } else if e.is_connect() {
        TransportErrorKind::Connect
    } else if e.is_request() || e.is_body() {
        TransportErrorKind::Reset
    } else {
        TransportErrorKind::Other
    }
}

fn error(e: reqwest::Error) -> TransportError {
    // reqwest's messages name the URL but never headers. The URL is
    // named here without its query, which carries an Azure SAS signature
    // when one is used.
    let url = e.url().map(|u| {
        let mut u = u.clone();
        u.set_query(None);
        u.to_string()
    });
    let e = e.without_url();
    let mut message = e.to_string();
    if let Some(url) = url {
        message.push_str(&format!(" ({url})"));
    }
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    TransportError {
        kind: classify(&e),
        message,
    }
}

impl HttpTransport for ReqwestTransport {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> impl Future<Output = Result<http::Response<Vec<u8>>, TransportError>> {
        let client = self.client.clone();
        async move {
            let request = reqwest::Request::try_from(request).map_err(error)?;
            let response = client.execute(request).await.map_err(error)?;
            let mut builder = http::Response::builder()
                .status(response.status())
                .version(response.version());
            if let Some(headers) = builder.headers_mut() {
                *headers = response.headers().clone();
            }
            let body = response.bytes().await.map_err(error)?;
            builder.body(body.to_vec()).map_err(|e| TransportError {
                kind: TransportErrorKind::Other,
                message: e.to_string(),
            })
        }
    }
}

/// The reqwest transport every store here uses: `request_timeout` per
/// call, at most 5 s of it to connect.
pub(crate) fn for_calls(
    request_timeout: Duration,
) -> Result<ReqwestTransport, lease_core::SettingsError> {
    ReqwestTransport::new(request_timeout.min(Duration::from_secs(5)), request_timeout).map_err(
        |e| lease_core::SettingsError::Invalid {
            variable: "LEASE_ENDPOINT",
            reason: e.message,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn transport_errors_name_the_url_without_its_query() {
        // A port nothing listens on: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let transport =
            ReqwestTransport::new(Duration::from_secs(2), Duration::from_secs(2)).expect("client");
        let request = http::Request::get(format!(
            "http://127.0.0.1:{port}/acct/locks/k?sv=2023-11-03&sig=SECRETSIG"
        ))
        .body(Vec::new())
        .unwrap();
        let err = transport.send(request).await.expect_err("nothing listens");
        assert_eq!(err.kind, TransportErrorKind::Connect, "{err}");
        assert!(err.message.contains("/acct/locks/k"), "{err}");
        assert!(!err.message.contains("SECRETSIG"), "{err}");
    }
}
