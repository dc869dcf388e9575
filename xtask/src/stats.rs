//! Small statistics shared by the benchmarks and experiments: the median of repetitions, the
//! mean of a window of a per-second timeline.

/// Median of the finite samples (mean of the middle two for an even count); `None` when there
/// are none.
pub fn median(v: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let hi = *s.get(n / 2)?;
    if n % 2 == 0 {
        Some((s.get(n / 2 - 1)? + hi) / 2.0)
    } else {
        Some(hi)
    }
}

/// [`median`], NaN when there are no finite samples (for tables that print "NaN").
pub fn median_or_nan(v: &[f64]) -> f64 {
    median(v).unwrap_or(f64::NAN)
}

/// Mean of the per-second values `v[i]` for seconds `i` in `[from, to)`; 0 when there are none.
pub fn mean_of_seconds(v: &[f64], from: u32, to: u32) -> f64 {
    let w: Vec<f64> = v
        .iter()
        .enumerate()
        .filter(|(i, _)| (from as usize..to as usize).contains(i))
        .map(|(_, x)| *x)
        .collect();
    if w.is_empty() {
        0.0
    } else {
        w.iter().sum::<f64>() / w.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN, 2.0]), Some(2.0));
        assert!(median_or_nan(&[]).is_nan());
        assert!((median_or_nan(&[4.0, 1.0, 2.0, 3.0]) - 2.5).abs() < 1e-9);
    }

    #[test]
    fn mean_of_a_window_of_seconds() {
        let v = [1.0, 2.0, 3.0, 6.0];
        assert!((mean_of_seconds(&v, 1, 3) - 2.5).abs() < 1e-9);
        assert!((mean_of_seconds(&v, 2, 10) - 4.5).abs() < 1e-9);
        assert_eq!(mean_of_seconds(&v, 5, 9), 0.0);
    }
}
