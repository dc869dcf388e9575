//! The Prometheus exposition both daemons share (issue #19, `docs/metrics.md`; feature
//! `metrics`): one scrape's families built in order and written in the OpenMetrics text format
//! with `prometheus-client`, or in the classic text format 0.0.4 for clients that do not ask for
//! OpenMetrics. `mmsg`'s and `ssc`'s `metrics` modules fill an [`Exposition`] from their own
//! reports; nothing here counts or keeps state between scrapes.

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// Label set of one sample: (name, value) pairs in a fixed order.
pub type Labels = Vec<(&'static str, String)>;

/// The content type of [`Exposition::finish`]'s output (Prometheus negotiates it; 2.x and
/// later read it).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of [`to_prometheus_text`]'s output (the classic text format 0.0.4).
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The same exposition in the classic Prometheus text format 0.0.4 (for `curl`, `promtool
/// check metrics` and scrapers that do not ask for OpenMetrics): a counter family is named
/// with its `_total` suffix in `# HELP`/`# TYPE`, and there is no `# EOF`.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::BTreeSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + 64);
    for line in openmetrics.lines() {
        if line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{p}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// Whether a scraper's `Accept` header asks for OpenMetrics (Prometheus does).
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.contains("application/openmetrics-text"))
}

/// The families of one scrape, in the order they were added, each with its samples in the
/// order given (`prometheus-client`'s `Family` keeps a hash map: its order would change from
/// scrape to scrape). Nothing lives between scrapes, so nothing can drift from its source.
#[derive(Debug, Default)]
pub struct Exposition {
    families: Vec<(String, String, Samples)>,
}

#[derive(Debug)]
enum Samples {
    Counter(Vec<(Labels, u64)>),
    Gauge(Vec<(Labels, f64)>),
    Histogram(Vec<(Labels, Histogram)>),
}

/// One histogram sample set (a value read at scrape time, like the counters).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// Sum of the observations.
    pub sum: f64,
    /// Observations.
    pub count: u64,
    /// (upper bound, observations in that bucket, **not** cumulative), bounds ascending, the
    /// last one `f64::INFINITY` (`le="+Inf"`).
    pub buckets: Vec<(f64, u64)>,
}

impl prometheus_client::collector::Collector for Exposition {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        for (name, help, samples) in &self.families {
            match samples {
                Samples::Counter(s) if !s.is_empty() => {
                    let mut m = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
                    for (labels, v) in s {
                        ConstCounter::new(*v).encode(m.encode_family(labels)?)?;
                    }
                }
                Samples::Gauge(s) if !s.is_empty() => {
                    let mut m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
                    for (labels, v) in s {
                        ConstGauge::new(*v).encode(m.encode_family(labels)?)?;
                    }
                }
                Samples::Histogram(s) if !s.is_empty() => {
                    let mut m =
                        encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
                    for (labels, h) in s {
                        // prometheus-client writes the bound f64::MAX as "+Inf".
                        let buckets: Vec<(f64, u64)> = h
                            .buckets
                            .iter()
                            .map(|&(le, n)| (if le.is_finite() { le } else { f64::MAX }, n))
                            .collect();
                        m.encode_family(labels)?
                            .encode_histogram::<NoLabelSet>(h.sum, h.count, &buckets, None)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl Exposition {
    /// A counter family; `name` without `_total` (the encoder appends it). A family without
    /// samples is left out of the text.
    pub fn counter(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (Labels, u64)>,
    ) {
        let s = Samples::Counter(samples.into_iter().collect());
        self.families.push((name.to_owned(), help.to_owned(), s));
    }

    /// A gauge family. A family without samples is left out of the text.
    pub fn gauge(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (Labels, f64)>,
    ) {
        let s = Samples::Gauge(samples.into_iter().collect());
        self.families.push((name.to_owned(), help.to_owned(), s));
    }

    /// A histogram family (`_bucket` with `le`, `_sum`, `_count`). A family without samples
    /// is left out of the text.
    pub fn histogram(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (Labels, Histogram)>,
    ) {
        let s = Samples::Histogram(samples.into_iter().collect());
        self.families.push((name.to_owned(), help.to_owned(), s));
    }

    /// The OpenMetrics text, every name prefixed `mms_`.
    pub fn finish(self) -> String {
        let mut registry = Registry::with_prefix("mms");
        registry.register_collector(Box::new(self));
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_in_order_counters_renamed_for_the_classic_format() {
        let mut e = Exposition::default();
        e.gauge("b_seconds", "a gauge", [(vec![("x", "1".to_owned())], 2.5)]);
        e.counter("a_bytes", "a counter", [(Labels::new(), 7)]);
        e.counter("empty", "no samples", []);
        e.histogram(
            "wait_seconds",
            "a histogram",
            [(
                vec![("class", "type1".to_owned())],
                Histogram {
                    sum: 0.25,
                    count: 3,
                    buckets: vec![(0.1, 2), (1.0, 0), (f64::INFINITY, 1)],
                },
            )],
        );
        let om = e.finish();
        let g = om.find("# TYPE mms_b_seconds gauge");
        let c = om.find("# TYPE mms_a_bytes counter");
        assert!(g.is_some() && c.is_some() && g < c, "{om}");
        assert!(om.contains("mms_b_seconds{x=\"1\"} 2.5"), "{om}");
        assert!(om.contains("mms_a_bytes_total{} 7"), "{om}");
        assert!(!om.contains("empty"), "{om}");
        assert!(om.ends_with("# EOF\n"), "{om}");
        assert!(om.contains("# TYPE mms_wait_seconds histogram"), "{om}");
        assert!(
            om.contains("mms_wait_seconds_sum{class=\"type1\"} 0.25"),
            "{om}"
        );
        assert!(
            om.contains("mms_wait_seconds_count{class=\"type1\"} 3"),
            "{om}"
        );
        // Cumulative buckets (prometheus-client writes `le` first).
        assert!(
            om.contains("mms_wait_seconds_bucket{le=\"0.1\",class=\"type1\"} 2"),
            "{om}"
        );
        assert!(
            om.contains("mms_wait_seconds_bucket{le=\"1.0\",class=\"type1\"} 2"),
            "{om}"
        );
        assert!(
            om.contains("mms_wait_seconds_bucket{le=\"+Inf\",class=\"type1\"} 3"),
            "{om}"
        );
        let text = to_prometheus_text(&om);
        assert!(text.contains("# TYPE mms_a_bytes_total counter"), "{text}");
        assert!(!text.contains("# EOF"), "{text}");
        assert!(wants_openmetrics(Some(
            "application/openmetrics-text; version=1.0.0"
        )));
        assert!(!wants_openmetrics(Some("text/plain")) && !wants_openmetrics(None));
    }
}
