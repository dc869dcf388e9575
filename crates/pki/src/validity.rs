//! The validity period of a certificate (DER), for renewal decisions: a minimal DER walk to
//! `tbsCertificate.validity` (webpki checks validity but does not expose it). Peer or file
//! input: never panics; anything unexpected is `None`.

/// One DER element at the start of `buf`: (tag, contents, rest). Long lengths up to 4 bytes.
pub(crate) fn element(buf: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = buf.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let (bytes, r) = rest.split_at_checked(n)?;
        rest = r;
        bytes.iter().fold(0usize, |a, &b| (a << 8) | usize::from(b))
    };
    let (contents, rest) = rest.split_at_checked(len)?;
    Some((tag, contents, rest))
}

/// Two decimal digits at `s[i..i + 2]`.
fn two(s: &[u8], i: usize) -> Option<u8> {
    let d = s.get(i..i + 2)?;
    let (a, b) = (d.first()?, d.get(1)?);
    if !a.is_ascii_digit() || !b.is_ascii_digit() {
        return None;
    }
    Some((a - b'0') * 10 + (b - b'0'))
}

/// UTCTime (`YYMMDDHHMMSSZ`, tag 0x17) or GeneralizedTime (`YYYYMMDDHHMMSSZ`, 0x18) → Unix s.
pub(crate) fn time_of(tag: u8, s: &[u8]) -> Option<u64> {
    let (year, s) = match (tag, s.len()) {
        (0x17, 13) => {
            let yy = i32::from(two(s, 0)?);
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, s.get(2..)?)
        }
        (0x18, 15) => (
            i32::from(two(s, 0)?) * 100 + i32::from(two(s, 2)?),
            s.get(4..)?,
        ),
        _ => return None,
    };
    if s.get(10) != Some(&b'Z') {
        return None;
    }
    let month = time::Month::try_from(two(s, 0)?).ok()?;
    let date = time::Date::from_calendar_date(year, month, two(s, 2)?).ok()?;
    let t = time::Time::from_hms(two(s, 4)?, two(s, 6)?, two(s, 8)?).ok()?;
    u64::try_from(date.with_time(t).assume_utc().unix_timestamp()).ok()
}

/// `(not_before, not_after)` of a DER certificate in Unix seconds.
pub fn validity_of(der: &[u8]) -> Option<(u64, u64)> {
    let (0x30, cert, _) = element(der)? else {
        return None;
    };
    let (0x30, tbs, _) = element(cert)? else {
        return None;
    };
    let mut rest = tbs;
    // [0] version (optional), serial, signature algorithm, issuer, then validity.
    let (tag, _, r) = element(rest)?;
    if tag == 0xa0 {
        rest = r;
    }
    for _ in 0..3 {
        rest = element(rest)?.2;
    }
    let (0x30, validity, _) = element(rest)? else {
        return None;
    };
    let (t1, nb, r) = element(validity)?;
    let (t2, na, _) = element(r)?;
    Some((time_of(t1, nb)?, time_of(t2, na)?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn reads_what_the_ca_wrote_and_survives_junk() {
        let ca = crate::ca::Ca::generate("t").unwrap();
        let validity = std::time::Duration::from_secs(86_400);
        let issued = ca
            .issue_gateway(mms_types::BranchId::new(2).unwrap(), 9, validity)
            .unwrap();
        let now = time::OffsetDateTime::now_utc().unix_timestamp() as u64;
        let (nb, na) = validity_of(&issued.cert_der).unwrap();
        let skew = crate::ca::CLOCK_SKEW.as_secs();
        assert!(nb.abs_diff(now - skew) <= 5, "{nb} vs {now}");
        assert!(na.abs_diff(now + validity.as_secs()) <= 5, "{na} vs {now}");
        let der = issued.cert_der.to_vec();
        for n in 0..der.len() {
            let _ = validity_of(&der[..n]);
        }
        for i in 0..der.len() {
            let mut d = der.clone();
            d[i] ^= 0xa5;
            let _ = validity_of(&d);
        }
        assert_eq!(validity_of(&[]), None);
        assert_eq!(time_of(0x17, b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(time_of(0x18, b"19700101000000Z"), Some(0));
        assert_eq!(time_of(0x17, b"4912312359590"), None);
    }
}
