//! `cargo xtask experiment all`: the whole evaluation (every experiment file and every seed
//! experiment with its own runner) in one command, with the total time estimated before anything
//! runs, resumable.
//!
//! Resuming: a case of an experiment file counts as done when `<out>/<name>.json` already holds
//! it with at least the requested repetitions on both sides (IPoMP and baseline); only the
//! missing cases run, figure by figure, merged into that file (`--merge`). The experiments with
//! their own runner (`congestion`, `adaptive`, `mdi`, `uplink-lb`) write one file per run, so
//! the campaign records which of them finished in `<out>/all-progress.json`; `--restart` forgets
//! that record (the experiment files' results are kept: re-run those with `--reps` above what
//! they hold, or delete them).
//!
//! Each step runs as its own `xtask experiment ...` process, the same command a person would
//! type (printed before it runs), so a step can be repeated by hand.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::{case_estimate_secs, fmt_duration, read_report, Case, Experiment, SYSTEM_UP_SECS};

/// The experiment files of the paper's evaluation, in the order they run.
pub const FILES: [&str; 4] = ["table1", "case-a", "case-b", "unequal"];

/// The experiments with their own runner and their time per repetition in seconds (from the
/// runs in docs/results.md on this machine, system bring-up included); `per_rep` says whether
/// the runner takes `--reps`.
const RUNNERS: [(&str, u64, bool); 4] = [
    // Seed 001 §IV-A4: one 45 s transfer on the paper system.
    ("congestion", 100, false),
    // Seed 003: 45 s transfer and 35 s idle on the paper system.
    ("adaptive", 130, false),
    // Seed 001 Fig. 3: 10 MDI points × 3 receivers, 15 s each (`mdi::Settings::expected_s`).
    ("mdi", 630, true),
    // Seed 004: five modes, 100 downloads each.
    ("uplink-lb", 70, true),
];

/// The campaign's record of finished runner experiments.
const PROGRESS: &str = "all-progress.json";

/// What `all` does.
#[derive(Debug, Clone)]
pub struct Options {
    /// Repository root (the experiment files).
    pub root: PathBuf,
    /// Results directory.
    pub out_dir: PathBuf,
    /// Repetitions per case.
    pub reps: u32,
    /// Seconds per measurement (default: each file's).
    pub secs: Option<u32>,
    /// Testbed name prefix passed to every step.
    pub prefix: String,
    /// Print the plan and its estimate, run nothing.
    pub dry_run: bool,
    /// Forget which runner experiments this campaign finished.
    pub restart: bool,
}

/// One step of the campaign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The cases of one figure of an experiment file that its results do not hold yet.
    Figure {
        /// Experiment file name.
        experiment: String,
        /// Figure id.
        figure: String,
        /// Case ids to run.
        cases: Vec<u32>,
        /// Estimated seconds.
        est_secs: u64,
    },
    /// An experiment with its own runner.
    Runner {
        /// Its name (`experiment NAME`).
        name: String,
        /// Estimated seconds.
        est_secs: u64,
    },
}

impl Step {
    /// Estimated seconds.
    pub fn est_secs(&self) -> u64 {
        match self {
            Step::Figure { est_secs, .. } | Step::Runner { est_secs, .. } => *est_secs,
        }
    }

    /// The `xtask` arguments that run this step.
    pub fn args(&self, o: &Options) -> Vec<String> {
        let mut a = vec!["experiment".to_owned()];
        match self {
            Step::Figure {
                experiment,
                figure,
                cases,
                ..
            } => {
                a.extend([experiment.clone(), "--figures".into(), figure.clone()]);
                a.extend([
                    "--cases".into(),
                    super::def::case_list(cases),
                    "--merge".into(),
                ]);
                a.extend(["--reps".into(), o.reps.to_string()]);
                if let Some(s) = o.secs {
                    a.extend(["--secs".into(), s.to_string()]);
                }
            }
            Step::Runner { name, .. } => {
                a.push(name.clone());
                if RUNNERS.iter().any(|(n, _, per_rep)| n == name && *per_rep) {
                    a.extend(["--reps".into(), o.reps.to_string()]);
                }
            }
        }
        a.extend(["--out".into(), o.out_dir.display().to_string()]);
        a.extend(["--prefix".into(), o.prefix.clone()]);
        a
    }

