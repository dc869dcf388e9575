//! Reports of `cargo xtask experiment`: markdown tables and SVG bar charts in the paper's style
//! (test cases on x, goodput bars for IPoMP and the baseline side by side).

use std::fmt::Write as _;

use super::def::{Background, Case};
use super::report::{FigureResult, Report, Spread};

/// A case's settings in one short string: `pg 8/8/6/2`, `members 8/6/4/2 x2 PG`, `rates 1:2:4:33`.
pub fn describe_case(c: &Case) -> String {
    let join = |v: &[f64], sep: &str| {
        v.iter()
            .map(|x| format!("{x}"))
            .collect::<Vec<_>>()
            .join(sep)
    };
    let unit = match c.background {
        Background::Tcp => " flows",
        _ => "",
    };
    if let Some(pg) = &c.def.pg {
        format!("PG {}{unit}", join(pg, "/"))
    } else if let Some(m) = &c.def.members {
        if c.background == Background::Meter {
            format!("rates {}", join(m, ":"))
        } else {
            format!("members {}{unit}, {} PG", join(m, "/"), c.groups)
        }
    } else {
        String::new()
    }
}

/// IPoMP over the baseline as `2.35x`; `–` when it is undefined (a baseline that measured 0, or
/// a ratio read back from JSON as NaN): "infx" tells an engineer nothing.
pub fn fmt_ratio(ratio: f64) -> String {
    if ratio.is_finite() {
        format!("{ratio:.2}x")
    } else {
        "–".to_owned()
    }
}

fn cell(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite())
        .map_or_else(|| "–".to_owned(), |x| format!("{x:.1}"))
}

/// The report as markdown: one table per figure.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {}\n", r.title);
    let _ = writeln!(
        s,
        "`{}`: {} s per measurement after {} s warm-up, {} repetition(s) per case (median shown, \
         min–max in brackets), started {}, {:.0} min, machine {}.\n",
        r.name,
        r.secs,
        r.omit_secs,
        r.reps,
        r.started,
        r.duration_secs / 60.0,
        r.machine
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for m in &r.merged_runs {
        let _ = writeln!(
            s,
            "Kept from an earlier run (started {}, {}): {}.\n",
            m.started,
            m.machine
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            m.cases.join(", ")
        );
    }
    for f in &r.figures {
        let _ = writeln!(s, "## {} ({})\n", f.title, f.table);
        let udp = f.cases.iter().any(|c| c.udp.is_some());
        let e2e = f.cases.iter().any(|c| c.e2e_mptcp_mbps.is_some());
        let paper = f.cases.iter().any(|c| c.paper_ipomp_mbps.is_some());
        let mut head = vec![
            "case",
            "setting",
            "conn.",
            "IPoMP Mbit/s",
            "baseline Mbit/s",
        ];
        let mut rule = vec!["---:", "---", "---:", "---:", "---:"];
        head.extend(["ratio", "bound IPoMP / baseline"]);
        rule.extend(["---:", "---:"]);
        if udp {
            head.push("UDP/IPoMP");
            rule.push("---:");
        }
        if e2e {
            head.push("e2e MPTCP");
            rule.push("---:");
        }
        if paper {
            head.push("paper TCP / UDP / e2e");
            rule.push("---:");
        }
        let _ = writeln!(s, "| {} |", head.join(" | "));
        let _ = writeln!(s, "|{}|", rule.join("|"));
        for c in &f.cases {
            let spread = |x: &Spread| {
                if x.reps.len() > 1 {
                    format!("{:.1} ({:.1}–{:.1})", x.median, x.min, x.max)
                } else {
                    format!("{:.1}", x.median)
                }
            };
            let mut row = vec![
                c.id.to_string(),
                describe_case(&c.settings),
                // `K/g` when the gateways ran `connections_per_group = K` (K > 1).
                match c.settings.connections_per_group {
                    0 | 1 => c.settings.connections.to_string(),
                    k => format!("{} ({k}/g)", c.settings.connections),
                },
                spread(&c.ipomp),
                spread(&c.baseline),
                fmt_ratio(c.ratio),
                format!(
                    "{} / {}",
                    cell(Some(c.model_ipomp_mbps)),
                    cell(Some(c.model_baseline_mbps))
                ),
            ];
            if udp {
                row.push(c.udp.as_ref().map_or_else(|| "–".to_owned(), spread));
            }
            if e2e {
                row.push(cell(c.e2e_mptcp_mbps));
            }
            if paper {
                row.push(format!(
                    "{} / {} / {}",
                    cell(c.paper_ipomp_mbps),
                    cell(c.paper_udp_mbps),
                    cell(c.paper_e2e_mptcp_mbps)
                ));
            }
            let _ = writeln!(s, "| {} |", row.join(" | "));
        }
        let n = f.cases.len();
        let wins = f
            .cases
            .iter()
            .filter(|c| c.ipomp_mbps >= c.baseline_mbps)
            .count();
        let _ = writeln!(
            s,
            "\nIPoMP ≥ baseline in {wins} of {n} cases. \"bound\": what the bottlenecks and branch \
             1's two 40 Mbit/s ports leave (IP bytes; TCP goodput is at most ~93 % of it through \
             either tunnel).\n"
        );
    }
    s
}

