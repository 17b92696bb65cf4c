//! Standard base64 (RFC 4648 section 4, with padding), for Azure's
//! account key and SharedKey signature: the two places the wire uses it.
//! Written here rather than taken from the `base64` crate, whose general
//! engine was 6 KB of the Worker's wasm for a 32-byte key and a 44-character
//! signature.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Encodes `bytes`, padded with `=` to a multiple of four characters.
pub(crate) fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes padded standard base64; `None` for anything else: a length
/// that is not a multiple of four, a character outside the alphabet,
/// padding other than one or two `=` at the very end, or leftover bits
/// that are not zero (so that every byte string has one encoding).
pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
    let text = text.as_bytes();
    if text.len() % 4 != 0 {
        return None;
    }
    let pad = text.iter().rev().take_while(|&&c| c == b'=').count();
    if pad > 2 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in &text[..text.len() - pad] {
        let v = ALPHABET.iter().position(|&a| a == c)? as u32;
        acc = (acc << 6 | v) & 0xffff;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    // What is left over must be zero bits: 2 with one `=`, 4 with two.
    (acc & ((1 << bits) - 1) == 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rfc_4648_vectors() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, coded) in vectors {
            assert_eq!(encode(plain.as_bytes()), coded);
            assert_eq!(decode(coded).as_deref(), Some(plain.as_bytes()), "{coded}");
        }
        assert_eq!(encode(&[0xfb, 0xff, 0xbf]), "+/+/");
    }

    #[test]
    fn anything_but_canonical_padded_base64_is_refused() {
        for bad in [
            "Zg",
            "Zg=",
            "Zg===",
            "Z===",
            "====",
            "Zh==",
            "Zm9=",
            "Zm 9v",
            "Zm9v\n",
            "Zm=v",
            "Zm9v-_==",
            "Zm9vYg==Zm9v",
            "é===",
        ] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn every_byte_string_round_trips() {
        // Every length up to 64 over a byte pattern that visits all values.
        let bytes: Vec<u8> = (0..=255u8)
            .map(|b| b.wrapping_mul(167).wrapping_add(13))
            .collect();
        for len in 0..64 {
            for start in [0, 100, 192] {
                let data = &bytes[start..start + len];
                assert_eq!(decode(&encode(data)).as_deref(), Some(data));
            }
        }
    }
}
