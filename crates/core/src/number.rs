//! Integer parsing exactly as Redis does it (`string2ll` in util.c), so that
//! "a positive integer as HINCRBY reads it" and option values mean the same
//! here as in every built-in command: optional `-`, no `+`, no spaces, no
//! leading zeros, at most 20 characters, within i64.

/// Parses `s` the way Redis's `string2ll` does; `None` if Redis would refuse it.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    // LONG_STR_SIZE in Redis is 21: longer strings are refused outright.
    if s.is_empty() || s.len() >= 21 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    if digits.len() <= 18 {
        // Up to 18 digits cannot overflow a u64 (every lease, timeout and
        // count in practice): no checks per digit on the hot path.
        for &c in digits {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v * 10 + u64::from(d);
        }
    } else {
        for &c in digits {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
        }
    }
    if negative {
        // i64::MIN's magnitude fits in u64 but not in i64.
        0i64.checked_sub_unsigned(v)
    } else {
        i64::try_from(v).ok()
    }
}

/// A hold count as HINCRBY would read it, and positive.
pub fn parse_positive(s: &[u8]) -> Option<i64> {
    parse_i64(s).filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_what_redis_accepts() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"1"), Some(1));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn refuses_what_redis_refuses() {
        for s in [
            &b""[..],
            b"-",
            b"+1",
            b" 1",
            b"1 ",
            b"01",
            b"-0",
            b"00",
            b"1.0",
            b"1e3",
            b"0x10",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"99999999999999999999",
            b"1\0",
            b"\xff",
        ] {
            assert_eq!(parse_i64(s), None, "{:?}", String::from_utf8_lossy(s));
        }
    }

    proptest! {
        #[test]
        fn round_trips_every_i64(n in any::<i64>()) {
            prop_assert_eq!(parse_i64(n.to_string().as_bytes()), Some(n));
        }

        #[test]
        fn agrees_with_canonical_form(s in proptest::collection::vec(any::<u8>(), 0..24)) {
            // Redis accepts exactly the canonical decimal spelling of an i64.
            let canonical = std::str::from_utf8(&s)
                .ok()
                .and_then(|t| t.parse::<i64>().ok())
                .filter(|n| n.to_string().as_bytes() == &s[..]);
            prop_assert_eq!(parse_i64(&s), canonical);
        }

        #[test]
        fn agrees_with_canonical_form_on_number_like_input(s in "[-+ 0-9]{0,22}") {
            // Random bytes are rarely digits: this one lives near the edges
            // (signs, spaces, leading zeros, -0, 19-22 digits around i64's range).
            let canonical = s.parse::<i64>().ok().filter(|n| n.to_string() == s);
            prop_assert_eq!(parse_i64(s.as_bytes()), canonical);
        }
    }
}
