//! The Debian packages of `cargo xtask dist` (docs/install.md): `mms-gateway` (mmsg) and
//! `mms-controller` (ssc), staged from `packaging/<package>/` and built with `dpkg-deb` (Debian's
//! own tool; no cargo-deb install in CI). Then every package is checked from the outside:
//! `dpkg-deb --info` lists the maintainer scripts and conffiles, `--contents` the binary, unit,
//! config, man pages and completions; the package is unpacked into a throw-away root
//! (`dpkg-deb -x`), and `systemd-analyze verify` checks the unit against the unpacked binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{ensure, Context};

use crate::dist_bin::Binary;

/// One package as built.
#[derive(Debug, Clone)]
pub struct Package {
    /// Debian package name.
    pub name: &'static str,
    /// The `.deb`.
    pub deb: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// The throw-away root it was unpacked into.
    pub root: PathBuf,
}

/// A package: its name, the binary it carries, its unit and its config (a conffile).
struct Spec {
    name: &'static str,
    bin: &'static str,
    unit: &'static str,
    config: &'static str,
    /// Most `systemd-analyze security` exposure allowed, in tenths (4.0 was measured for mmsg,
    /// 1.5 for ssc; a unit that loses hardening fails the check).
    exposure_max_tenths: u32,
}

const SPECS: [Spec; 2] = [
    Spec {
        name: "mms-gateway",
        bin: "mmsg",
        unit: "mmsg.service",
        config: "mmsg.toml",
        exposure_max_tenths: 45,
    },
    Spec {
        name: "mms-controller",
        bin: "ssc",
        unit: "ssc.service",
        config: "ssc.toml",
        exposure_max_tenths: 20,
    },
];

/// Where the unit goes (Debian 12 keeps packaged units in /lib/systemd/system).
const UNIT_DIR: &str = "lib/systemd/system";

/// Stages, builds and checks both packages.
pub fn build_all(root: &Path, out: &Path, bins: &[Binary]) -> anyhow::Result<Vec<Package>> {
    let mut v = Vec::new();
    for spec in &SPECS {
        let bin = bins
            .iter()
            .find(|b| b.name == spec.bin)
            .with_context(|| format!("no {} binary", spec.bin))?;
        let deb = build(root, out, spec, bin)?;
        v.push(check(out, spec, deb)?);
    }
    Ok(v)
}

fn copy(from: &Path, to: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(d) = to.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
    }
    std::fs::copy(from, to)
        .with_context(|| format!("copy {} to {}", from.display(), to.display()))?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", to.display()))
}