    fn label(&self) -> String {
        match self {
            Step::Figure {
                experiment,
                figure,
                cases,
                ..
            } => format!("{experiment} {figure} ({} cases)", cases.len()),
            Step::Runner { name, .. } => name.clone(),
        }
    }
}

/// Waits for a step. A stop signal ([`crate::stop`]) to this process is passed on to the step
/// once, so that it stops after its current measurement and tears its testbed down (a Ctrl-C
/// already reached it through the terminal's process group). Every step stops so: the
/// experiment files' runs and the runners (congestion, adaptive, mdi, uplink-lb) alike.
fn wait_forwarding_stop(mut child: Child) -> anyhow::Result<ExitStatus> {
    let mut told = false;
    loop {
        if let Some(status) = child.try_wait().context("wait for the step")? {
            return Ok(status);
        }
        if let (Some(sig), false) = (crate::stop::requested(), told) {
            told = true;
            if let Ok(pid) = libc::pid_t::try_from(child.id()) {
                eprintln!("{sig}: stopping the running step after its current measurement ...");
                // SAFETY: kill(2) on our own child's PID, which is not reaped yet.
                unsafe {
                    libc::kill(pid, sig.number());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The campaign's record: runner experiments finished with at least `reps` repetitions.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
struct Progress {
    /// (name, repetitions) of every finished runner experiment.
    done: Vec<(String, u32)>,
}

impl Progress {
    fn load(out_dir: &Path) -> anyhow::Result<Progress> {
        let path = out_dir.join(PROGRESS);
        match std::fs::read_to_string(&path) {
            Ok(t) => serde_json::from_str(&t).with_context(|| format!("parse {}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Progress::default()),
            Err(e) => Err(e).with_context(|| format!("read {}", path.display())),
        }
    }

    fn save(&self, out_dir: &Path) -> anyhow::Result<()> {
        let path = out_dir.join(PROGRESS);
        std::fs::write(&path, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("write {}", path.display()))
    }

    fn has(&self, name: &str, reps: u32) -> bool {
        self.done.iter().any(|(n, r)| n == name && *r >= reps)
    }
}

/// The steps still to run and their estimates.
pub fn plan(o: &Options) -> anyhow::Result<Vec<Step>> {
    let reps = o.reps.max(1);
    let mut steps = Vec::new();
    for name in FILES {
        let exp = Experiment::load(&o.root, name)?;
        let old = if o.out_dir.join(format!("{name}.json")).exists() {
            Some(read_report(&o.out_dir, name)?)
        } else {
            None
        };
        let secs = o.secs.unwrap_or(exp.secs);
        for f in &exp.figures {
            let done: BTreeSet<u32> = old
                .iter()
                .flat_map(|r| r.figures.iter().filter(|rf| rf.id == f.id))
                .flat_map(|rf| rf.cases.iter())
                .filter(|c| {
                    c.ipomp.reps.len() >= reps as usize && c.baseline.reps.len() >= reps as usize
                })
                .map(|c| c.id)
                .collect();
            let todo: Vec<Case> = f
                .resolve()?
                .into_iter()
                .filter(|c| !done.contains(&c.id))
                .collect();
            if todo.is_empty() {
                continue;
            }
            let cases: Vec<u32> = todo.iter().map(|c| c.id).collect();
            let udp = f.udp_offered_mbit.is_some();
            let cases_secs: u64 = todo
                .iter()
                .map(|c| case_estimate_secs(secs, exp.omit_secs, reps, udp, c))
                .sum();
            // Table I's end-to-end MPTCP column: one more measurement per case on a 2x2 testbed.
            let e2e = if f.e2e_mptcp {
                SYSTEM_UP_SECS / 3 + u64::from(secs + 5)
            } else {
                0
            };
            let n = cases.len() as u64;
            steps.push(Step::Figure {
                experiment: name.to_owned(),
                figure: f.id.clone(),
                cases,
                est_secs: SYSTEM_UP_SECS + cases_secs + n * e2e,
            });
        }
    }
    let progress = if o.restart {
        Progress::default()
    } else {
        Progress::load(&o.out_dir)?
    };
    for (name, per, per_rep) in RUNNERS {
        let r = if per_rep { reps } else { 1 };
        if progress.has(name, r) {
            continue;
        }
        steps.push(Step::Runner {
            name: name.to_owned(),
            est_secs: per * u64::from(r),
        });
    }
    Ok(steps)
}

/// Prints the plan with its estimate, then runs it step by step with `xtask` (the path of the
/// running xtask binary), stopping at the first failed step (what finished stays written).
pub fn run(o: &Options, xtask: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(&o.out_dir)
        .with_context(|| format!("create {}", o.out_dir.display()))?;
    let steps = plan(o)?;
    let total: u64 = steps.iter().map(Step::est_secs).sum();
    println!(
        "experiment all: {} step(s), {} rep(s) per case, results in {}; expect about {} \
         (plus the first release build); 1-min load average now {:.2}",
        steps.len(),
        o.reps.max(1),
        o.out_dir.display(),
        fmt_duration(total),
        crate::sh::load_1min(),
    );
    for s in &steps {
        println!("  {:>8}  {}", fmt_duration(s.est_secs()), s.label());
    }
    if steps.is_empty() {
        println!("nothing to run: every case has its repetitions (--restart re-runs the runners)");
        return Ok(());
    }
    if o.dry_run {
        return Ok(());
    }
    let mut progress = if o.restart {
        Progress::default()
    } else {
        Progress::load(&o.out_dir)?
    };
    progress.save(&o.out_dir)?;
    crate::stop::install();
    let started = Instant::now();
    let mut left = total;
    for (i, s) in steps.iter().enumerate() {
        let args = s.args(o);
        println!(
            "==> [{}/{}] {} (about {}; {} left in all): xtask {}",
            i + 1,
            steps.len(),
            s.label(),
            fmt_duration(s.est_secs()),
            fmt_duration(left),
            args.join(" ")
        );
        let t = Instant::now();
        let child = Command::new(xtask)
            .args(&args)
            .current_dir(&o.root)
            .spawn()
            .with_context(|| format!("run {} {}", xtask.display(), args.join(" ")))?;
        let status = wait_forwarding_stop(child)?;
        if let Some(sig) = crate::stop::requested() {
            bail!(
                "stopped by {sig} during step {} ({status}); what finished is written, run \
                 `cargo xtask experiment all` again to resume",
                s.label()
            );
        }
        if !status.success() {
            bail!(
                "step {} failed ({status}); what finished is written, run `cargo xtask \
                 experiment all` again to resume",
                s.label()
            );
        }
        if let Step::Runner { name, .. } = s {
            let per_rep = RUNNERS.iter().any(|(n, _, p)| n == name && *p);
            progress
                .done
                .push((name.clone(), if per_rep { o.reps.max(1) } else { 1 }));
            progress.save(&o.out_dir)?;
        }
        left = left.saturating_sub(s.est_secs());
        println!(
            "==> {} done in {} (estimated {}); {} since the start",
            s.label(),
            fmt_duration(t.elapsed().as_secs()),
            fmt_duration(s.est_secs()),
            fmt_duration(started.elapsed().as_secs())
        );
    }
    println!(
        "experiment all: done in {}; the reports are {}/*.md",
        fmt_duration(started.elapsed().as_secs()),
        o.out_dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::{CaseResult, FigureResult, Report, Spread};

    fn opts(out: &Path, reps: u32) -> Options {
        Options {
            root: Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
            out_dir: out.to_path_buf(),
            reps,
            secs: None,
            prefix: "t".into(),
            dry_run: true,
            restart: false,
        }
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mms-all-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn result(figure: &str, id: u32, reps: usize) -> CaseResult {
        let exp = Experiment::load(&opts(Path::new("."), 1).root, "case-a").unwrap();
        let settings = exp
            .figures
            .iter()
            .find(|f| f.id == figure)
            .unwrap()
            .resolve()
            .unwrap()
            .into_iter()
            .find(|c| c.id == id)
            .unwrap();
        let s = Spread::of(&vec![10.0; reps]).unwrap();
        CaseResult {
            figure: figure.into(),
            id,
            ipomp_mbps: 10.0,
            baseline_mbps: 5.0,
            ratio: 2.0,
            paper_ipomp_mbps: None,
            paper_udp_mbps: None,
            paper_e2e_mptcp_mbps: None,
            ipomp: s.clone(),
            baseline: s,
            udp: None,
            e2e_mptcp_mbps: None,
            model_ipomp_mbps: 0.0,
            model_baseline_mbps: 0.0,
            settings,
        }
    }

    /// The runner experiments of a plan, in order.
    fn runners(steps: &[Step]) -> Vec<&str> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Runner { name, .. } => Some(name.as_str()),
                Step::Figure { .. } => None,
            })
            .collect()
    }

    #[test]
    fn a_fresh_campaign_plans_every_case_and_every_runner() {
        let out = tmp("fresh");
        let steps = plan(&opts(&out, 3)).unwrap();
        let figures: usize = steps
            .iter()
            .map(|s| match s {
                Step::Figure { cases, .. } => cases.len(),
                Step::Runner { .. } => 0,
            })
            .sum();
        let all: usize = FILES
            .iter()
            .map(|n| {
                let e = Experiment::load(&opts(&out, 1).root, n).unwrap();
                e.figures.iter().map(|f| f.cases.len()).sum::<usize>()
            })
            .sum();
        assert_eq!(figures, all);
        assert_eq!(
            runners(&steps),
            vec!["congestion", "adaptive", "mdi", "uplink-lb"]
        );
        // Three reps of every case take hours, not minutes: the estimate says so up front.
        let total: u64 = steps.iter().map(Step::est_secs).sum();
        assert!(total > 3 * 3600, "{total} s");
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn cases_with_enough_repetitions_are_not_run_again() {
        let out = tmp("resume");
        let report = Report {
            name: "case-a".into(),
            title: "t".into(),
            started: "now".into(),
            duration_secs: 1.0,
            secs: 8,
            omit_secs: 2,
            reps: 3,
            machine: Default::default(),
            figures: vec![FigureResult {
                id: "fig10c".into(),
                title: "t".into(),
                table: "III(b)".into(),
                // Cases 1 and 2 with 3 reps, case 3 with only 1.
                cases: vec![
                    result("fig10c", 1, 3),
                    result("fig10c", 2, 3),
                    result("fig10c", 3, 1),
                ],
            }],
            merged_runs: Vec::new(),
        };
        std::fs::write(
            out.join("case-a.json"),
            serde_json::to_string(&report).unwrap(),
        )
        .unwrap();
        Progress {
            done: vec![("congestion".into(), 1), ("mdi".into(), 1)],
        }
        .save(&out)
        .unwrap();
        let o = opts(&out, 3);
        let steps = plan(&o).unwrap();
        let fig10c = steps
            .iter()
            .find(|s| matches!(s, Step::Figure { figure, .. } if figure == "fig10c"))
            .unwrap();
        let Step::Figure { cases, .. } = fig10c else {
            unreachable!()
        };
        assert_eq!(cases.first(), Some(&3), "cases 1 and 2 are done");
        assert!(!cases.contains(&1) && !cases.contains(&2));
        let args = fig10c.args(&o).join(" ");
        assert!(
            args.starts_with("experiment case-a --figures fig10c --cases 3-10 --merge --reps 3"),
            "{args}"
        );
        // congestion (no reps) is done; mdi was run with 1 rep, 3 are asked: it runs again.
        assert_eq!(runners(&steps), vec!["adaptive", "mdi", "uplink-lb"]);
        // --restart forgets the runners' record.
        let again = plan(&Options {
            restart: true,
            ..o.clone()
        })
        .unwrap();
        assert!(again
            .iter()
            .any(|s| matches!(s, Step::Runner { name, .. } if name == "congestion")));
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn case_lists_are_compact() {
        use super::super::def::case_list;
        assert_eq!(case_list(&[1, 2, 3, 7, 9, 10]), "1-3,7,9-10");
        assert_eq!(case_list(&[4]), "4");
        assert_eq!(case_list(&[]), "");
    }
}