/// Escapes text for SVG.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The narrowest chart: room for the title and the legend.
const MIN_WIDTH: f64 = 520.0;

/// A bar chart of one figure: cases on x, IPoMP and baseline bars (median, with a min–max
/// whisker), y in Mbit/s.
pub fn svg(f: &FigureResult) -> String {
    let n = f.cases.len().max(1);
    let (left, right, top, bottom) = (60.0, 20.0, 50.0, 60.0);
    let slot = (24.0f64).max(600.0 / n as f64).min(60.0);
    // Wide enough for the legend; a figure with few cases gets wider slots.
    let width = (left + right + slot * n as f64).max(MIN_WIDTH);
    let slot = (width - left - right) / n as f64;
    let height = 360.0;
    let plot_h = height - top - bottom;
    let ymax_data = f
        .cases
        .iter()
        .flat_map(|c| [c.ipomp.max, c.baseline.max])
        .fold(10.0f64, f64::max);
    let step = if ymax_data > 50.0 { 20.0 } else { 10.0 };
    let ymax = (ymax_data / step).ceil() * step;
    let y = |v: f64| top + plot_h * (1.0 - v / ymax);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{:.0}" y="20" text-anchor="middle" font-size="13">{}</text>"#,
        width / 2.0,
        esc(&if f.title.contains(&f.table) {
            f.title.clone()
        } else {
            format!("{} ({})", f.title, f.table)
        })
    );
    // Axes and grid.
    let mut v = 0.0;
    while v <= ymax + 1e-9 {
        let _ = writeln!(
            s,
            r##"<line x1="{left}" x2="{:.0}" y1="{:.1}" y2="{:.1}" stroke="#ddd"/><text x="{:.0}" y="{:.1}" text-anchor="end">{v:.0}</text>"##,
            width - right,
            y(v),
            y(v),
            left - 5.0,
            y(v) + 4.0
        );
        v += step;
    }
    let _ = writeln!(
        s,
        r#"<line x1="{left}" x2="{left}" y1="{top}" y2="{:.0}" stroke="black"/><line x1="{left}" x2="{:.0}" y1="{:.0}" y2="{:.0}" stroke="black"/>"#,
        top + plot_h,
        width - right,
        top + plot_h,
        top + plot_h
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(15,{:.0}) rotate(-90)" text-anchor="middle">Goodput (Mbit/s)</text><text x="{:.0}" y="{:.0}" text-anchor="middle">Test case</text>"#,
        top + plot_h / 2.0,
        left + (width - left - right) / 2.0,
        height - 15.0
    );
    let bar = slot * 0.36;
    for (i, c) in f.cases.iter().enumerate() {
        let x0 = left + slot * i as f64 + slot * 0.14;
        for (k, (sp, color)) in [(&c.ipomp, "#1f4e9a"), (&c.baseline, "#c8c8c8")]
            .into_iter()
            .enumerate()
        {
            let x = x0 + bar * k as f64;
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{:.1}" width="{bar:.1}" height="{:.1}" fill="{color}" stroke="black" stroke-width="0.5"/>"#,
                y(sp.median),
                (plot_h - (y(sp.median) - top)).max(0.0)
            );
            if sp.reps.len() > 1 {
                let xm = x + bar / 2.0;
                let _ = writeln!(
                    s,
                    r#"<line x1="{xm:.1}" x2="{xm:.1}" y1="{:.1}" y2="{:.1}" stroke="black"/>"#,
                    y(sp.min),
                    y(sp.max)
                );
            }
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.0}" text-anchor="middle">{}</text>"#,
            x0 + bar,
            top + plot_h + 14.0,
            c.id
        );
    }
    let lx = left + 10.0;
    let _ = writeln!(
        s,
        r##"<rect x="{lx}" y="32" width="10" height="10" fill="#1f4e9a"/><text x="{:.0}" y="41">IPoMP (MMS)</text><rect x="{:.0}" y="32" width="10" height="10" fill="#c8c8c8" stroke="black" stroke-width="0.5"/><text x="{:.0}" y="41">single-path tunnel (VXLAN, direct hop)</text>"##,
        lx + 14.0,
        lx + 110.0,
        lx + 124.0
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::super::{def::CaseDef, CaseResult};
    use super::*;

    fn result(id: u32, ip: f64, bl: f64) -> CaseResult {
        let def = CaseDef {
            id,
            pg: Some(vec![8.0, 8.0, 6.0, 2.0]),
            ..CaseDef::default()
        };
        let settings = Case {
            figure: "fig10a".into(),
            id,
            groups: 4,
            connections: 4,
            background: Background::Udp,
            bottleneck_mbit: 100.0,
            queue_kib: None,
            values: vec![[8.0; 4], [8.0; 4], [6.0; 4], [2.0; 4]],
            connections_per_group: 1,
            def,
        };
        CaseResult {
            figure: "fig10a".into(),
            id,
            settings,
            ipomp_mbps: ip,
            baseline_mbps: bl,
            paper_ipomp_mbps: None,
            ipomp: Spread::of(&[ip, ip + 1.0]).unwrap(),
            baseline: Spread::of(&[bl]).unwrap(),
            udp: None,
            paper_udp_mbps: None,
            e2e_mptcp_mbps: None,
            paper_e2e_mptcp_mbps: None,
            model_ipomp_mbps: 80.0,
            model_baseline_mbps: 24.0,
            ratio: ip / bl,
        }
    }

    /// A Case A report of one figure with these cases.
    fn report(cases: Vec<CaseResult>) -> Report {
        Report {
            name: "case-a".into(),
            title: "Case A".into(),
            started: "now".into(),
            duration_secs: 60.0,
            secs: 8,
            omit_secs: 2,
            reps: 2,
            machine: Default::default(),
            figures: vec![FigureResult {
                id: "fig10a".into(),
                title: "Fig. 10(a)".into(),
                table: "Table III(a)".into(),
                cases,
            }],
            merged_runs: Vec::new(),
        }
    }

    #[test]
    fn svg_has_two_bars_per_case_and_is_well_formed() {
        let f = FigureResult {
            id: "fig10a".into(),
            title: "Fig. 10(a) <4 conns>".into(),
            table: "Table III(a)".into(),
            cases: vec![result(1, 70.0, 22.0), result(2, 60.0, 20.0)],
        };
        let s = svg(&f);
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        // 2 cases x 2 bars + 2 legend swatches + the background.
        assert_eq!(s.matches("<rect").count(), 2 * 2 + 2 + 1);
        assert!(s.contains("&lt;4 conns&gt;"));
        // Min-max whiskers for the IPoMP bars (2 reps), none for the single baseline rep.
        assert_eq!(s.matches("stroke=\"black\"/>").count(), 2 + 2);
    }

    #[test]
    fn markdown_rows_carry_settings_ratio_and_bound() {
        let md = markdown(&report(vec![result(4, 70.0, 20.0)]));
        assert!(
            md.contains("| 4 | PG 8/8/6/2 | 4 | 70.5 (70.0–71.0) | 20.0 | 3.50x | 80.0 / 24.0 |"),
            "{md}"
        );
        assert!(md.contains("IPoMP ≥ baseline in 1 of 1 cases"));
    }

    #[test]
    fn a_baseline_of_zero_has_no_ratio() {
        assert_eq!(fmt_ratio(2.345), "2.35x");
        assert_eq!(fmt_ratio(0.9 / 0.0), "–");
        assert_eq!(fmt_ratio(f64::NAN), "–");
        let md = markdown(&report(vec![result(25, 0.9, 0.0)]));
        assert!(md.contains("| 0.0 | – |"), "{md}");
        assert!(!md.contains("inf"), "{md}");
    }
}
