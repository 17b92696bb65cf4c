//! A minimal blocking HTTP/1.1 client over `std::net`, enough to drive and
//! probe the test servers: one request per connection (`Connection: close`),
//! fixed-length or chunked response bodies.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How long [`http_request`] waits to connect, and then for each read or
/// write, before it gives up.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A response read by [`http_request`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code, e.g. `200` or `412`.
    pub status: u16,
    /// The header fields in the order received (names as sent by the server).
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked if it came chunked.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The value of the first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy UTF-8), for assertions and error messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends one request and reads the whole response.
///
/// `endpoint` is `http://HOST:PORT` (as returned by the servers'
/// `endpoint()`), `path` starts with `/` and may carry a query. `Host`,
/// `Content-Length` (for a non-empty body, and always for `PUT` and `POST`)
/// and `Connection: close` are added unless `headers` has them. Errors
/// (connect, timeout, malformed response) are returned as text; any status
/// code, including 4xx and 5xx, is an `Ok`.
pub fn http_request(
    endpoint: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<HttpResponse, String> {
    let authority = endpoint
        .strip_prefix("http://")
        .ok_or_else(|| format!("endpoint {endpoint:?} must start with http://"))?
        .trim_end_matches('/');
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));

    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    if !has("host") {
        head.push_str(&format!("Host: {authority}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !has("content-length") && (!body.is_empty() || method == "PUT" || method == "POST") {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    if !has("connection") {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");

    let context = |what: &str, e: std::io::Error| format!("{method} {endpoint}{path}: {what}: {e}");
    let addr = std::net::ToSocketAddrs::to_socket_addrs(authority)
        .map_err(|e| context("resolve", e))?
        .next()
        .ok_or_else(|| format!("{endpoint}: no address"))?;
    let mut stream =
        TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| context("connect", e))?;
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| context("set timeout", e))?;
    stream
        .set_write_timeout(Some(IO_TIMEOUT))
        .map_err(|e| context("set timeout", e))?;
    let mut request = head.into_bytes();
    request.extend_from_slice(body);
    stream.write_all(&request).map_err(|e| context("send", e))?;
    let raw =
        read_response(&mut stream, method == "HEAD").map_err(|e| context("read response", e))?;
    parse_response(&raw, method == "HEAD").map_err(|e| format!("{method} {endpoint}{path}: {e}"))
}

/// Reads until the response is complete: the head plus `Content-Length`
/// bytes when the head has that header (without waiting for the server to
/// close the connection, which werkzeug does about 10 ms after answering),
/// else up to the end of the connection.
fn read_response(stream: &mut TcpStream, head_request: bool) -> std::io::Result<Vec<u8>> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let mut expected_len: Option<usize> = None;
    loop {
        if let Some(len) = expected_len {
            if raw.len() >= len {
                return Ok(raw);
            }
        }
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(raw);
        }
        raw.extend_from_slice(&buf[..n]);
        if expected_len.is_none() {
            expected_len = complete_length(&raw, head_request);
        }
    }
}

/// The total length of a response that starts with `raw`, once its head is
/// in and it says how long the body is (`None` for chunked or
/// close-delimited bodies, which are read to the end of the connection).
fn complete_length(raw: &[u8], head_request: bool) -> Option<usize> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&raw[..end]);
    let status: u16 = head.split(' ').nth(1)?.parse().ok()?;
    if head_request || status == 204 || status == 304 || (100..200).contains(&status) {
        return Some(end);
    }
    let mut content_length = None;
    for line in head.split("\r\n").skip(1) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if name.trim().eq_ignore_ascii_case("transfer-encoding") {
            return None;
        }
        if name.trim().eq_ignore_ascii_case("content-length") {
            content_length = value.trim().parse::<usize>().ok();
        }
    }
    content_length.map(|len| end + len)
}

/// Parses a complete response as read up to the end of the connection.
fn parse_response(raw: &[u8], head_request: bool) -> Result<HttpResponse, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| {
            format!(
                "incomplete response ({} bytes): {:?}",
                raw.len(),
                String::from_utf8_lossy(raw)
            )
        })?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .filter(|_| status_line.starts_with("HTTP/"))
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut response = HttpResponse {
        status,
        headers,
        body: Vec::new(),
    };
    let rest = &raw[end + 4..];
    if head_request || status == 204 || status == 304 || (100..200).contains(&status) {
        return Ok(response);
    }
    let chunked = response
        .header("transfer-encoding")
        .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
    response.body = if chunked {
        dechunk(rest)?
    } else if let Some(len) = response.header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| format!("bad Content-Length {len:?}"))?;
        rest.get(..len)
            .ok_or_else(|| format!("body shorter than Content-Length {len}"))?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Ok(response)
}

/// Decodes a chunked body (trailers ignored).
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunk size")?;
        let size_text = String::from_utf8_lossy(&rest[..line_end]);
        let size_hex = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        let chunk = rest.get(..size).ok_or("truncated chunk")?;
        body.extend_from_slice(chunk);
        rest = rest.get(size + 2..).ok_or("truncated chunk end")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fixed_length_and_chunked_bodies() {
        let fixed =
            b"HTTP/1.1 412 Precondition Failed\r\nContent-Length: 3\r\nETag: \"x\"\r\n\r\nabc";
        let r = parse_response(fixed, false).unwrap();
        assert_eq!(r.status, 412);
        assert_eq!(r.header("etag"), Some("\"x\""));
        assert_eq!(r.body, b"abc");

        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked, false).unwrap().body, b"abcde");

        assert_eq!(complete_length(fixed, false), Some(fixed.len()));
        assert_eq!(complete_length(&fixed[..20], false), None);
        assert_eq!(complete_length(chunked, false), None);
        let head = b"HTTP/1.0 200 OK\r\nContent-Length: 10\r\n\r\n";
        assert_eq!(complete_length(head, true), Some(head.len()));
        assert!(parse_response(head, true).unwrap().body.is_empty());
        assert!(parse_response(b"HTTP/1.1 200", false).is_err());
        assert!(parse_response(b"garbage\r\n\r\n", false).is_err());
    }
}
