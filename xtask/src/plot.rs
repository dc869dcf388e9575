//! A small SVG time chart shared by the timeline experiments (`congestion`, `adaptive`): time on
//! x, one quantity on the left axis and one on the right, an optional shaded interval, and a
//! legend line per series.

/// One line of the chart.
#[derive(Clone, Debug)]
pub struct Series {
    /// (seconds, value) points.
    pub points: Vec<(f64, f64)>,
    /// SVG colour.
    pub color: &'static str,
    /// Dashed line.
    pub dashed: bool,
    /// On the right axis (else the left one).
    pub right: bool,
    /// Legend text.
    pub label: String,
}

/// A chart over `[0, secs]`.
#[derive(Clone, Debug)]
pub struct TimeChart {
    /// Title above the plot.
    pub title: String,
    /// Length of the x axis, seconds.
    pub secs: f64,
    /// Top of the left axis (its ticks are quarters).
    pub left_max: f64,
    /// Left axis label.
    pub left_label: String,
    /// Top of the right axis (quarters).
    pub right_max: f64,
    /// Right axis label.
    pub right_label: String,
    /// A shaded interval (seconds), e.g. a flood.
    pub shade: Option<(f64, f64)>,
    /// The lines.
    pub series: Vec<Series>,
}

/// The chart as an SVG document.
pub fn time_chart(c: &TimeChart) -> String {
    let (w, h, left, right, top, bottom) = (720.0, 360.0, 60.0, 60.0, 40.0, 50.0);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let secs = c.secs.max(1.0);
    let x = |t: f64| left + pw * (t / secs).clamp(0.0, 1.0);
    let ya = |v: f64, max: f64| top + ph * (1.0 - (v / max.max(f64::MIN_POSITIVE)).clamp(0.0, 1.0));
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">{}</text>\n",
        w / 2.0,
        c.title
    );
    if let Some((a, b)) = c.shade {
        s.push_str(&format!(
            "<rect x=\"{:.1}\" y=\"{top}\" width=\"{:.1}\" height=\"{ph}\" fill=\"#fde2e2\"/>\n",
            x(a),
            x(b) - x(a)
        ));
    }
    s.push_str(&format!(
        "<line x1=\"{left}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"black\"/>\n\
         <line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{b}\" stroke=\"black\"/>\n\
         <line x1=\"{r}\" y1=\"{top}\" x2=\"{r}\" y2=\"{b}\" stroke=\"black\"/>\n",
        b = top + ph,
        r = left + pw,
    ));
    for i in 0..=4 {
        let lv = c.left_max * f64::from(i) / 4.0;
        let rv = c.right_max * f64::from(i) / 4.0;
        s.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{lv:.0}</text>\n\
             <text x=\"{:.1}\" y=\"{:.1}\">{rv:.0}</text>\n",
            left - 6.0,
            ya(lv, c.left_max) + 4.0,
            left + pw + 6.0,
            ya(rv, c.right_max) + 4.0
        ));
    }
    let step = if secs > 30.0 { 10 } else { 5 };
    // Whole seconds of a chart of at most a few minutes.
    for t in (0..=secs.ceil() as u32).step_by(step) {
        s.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{t}</text>\n",
            x(f64::from(t)),
            top + ph + 16.0
        ));
    }
    s.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">time (s)</text>\n\
         <text x=\"16\" y=\"{mid:.1}\" transform=\"rotate(-90 16 {mid:.1})\" text-anchor=\"middle\">{}</text>\n\
         <text x=\"{rx:.1}\" y=\"{mid:.1}\" transform=\"rotate(90 {rx:.1} {mid:.1})\" text-anchor=\"middle\">{}</text>\n",
        left + pw / 2.0,
        h - 12.0,
        c.left_label,
        c.right_label,
        mid = top + ph / 2.0,
        rx = w - 14.0,
    ));
    for (i, se) in c.series.iter().enumerate() {
        let max = if se.right { c.right_max } else { c.left_max };
        let pts: Vec<String> = se
            .points
            .iter()
            .map(|(t, v)| format!("{:.1},{:.1}", x(*t), ya(*v, max)))
            .collect();
        let dash = if se.dashed {
            " stroke-dasharray=\"6 3\""
        } else {
            ""
        };
        s.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{dash} points=\"{}\"/>\n",
            se.color,
            pts.join(" ")
        ));
        // Legend entries side by side, 230 px apart.
        let lx = left + 10.0 + 230.0 * i as f64;
        s.push_str(&format!(
            "<line x1=\"{lx:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{}\" stroke-width=\"2\"{dash}/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            top + 12.0,
            lx + 30.0,
            top + 12.0,
            se.color,
            lx + 36.0,
            top + 16.0,
            se.label
        ));
    }
    s.push_str("</svg>\n");
    s
}

/// Writes an experiment's `NAME.json` (pretty), `NAME.md` and `NAME.svg` under `out_dir`
/// (created if missing).
pub fn write_results(
    out_dir: &std::path::Path,
    name: &str,
    data: &impl serde::Serialize,
    markdown: &str,
    svg: &str,
) -> anyhow::Result<()> {
    use anyhow::Context;
    std::fs::create_dir_all(out_dir).with_context(|| format!("create {}", out_dir.display()))?;
    let json = serde_json::to_string_pretty(data).with_context(|| format!("encode {name}"))?;
    for (ext, text) in [("json", json.as_str()), ("md", markdown), ("svg", svg)] {
        let path = out_dir.join(format!("{name}.{ext}"));
        std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_written_as_json_markdown_and_svg() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("results");
        write_results(&out, "x", &serde_json::json!({"a": 1}), "# md\n", "<svg/>").unwrap();
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("x.json")).unwrap()).unwrap();
        assert_eq!(json["a"], 1);
        assert_eq!(std::fs::read_to_string(out.join("x.md")).unwrap(), "# md\n");
        assert_eq!(
            std::fs::read_to_string(out.join("x.svg")).unwrap(),
            "<svg/>"
        );
    }

    #[test]
    fn a_chart_has_its_lines_labels_and_shade() {
        let c = TimeChart {
            title: "t".into(),
            secs: 20.0,
            left_max: 40.0,
            left_label: "Mbit/s".into(),
            right_max: 4.0,
            right_label: "groups".into(),
            shade: Some((5.0, 10.0)),
            series: vec![
                Series {
                    points: vec![(0.0, 10.0), (1.0, 20.0)],
                    color: "#1f77b4",
                    dashed: false,
                    right: false,
                    label: "rate".into(),
                },
                Series {
                    points: vec![(0.0, 1.0), (10.0, 4.0)],
                    color: "#d62728",
                    dashed: true,
                    right: true,
                    label: "groups".into(),
                },
            ],
        };
        let s = time_chart(&c);
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert_eq!(s.matches("fill=\"#fde2e2\"").count(), 1);
        // Right axis top tick "4", left "40"; the x axis reaches 20 s.
        assert!(s.contains(">40</text>") && s.contains(">4</text>") && s.contains(">20</text>"));
        // 10 Mbit/s at t = 0 sits 3/4 down the plot: y = 40 + 270 × 0.75.
        assert!(s.contains("60.0,242.5"), "{s}");
    }
}
