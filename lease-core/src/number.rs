//! Numbers as text without `f64`'s `Display`: its formatter is about 14 KB
//! of a wasm module (the Worker, the demo), for a few messages.

/// `x` to `places` decimal places (at most 9), written the way `{}` prints
/// such a number: no trailing zeros (`0.7`, `-0.1`, `3`), `NaN`, `inf`,
/// `-inf`. A number too large for 64-bit integers at that precision is
/// written to one significant digit (`1e300`).
pub fn decimal(x: f64, places: u32) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    let sign = if x < 0.0 { "-" } else { "" };
    let unit = 10u64.pow(places.min(9));
    let scaled = (x.abs() * unit as f64).round();
    if scaled >= u64::MAX as f64 {
        return format!("{sign}{}", magnitude(x));
    }
    let scaled = scaled as u64;
    match scaled % unit {
        0 => format!("{sign}{}", scaled / unit),
        frac => {
            let width = places.min(9) as usize;
            let frac = format!("{frac:0width$}");
            format!("{sign}{}.{}", scaled / unit, frac.trim_end_matches('0'))
        }
    }
}

/// A finite number too large for [`decimal`]'s integers, to one
/// significant digit (`1e300`); infinities as `inf`.
fn magnitude(x: f64) -> String {
    let mut x = x.abs();
    if x.is_infinite() {
        return "inf".into();
    }
    let mut exponent = 0;
    while x >= 10.0 {
        x /= 10.0;
        exponent += 1;
    }
    match x.round() as u64 {
        10 => format!("1e{}", exponent + 1),
        digit => format!("{digit}e{exponent}"),
    }
}

#[cfg(test)]
mod tests {
    use super::decimal;

    #[test]
    fn numbers_read_as_display_prints_them() {
        for x in [
            0.7,
            0.5,
            -0.1,
            1.0,
            2.25,
            0.000001,
            12345.5,
            -3.0,
            0.0,
            f64::NAN,
        ] {
            assert_eq!(decimal(x, 6), format!("{x}"));
        }
        for x in [-5.0, -1.0, 0.25, 1.5, 86_400_001.0, 1e12, -0.001] {
            assert_eq!(decimal(x, 3), format!("{x}"));
        }
        assert_eq!(decimal(0.1234567, 6), "0.123457");
        assert_eq!(decimal(f64::INFINITY, 3), "inf");
        assert_eq!(decimal(f64::NEG_INFINITY, 6), "-inf");
        assert_eq!(decimal(-1e300, 3), "-1e300");
        assert_eq!(decimal(9.7e20, 3), "1e21");
    }
}
