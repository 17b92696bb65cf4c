//! Shared by the integration tests and the benches.

#![allow(dead_code)] // each test file uses a different part

/// Reads `tests/data/moto/{name}.http`: a raw response captured from moto
/// 5.2.1 (status line, headers, blank line, body).
pub fn moto(name: &str) -> http::Response<Vec<u8>> {
    let path = format!("{}/tests/data/moto/{name}.http", env!("CARGO_MANIFEST_DIR"));
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let split = raw
        .windows(2)
        .position(|w| w == b"\n\n")
        .expect("blank line after the headers");
    let head = std::str::from_utf8(&raw[..split]).expect("ASCII headers");
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let mut response = http::Response::builder().status(status);
    for line in lines {
        let (name, value) = line.split_once(": ").expect("header line");
        response = response.header(name, value);
    }
    response
        .body(raw[split + 2..].to_vec())
        .expect("valid response")
}

/// Decodes `%XX` escapes in a rendered path or query value.
#[allow(dead_code)] // not every test crate that includes this uses it
pub fn percent_decode(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex: String = bytes.by_ref().take(2).map(char::from).collect();
            out.push(u8::from_str_radix(&hex, 16).expect("two hex digits"));
        } else {
            out.push(b);
        }
    }
    out
}