/// Stages `spec` in `out/stage/<name>` and runs `dpkg-deb --build`.
fn build(root: &Path, out: &Path, spec: &Spec, bin: &Binary) -> anyhow::Result<PathBuf> {
    let src = root.join("packaging").join(spec.name);
    let stage = out.join("stage").join(spec.name);
    if stage.exists() {
        std::fs::remove_dir_all(&stage).with_context(|| format!("clean {}", stage.display()))?;
    }
    copy(&bin.path, &stage.join("usr/bin").join(spec.bin), 0o755)?;
    copy(
        &src.join(spec.unit),
        &stage.join(UNIT_DIR).join(spec.unit),
        0o644,
    )?;
    copy(
        &src.join(spec.config),
        &stage.join("etc/mms").join(spec.config),
        0o644,
    )?;
    let doc = stage.join("usr/share/doc").join(spec.name);
    copy(
        &root.join("docs/install.md"),
        &doc.join("install.md"),
        0o644,
    )?;
    copy(&root.join("docs/ops.md"), &doc.join("ops.md"), 0o644)?;
    copy(&root.join("CHANGELOG.md"), &doc.join("CHANGELOG.md"), 0o644)?;
    // Man pages, gzipped as Debian ships them (-n: no name or time stamp, reproducible).
    let man_dir = stage.join("usr/share/man/man1");
    for e in std::fs::read_dir(bin.assets.join("man")).context("read the man pages")? {
        let p = e?.path();
        let name = p.file_name().context("man page name")?.to_string_lossy();
        let gz = man_dir.join(format!("{name}.gz"));
        copy(&p, &man_dir.join(&*name), 0o644)?;
        crate::sh::run("gzip", &["-9nf", &man_dir.join(&*name).to_string_lossy()])?;
        ensure!(gz.exists(), "gzip made no {}", gz.display());
    }
    let comp = bin.assets.join("completions");
    let b = spec.bin;
    for (from, to) in [
        (
            format!("{b}.bash"),
            format!("usr/share/bash-completion/completions/{b}"),
        ),
        (
            format!("_{b}"),
            format!("usr/share/zsh/vendor-completions/_{b}"),
        ),
        (
            format!("{b}.fish"),
            format!("usr/share/fish/vendor_completions.d/{b}.fish"),
        ),
    ] {
        copy(&comp.join(from), &stage.join(to), 0o644)?;
    }
    // DEBIAN/: control with version and size, conffiles, maintainer scripts, md5sums.
    let installed_kib = crate::sh::run("du", &["-sk", &stage.to_string_lossy()])?
        .split_whitespace()
        .next()
        .unwrap_or("0")
        .to_owned();
    let control = std::fs::read_to_string(src.join("control"))
        .context("read packaging control")?
        .replace("@VERSION@", env!("CARGO_PKG_VERSION"))
        .replace("@SIZE@", &installed_kib);
    let debian = stage.join("DEBIAN");
    std::fs::create_dir_all(&debian).context("create DEBIAN")?;
    std::fs::write(debian.join("control"), control).context("write DEBIAN/control")?;
    copy(&src.join("conffiles"), &debian.join("conffiles"), 0o644)?;
    for s in ["postinst", "prerm", "postrm"] {
        copy(&src.join(s), &debian.join(s), 0o755)?;
    }
    let md5 = Command::new("sh")
        .arg("-c")
        .arg("find . -path ./DEBIAN -prune -o -type f -printf '%P\\0' | LC_ALL=C sort -z | xargs -0 md5sum")
        .current_dir(&stage)
        .output()
        .context("md5sum")?;
    ensure!(md5.status.success(), "md5sum failed");
    std::fs::write(debian.join("md5sums"), &md5.stdout).context("write DEBIAN/md5sums")?;
    let deb = out.join(format!(
        "{}_{}_amd64.deb",
        spec.name,
        env!("CARGO_PKG_VERSION")
    ));
    crate::sh::run(
        "dpkg-deb",
        &[
            "--root-owner-group",
            "--build",
            &stage.to_string_lossy(),
            &deb.to_string_lossy(),
        ],
    )?;
    Ok(deb)
}

/// Lists and checks one package; unpacks it into `out/root` and verifies its unit there.
fn check(out: &Path, spec: &Spec, deb: PathBuf) -> anyhow::Result<Package> {
    let d = deb.to_string_lossy().into_owned();
    let info = crate::sh::run("dpkg-deb", &["--info", &d])?;
    println!("==> dpkg-deb --info {d}\n{info}");
    for want in [
        "control",
        "conffiles",
        "postinst",
        "prerm",
        "postrm",
        "md5sums",
    ] {
        ensure!(info.contains(want), "{d}: no {want} in dpkg-deb --info");
    }
    ensure!(
        info.contains(&format!("Package: {}", spec.name)),
        "{d}: wrong Package"
    );
    let contents = crate::sh::run("dpkg-deb", &["--contents", &d])?;
    println!("==> dpkg-deb --contents {d}\n{contents}");
    let b = spec.bin;
    for want in [
        format!("./usr/bin/{b}"),
        format!("./{UNIT_DIR}/{}", spec.unit),
        format!("./etc/mms/{}", spec.config),
        format!("./usr/share/man/man1/{b}.1.gz"),
        format!("./usr/share/bash-completion/completions/{b}"),
        format!("./usr/share/zsh/vendor-completions/_{b}"),
        format!("./usr/share/fish/vendor_completions.d/{b}.fish"),
        format!("./usr/share/doc/{}/install.md", spec.name),
        format!("./usr/share/doc/{}/ops.md", spec.name),
    ] {
        ensure!(
            contents.lines().any(|l| l.ends_with(&want)),
            "{d}: {want} is not in the package"
        );
    }
    ensure!(
        contents.lines().any(
            |l| l.starts_with("-rwxr-xr-x root/root") && l.ends_with(&format!("./usr/bin/{b}"))
        ),
        "{d}: /usr/bin/{b} is not root-owned 0755"
    );
    let root = out.join("root");
    crate::sh::run("dpkg-deb", &["-x", &d, &root.to_string_lossy()])?;
    crate::dist_bin::check_static(&root.join("usr/bin").join(b))?;
    verify_unit(out, &root, spec)?;
    Ok(Package {
        name: spec.name,
        size: std::fs::metadata(&deb).context("stat .deb")?.len(),
        deb,
        root,
    })
}

