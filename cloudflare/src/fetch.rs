//! A [`HttpTransport`] on the Workers `fetch()`: one request, no retries,
//! a timeout that aborts it.

use lease_core::store::TransportErrorKind;
use lease_core::{HttpTransport, TransportError};
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;
use worker::{web_sys, AbortController, Delay, Fetch, Headers, Request};

/// `fetch()` with a per-request timeout.
#[derive(Clone, Copy, Debug)]
pub struct FetchTransport {
    timeout: Duration,
}

impl FetchTransport {
    /// A transport giving each request at most `timeout`.
    pub fn new(timeout: Duration) -> Self {
        FetchTransport { timeout }
    }
}

fn error(kind: TransportErrorKind, message: impl Into<String>) -> TransportError {
    TransportError {
        kind,
        message: message.into(),
    }
}

/// The first of two futures to finish.
async fn race<A, B>(a: impl Future<Output = A>, b: impl Future<Output = B>) -> Result<A, B> {
    let (mut a, mut b) = (pin!(a), pin!(b));
    poll_fn(|cx| {
        if let Poll::Ready(v) = a.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        b.as_mut().poll(cx).map(Err)
    })
    .await
}

/// The request as the Workers runtime takes it. `Host` and
/// `Content-Length` are the runtime's to set (from the URL and the body);
/// they equal what was signed. Built on `web_sys`'s `RequestInit` rather
/// than `worker`'s, whose conversion serialises its `cf` properties through
/// serde (image resizing and the like), which no store request sets: that
/// code is kept out of the module.
fn to_worker(request: &http::Request<Vec<u8>>) -> Result<Request, TransportError> {
    let headers = Headers::new();
    for (name, value) in request.headers() {
        if name == http::header::HOST || name == http::header::CONTENT_LENGTH {
            continue;
        }
        let value = value.to_str().map_err(|_| {
            error(
                TransportErrorKind::Other,
                format!("header {name} is not text"),
            )
        })?;
        headers
            .append(name.as_str(), value)
            .map_err(|e| error(TransportErrorKind::Other, format!("header {name}: {e}")))?;
    }
    let init = web_sys::RequestInit::new();
    init.set_method(request.method().as_str());
    init.set_headers(headers.as_ref());
    if !request.body().is_empty() {
        let body = worker::js_sys::Uint8Array::from(request.body().as_slice());
        init.set_body(&body.into());
    }
    web_sys::Request::new_with_str_and_init(&request.uri().to_string(), &init)
        .map(Request::from)
        .map_err(|e| {
            let e = e
                .as_string()
                .unwrap_or_else(|| "invalid URL or options for Request".into());
            error(TransportErrorKind::Other, format!("request: {e}"))
        })
}

impl HttpTransport for FetchTransport {
    async fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> Result<http::Response<Vec<u8>>, TransportError> {
        let worker_request = to_worker(&request)?;
        let controller = AbortController::default();
        let signal = controller.signal();
        let exchange = async {
            let fetch = Fetch::Request(worker_request);
            let mut response = fetch
                .send_with_signal(&signal)
                .await
                .map_err(|e| error(TransportErrorKind::Other, e.to_string()))?;
            let body = response
                .bytes()
                .await
                .map_err(|e| error(TransportErrorKind::Reset, e.to_string()))?;
            let mut out = http::Response::builder().status(response.status_code());
            // Only what the dialects read: a header name parsed at run
            // time would link `http`'s 12 KB name parser.
            for (name, value) in response.headers().entries() {
                if let Some(name) = lease_core::wire::reply_header(&name) {
                    out = out.header(name, value);
                }
            }
            out.body(body)
                .map_err(|e| error(TransportErrorKind::Other, e.to_string()))
        };
        match race(exchange, Delay::from(self.timeout)).await {
            Ok(result) => result,
            Err(()) => {
                controller.abort();
                Err(error(
                    TransportErrorKind::Timeout,
                    format!(
                        "no response within {:?}",
                        lease_core::time::Dur(self.timeout)
                    ),
                ))
            }
        }
    }
}