/// `systemd-analyze verify` on the unpacked unit (Debian's systemd; [`crate::deps`] installs
/// it). `--root` would need a whole system in the root (sysinit.target, /bin/kill), so the
/// unit is verified against the host's systemd with its `/usr/bin/<bin>` pointed at the
/// unpacked binary (a copy in `out/verify`, same unit name) and `MANPATH` at the unpacked man
/// pages (the `Documentation=man:` check). It must print nothing.
fn verify_unit(out: &Path, root: &Path, spec: &Spec) -> anyhow::Result<()> {
    let unit = std::fs::read_to_string(root.join(UNIT_DIR).join(spec.unit))
        .context("read the unpacked unit")?;
    let from = format!("/usr/bin/{}", spec.bin);
    ensure!(
        unit.contains(&format!("ExecStart={from} ")),
        "{}: ExecStart is not {from}",
        spec.unit
    );
    let bin = root.join("usr/bin").join(spec.bin);
    let dir = out.join("verify");
    std::fs::create_dir_all(&dir).context("create verify dir")?;
    let path = dir.join(spec.unit);
    std::fs::write(&path, unit.replace(&from, &bin.display().to_string()))
        .context("write the unit copy")?;
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .env("MANPATH", root.join("usr/share/man"))
        .env("SYSTEMD_LOG_LEVEL", "notice")
        .output()
        .context("run systemd-analyze verify")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!(
        "==> systemd-analyze verify {}: {}",
        spec.unit,
        if text.trim().is_empty() {
            "clean"
        } else {
            text.trim()
        }
    );
    ensure!(
        out.status.success() && text.trim().is_empty(),
        "systemd-analyze verify {}: {text}",
        spec.unit
    );
    // The hardening as systemd scores it (0 = fully sandboxed, 10 = none).
    let sec = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--no-pager"])
        .arg(format!("--threshold={}", spec.exposure_max_tenths))
        .arg(&path)
        .output()
        .context("run systemd-analyze security")?;
    let text = String::from_utf8_lossy(&sec.stdout);
    let summary = text.lines().last().unwrap_or_default();
    println!("==> systemd-analyze security {}: {summary}", spec.unit);
    ensure!(
        sec.status.success(),
        "{}: exposure above {:.1}: {summary}",
        spec.unit,
        f64::from(spec.exposure_max_tenths) / 10.0
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packaging(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../packaging")
            .join(name)
    }

    /// Every package has its files; the conffile is the config the unit runs with; the
    /// maintainer scripts never write a config.
    #[test]
    fn packaging_files_agree_with_each_other() {
        for spec in &SPECS {
            let dir = packaging(spec.name);
            let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
            let control = read("control");
            assert!(control.contains(&format!("Package: {}\n", spec.name)));
            assert!(control.contains("@VERSION@") && control.contains("@SIZE@"));
            let config = format!("/etc/mms/{}", spec.config);
            assert_eq!(read("conffiles").trim(), config);
            let unit = read(spec.unit);
            assert!(unit.contains(&format!(
                "ExecStart=/usr/bin/{} run --config {config}\n",
                spec.bin
            )));
            assert!(unit.contains("Type=notify\n"));
            assert!(unit.contains("CapabilityBoundingSet="));
            assert!(std::fs::metadata(dir.join(spec.config)).is_ok());
            for s in ["postinst", "prerm", "postrm"] {
                let script = read(s);
                assert!(script.starts_with("#!/bin/sh\n"), "{s}");
                assert!(
                    !script.contains(&format!("> {config}")),
                    "{s} writes the config"
                );
                assert!(
                    !script.contains(&format!(">{config}")),
                    "{s} writes the config"
                );
            }
        }
    }
}
