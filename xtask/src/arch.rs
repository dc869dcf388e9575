//! `cargo xtask arch`: the structure of the workspace as the code states it, and the two rules
//! the architecture keeps (docs/ARCHITECTURE.md "Rules").
//!
//! 1. Inside a crate, dependencies between files run one way: no file imports a file that
//!    (directly or through others) imports it back. An import is any `crate::`, `super::` or
//!    `self::` path outside test code, `use` lists included; `mod x;` declarations are not
//!    imports. A circle is a strongly connected component of more than one file.
//! 2. No source file holds more than [`MAX_LINES`] lines of non-test code unless its `//!`
//!    doc says why, in a line that starts with [`LONG_FILE_MARK`].
//!
//! The reader works on text (no compiler): it is exact for the way this workspace writes
//! paths, and its unit tests pin the forms it understands. Test code is left out: files named
//! `tests.rs` / `tests_*.rs` and everything from a top-level `#[cfg(test)]` on.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// Most lines of non-test code in one file (the architecture issue's "~800").
pub const MAX_LINES: usize = 800;

/// A `//!` line starting with this explains why a file is longer than [`MAX_LINES`].
pub const LONG_FILE_MARK: &str = "//! Why this file is long:";

/// One source file of a crate.
#[derive(Debug, Clone)]
pub struct FileInfo {
    /// Path relative to the workspace root.
    pub path: PathBuf,
    /// Module path inside the crate (`tunnel::outbound`; empty for the crate root).
    pub module: Vec<String>,
    /// Lines of non-test code.
    pub code_lines: usize,
    /// Whether the doc says why the file is long.
    pub long_ok: bool,
    /// The first sentence of its `//!` doc.
    pub summary: String,
    /// The other files of the crate this one imports (indices into [`Crate::files`]).
    pub imports: BTreeSet<usize>,
}

/// One crate (or binary root) and its files.
#[derive(Debug, Clone)]
pub struct Crate {
    /// `crates/mpa`, `xtask`, ...
    pub dir: PathBuf,
    /// Its source files.
    pub files: Vec<FileInfo>,
}

/// The workspace as read.
#[derive(Debug, Clone)]
pub struct Report {
    /// Every crate.
    pub crates: Vec<Crate>,
}

impl Report {
    /// Files in circles, per crate: each circle's file paths.
    pub fn circles(&self) -> Vec<Vec<PathBuf>> {
        let mut out = Vec::new();
        for c in &self.crates {
            for scc in strongly_connected(&c.files) {
                if scc.len() > 1 {
                    let mut paths: Vec<PathBuf> = scc
                        .iter()
                        .filter_map(|&i| c.files.get(i))
                        .map(|f| f.path.clone())
                        .collect();
                    paths.sort();
                    out.push(paths);
                }
            }
        }
        out
    }

    /// Files over [`MAX_LINES`] lines of non-test code without a reason in their doc.
    pub fn long_files(&self) -> Vec<(PathBuf, usize)> {
        self.crates
            .iter()
            .flat_map(|c| c.files.iter())
            .filter(|f| f.code_lines > MAX_LINES && !f.long_ok)
            .map(|f| (f.path.clone(), f.code_lines))
            .collect()
    }

    /// One markdown table per crate: every module and the first sentence of its doc (the module
    /// list of docs/ARCHITECTURE.md, checked against the tree by a test).
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        for c in &self.crates {
            let _ = writeln!(s, "\n#### `{}`\n", c.dir.display());
            let _ = writeln!(s, "| module | what it is |\n|---|---|");
            let mut files: Vec<&FileInfo> = c.files.iter().collect();
            files.sort_by_key(|f| f.path.clone());
            for f in files {
                let _ = writeln!(s, "| `{}` | {} |", f.path.display(), f.summary);
            }
        }
        s
    }

    /// The human-readable sheet: per crate, its files from the top floor down (a file's floor is
    /// one above the highest file it imports), then circles and long files.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for c in &self.crates {
            let floors = floors(&c.files);
            let _ = writeln!(s, "{}", c.dir.display());
            let mut order: Vec<usize> = (0..c.files.len()).collect();
            order.sort_by_key(|&i| {
                (
                    std::cmp::Reverse(floors.get(i).copied().unwrap_or(0)),
                    c.files.get(i).map(|f| f.path.clone()),
                )
            });
            for i in order {
                let Some(f) = c.files.get(i) else { continue };
                let name = module_name(&f.module);
                let imports: Vec<String> = f
                    .imports
                    .iter()
                    .filter_map(|&j| c.files.get(j))
                    .map(|g| module_name(&g.module))
                    .collect();
                let _ = writeln!(
                    s,
                    "  floor {:>2}  {:<28} {:>5} lines  -> {}",
                    floors.get(i).copied().unwrap_or(0),
                    name,
                    f.code_lines,
                    if imports.is_empty() {
                        "-".to_owned()
                    } else {
                        imports.join(", ")
                    }
                );
            }
        }
        let circles = self.circles();
        let _ = writeln!(s, "circles: {}", circles.len());
        for c in &circles {
            let names: Vec<String> = c.iter().map(|p| p.display().to_string()).collect();
            let _ = writeln!(s, "  {}", names.join(" <-> "));
        }
        let long = self.long_files();
        let _ = writeln!(
            s,
            "files over {MAX_LINES} lines of non-test code without a reason: {}",
            long.len()
        );
        for (p, n) in &long {
            let _ = writeln!(s, "  {} ({n})", p.display());
        }
        s
    }
}

/// The first sentence of a file's `//!` doc (up to the first `. ` or the end of the paragraph).
fn first_sentence(text: &str) -> String {
    let mut para = String::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("//!") else {
            if para.is_empty() && line.trim().is_empty() {
                continue;
            }
            break;
        };
        let rest = rest.trim();
        if rest.is_empty() {
            if para.is_empty() {
                continue;
            }
            break;
        }
        if !para.is_empty() {
            para.push(' ');
        }
        para.push_str(rest);
    }
    let mut end = para.len();
    let bytes = para.as_bytes();
    for (i, w) in bytes.windows(2).enumerate() {
        let before = para.get(..i).unwrap_or("");
        let abbrev = ["e.g", "i.e", "etc", "cf", "vs", "Fig", "Eq", "no"]
            .iter()
            .any(|a| before.ends_with(a));
        if w == b". " && !abbrev {
            end = i + 1;
            break;
        }
    }
    para.get(..end).unwrap_or(&para).replace('|', "\\|")
}

fn module_name(m: &[String]) -> String {
    if m.is_empty() {
        "(crate root)".to_owned()
    } else {
        m.join("::")
    }
}

/// Reads every crate under `root/crates/*` and `root/xtask`.
pub fn read(root: &Path) -> anyhow::Result<Report> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .context("read crates/")?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("src").is_dir())
        .collect();
    dirs.push(root.join("xtask"));
    dirs.sort();
    let mut crates = Vec::new();
    for dir in dirs {
        let rel = dir.strip_prefix(root).unwrap_or(&dir).to_path_buf();
        // The library and each binary root are separate crates sharing a folder.
        for (root_file, files) in crate_roots(&dir.join("src"))? {
            let mut infos = Vec::new();
            for file in files {
                let text = std::fs::read_to_string(&file)
                    .with_context(|| format!("read {}", file.display()))?;
                let module = module_path(&dir.join("src"), &root_file, &file);
                let code = non_test_code(&text);
                infos.push((file, module, code, text));
            }
            let index: BTreeMap<Vec<String>, usize> = infos
                .iter()
                .enumerate()
                .map(|(i, (_, m, _, _))| (m.clone(), i))
                .collect();
            let reexported: Vec<BTreeMap<String, Vec<String>>> = infos
                .iter()
                .map(|(_, module, code, _)| reexports(code, module))
                .collect();
            let files = infos
                .iter()
                .enumerate()
                .map(|(i, (file, module, code, text))| {
                    let imports = import_paths(code, module, is_dir_module(file))
                        .into_iter()
                        .filter_map(|p| resolve(&index, &reexported, &p))
                        .filter(|&j| j != i)
                        .collect();
                    FileInfo {
                        path: file.strip_prefix(root).unwrap_or(file).to_path_buf(),
                        module: module.clone(),
                        code_lines: code.lines().filter(|l| !l.trim().is_empty()).count(),
                        long_ok: text.lines().any(|l| l.starts_with(LONG_FILE_MARK)),
                        summary: first_sentence(text),
                        imports,
                    }
                })
                .collect();
            crates.push(Crate {
                dir: rel.join(root_file.file_name().unwrap_or_default()),
                files,
            });
        }
    }
    Ok(Report { crates })
}

/// The crate roots of a `src` folder (`lib.rs`, `main.rs`, `bin/*.rs`) and the files of each.
/// A file belongs to the library when the library can reach it, else to `main.rs`.
fn crate_roots(src: &Path) -> anyhow::Result<Vec<(PathBuf, Vec<PathBuf>)>> {
    let mut all = Vec::new();
    collect_rs(src, &mut all)?;
    all.retain(|p| !is_test_file(p));
    all.sort();
    let lib = src.join("lib.rs");
    let main = src.join("main.rs");
    let bins: Vec<PathBuf> = all
        .iter()
        .filter(|p| p.parent() == Some(&src.join("bin")))
        .cloned()
        .collect();
    let mut out = Vec::new();
    if lib.exists() {
        let files: Vec<PathBuf> = all
            .iter()
            .filter(|p| **p != main && !bins.contains(p))
            .cloned()
            .collect();
        out.push((lib.clone(), files));
        if main.exists() {
            out.push((main.clone(), vec![main]));
        }
    } else if main.exists() {
        let files: Vec<PathBuf> = all.iter().filter(|p| !bins.contains(p)).cloned().collect();
        out.push((main, files));
    }
    for b in bins {
        out.push((b.clone(), vec![b]));
    }
    Ok(out)
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for e in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let p = e?.path();
        if p.is_dir() {
            collect_rs(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    Ok(())
}

fn is_test_file(p: &Path) -> bool {
    let name = p.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    name == "tests"
        || name.starts_with("tests_")
        || p.components().any(|c| c.as_os_str() == "tests")
}

fn is_dir_module(p: &Path) -> bool {
    matches!(
        p.file_name().and_then(|s| s.to_str()),
        Some("mod.rs" | "lib.rs" | "main.rs")
    )
}

/// `src/tunnel/outbound.rs` → `["tunnel", "outbound"]`; `src/tunnel/mod.rs` → `["tunnel"]`.
fn module_path(src: &Path, root_file: &Path, file: &Path) -> Vec<String> {
    if file == root_file {
        return Vec::new();
    }
    let rel = file.strip_prefix(src).unwrap_or(file);
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        if last != "mod.rs" {
            parts.push(last.trim_end_matches(".rs").to_owned());
        }
    }
    if parts.first().is_some_and(|p| p == "bin") {
        parts.clear();
    }
    parts
}

/// The text before the first top-level `#[cfg(test)]` (test modules stand at the end of files
/// here), without comment lines.
fn non_test_code(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let t = line.trim_start();
        if t.starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Every absolute module path named by `crate::`, `super::` and `self::` paths in `code` (with
/// `use` lists expanded), relative to `module` (`dir_module`: the file is `mod.rs`/root, so
/// `super` is the parent of `module` itself).
fn import_paths(code: &str, module: &[String], dir_module: bool) -> Vec<Vec<String>> {
    import_items(code, module, dir_module)
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

/// The names a file re-exports (`pub use a::B;`, `pub use a::B as C;`) and what they name.
fn reexports(code: &str, module: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for stmt in code.split(';') {
        let t = stmt.trim();
        let Some(rest) = t
            .strip_prefix("pub use ")
            .or_else(|| t.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        // Children named without `self::` are found by import_items from the `mod` lines.
        let mods: String = code
            .lines()
            .filter(|l| {
                l.trim_start().starts_with("mod ") || l.trim_start().starts_with("pub mod ")
            })
            .map(|l| format!("{l}\n"))
            .collect();
        for (path, alias) in import_items(&format!("{mods}{rest}"), module, false) {
            if let Some(name) = alias.or_else(|| path.last().cloned()) {
                out.insert(name, path);
            }
        }
    }
    out
}

/// Like [`import_paths`], with the `as` alias of each path.
fn import_items(
    code: &str,
    module: &[String],
    dir_module: bool,
) -> Vec<(Vec<String>, Option<String>)> {
    // `mod x;` children may be named without `self::` (2018 paths): `pub use x::Y`.
    let children: Vec<String> = code
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l
                .strip_prefix("pub ")
                .or_else(|| l.strip_prefix("pub(crate) "))
                .unwrap_or(l);
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(format!("{name}::"))
        })
        .collect();
    let mut out = Vec::new();
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let rest: String = bytes
            .get(i..(i + 40).min(bytes.len()))
            .unwrap_or(&[])
            .iter()
            .collect();
        let start_ok = i == 0
            || !bytes
                .get(i - 1)
                .is_some_and(|c| c.is_alphanumeric() || *c == '_' || *c == ':');
        let head = ["crate::", "super::", "self::"]
            .into_iter()
            .map(str::to_owned)
            .chain(children.iter().cloned())
            .find(|h| rest.starts_with(h.as_str()));
        if let (true, Some(h)) = (start_ok, head) {
            // Take the whole path expression, braces included.
            let mut j = i;
            let mut depth = 0i32;
            while let Some(&c) = bytes.get(j) {
                if c == '{' {
                    depth += 1;
                } else if c == '}' {
                    if depth == 0 {
                        break;
                    }
                    depth -= 1;
                } else if depth == 0 && !(c.is_alphanumeric() || c == '_' || c == ':') {
                    break;
                }
                j += 1;
            }
            let expr: String = bytes.get(i..j).unwrap_or(&[]).iter().collect();
            let expr = if children.contains(&h) {
                format!("self::{expr}")
            } else {
                expr
            };
            for p in expand(&expr) {
                let (p, alias) = match p.split_once('@') {
                    Some((p, a)) => (p.to_owned(), Some(a.to_owned())),
                    None => (p, None),
                };
                let segs: Vec<&str> = p.split("::").filter(|s| !s.is_empty()).collect();
                if let Some(abs) = absolute(&segs, module, dir_module) {
                    out.push((abs, alias));
                }
            }
            i = j.max(i + h.len());
        } else {
            i += 1;
        }
    }
    out
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand(expr: &str) -> Vec<String> {
    let expr = expr.replace(" as ", "@");
    let expr: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = expr.find('{') else {
        return vec![expr];
    };
    let prefix = expr.get(..open).unwrap_or("");
    let inner = expr
        .get(open + 1..expr.rfind('}').unwrap_or(expr.len()))
        .unwrap_or("");
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in inner.chars() {
        match c {
            '{' => {
                depth += 1;
                cur.push(c);
            }
            '}' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => parts.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    parts.push(cur);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(|p| {
            let p = if p == "self" { String::new() } else { p };
            expand(&format!("{prefix}{p}"))
        })
        .collect()
}

fn absolute(segs: &[&str], module: &[String], dir_module: bool) -> Option<Vec<String>> {
    let (first, rest) = segs.split_first()?;
    let mut base: Vec<String> = match *first {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => {
            let mut m = module.to_vec();
            let _ = dir_module;
            m.pop()?;
            m
        }
        _ => return None,
    };
    let mut rest = rest;
    while let Some((s, tail)) = rest.split_first() {
        if *s == "super" {
            base.pop()?;
            rest = tail;
        } else {
            break;
        }
    }
    base.extend(rest.iter().map(|s| (*s).to_owned()));
    Some(base)
}

/// The file of the longest module prefix of `path`.
/// A name a module re-exports resolves to the file that defines it (so a `mod.rs` facade that
/// re-exports its children is not a circle with them).
fn resolve(
    index: &BTreeMap<Vec<String>, usize>,
    reexports: &[BTreeMap<String, Vec<String>>],
    path: &[String],
) -> Option<usize> {
    let mut path = path.to_vec();
    for _ in 0..8 {
        let (n, file) = (0..=path.len())
            .rev()
            .find_map(|n| Some((n, *index.get(path.get(..n)?)?)))?;
        let next = path
            .get(n)
            .and_then(|name| reexports.get(file)?.get(name))
            .filter(|target| **target != path);
        match next {
            Some(target) => path = target.clone(),
            None => return Some(file),
        }
    }
    None
}

/// Tarjan's strongly connected components.
// Every index is a file index below `files.len()`, the length of each Vec it indexes: imports
// are built from the same `infos` list (invariant of `read`).
#[allow(clippy::indexing_slicing)]
fn strongly_connected(files: &[FileInfo]) -> Vec<Vec<usize>> {
    struct State<'a> {
        files: &'a [FileInfo],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        let edges: Vec<usize> = s.files[v].imports.iter().copied().collect();
        for w in edges {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                scc.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(scc);
        }
    }
    let n = files.len();
    let mut s = State {
        files,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

/// Floor of each file: 1 + the highest floor it imports (files in a circle share one floor).
fn floors(files: &[FileInfo]) -> Vec<usize> {
    let mut floor = vec![1usize; files.len()];
    // Relax up to n times: enough for any acyclic graph, bounded for cyclic ones.
    for _ in 0..files.len() {
        let mut changed = false;
        for (i, f) in files.iter().enumerate() {
            let want = f
                .imports
                .iter()
                .filter_map(|&j| floor.get(j))
                .max()
                .map_or(1, |m| m + 1)
                .min(files.len());
            if floor.get(i).is_some_and(|&have| want > have) {
                if let Some(x) = floor.get_mut(i) {
                    *x = want;
                }
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    floor
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn use_lists_expand() {
        let mut got = expand("crate::a::{B, c::{D, self}, e}");
        got.sort();
        assert_eq!(
            got,
            [
                "crate::a::B",
                "crate::a::c::",
                "crate::a::c::D",
                "crate::a::e"
            ]
        );
    }

    #[test]
    fn paths_resolve_relative_to_the_module() {
        let code = "mod child;\nuse crate::stats::{Stats, StatusReport};\nuse super::shared::Shared;\nlet x = self::inner::f();\nfoo_crate::bar();\npub use child::C;\n";
        let got = import_paths(code, &s(&["tunnel", "outbound"]), false);
        assert!(got.contains(&s(&["stats", "Stats"])), "{got:?}");
        assert!(got.contains(&s(&["tunnel", "shared", "Shared"])), "{got:?}");
        assert!(
            got.contains(&s(&["tunnel", "outbound", "inner", "f"])),
            "{got:?}"
        );
        assert!(
            got.contains(&s(&["tunnel", "outbound", "child", "C"])),
            "{got:?}"
        );
        assert_eq!(got.len(), 5, "{got:?}");
    }

    #[test]
    fn test_code_is_left_out() {
        let code = non_test_code("use crate::a::X;\n// use crate::b::Y;\n#[cfg(test)]\nmod tests {\n use crate::c::Z;\n}\n");
        assert_eq!(code, "use crate::a::X;\n");
    }

    fn file(module: &[&str], imports: &[usize]) -> FileInfo {
        FileInfo {
            path: PathBuf::from(module.join("/")),
            module: s(module),
            code_lines: 1,
            long_ok: false,
            imports: imports.iter().copied().collect(),
            summary: String::new(),
        }
    }

    #[test]
    fn circles_and_floors() {
        // a -> b -> c -> b (circle b, c); d alone.
        let files = vec![
            file(&["a"], &[1]),
            file(&["b"], &[2]),
            file(&["c"], &[1]),
            file(&["d"], &[]),
        ];
        let report = Report {
            crates: vec![Crate {
                dir: "x".into(),
                files: files.clone(),
            }],
        };
        assert_eq!(
            report.circles(),
            vec![vec![PathBuf::from("b"), PathBuf::from("c")]]
        );
        let acyclic = vec![
            file(&["a"], &[1]),
            file(&["b"], &[2]),
            file(&["c"], &[]),
            file(&["d"], &[]),
        ];
        assert_eq!(floors(&acyclic), vec![3, 2, 1, 1]);
    }

    #[test]
    fn first_sentences() {
        assert_eq!(
            first_sentence("//! The TC (seed 000 §II-A, e.g. Fig. 4). It classifies.\n//! More.\n"),
            "The TC (seed 000 §II-A, e.g. Fig. 4)."
        );
        assert_eq!(
            first_sentence("//! One\n//! line\n//!\n//! Next."),
            "One line"
        );
    }

    /// docs/ARCHITECTURE.md lists every module of the tree, and nothing else.
    #[test]
    fn the_architecture_page_lists_every_module() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let report = read(&root).unwrap();
        let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
        let listed: BTreeSet<String> = doc
            .lines()
            .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
            .filter(|p| p.ends_with(".rs"))
            .map(str::to_owned)
            .collect();
        let tree: BTreeSet<String> = report
            .crates
            .iter()
            .flat_map(|c| c.files.iter())
            .map(|f| f.path.display().to_string())
            .collect();
        let missing: Vec<&String> = tree.difference(&listed).collect();
        let stale: Vec<&String> = listed.difference(&tree).collect();
        assert!(
            missing.is_empty() && stale.is_empty(),
            "docs/ARCHITECTURE.md: modules missing {missing:?}, listed but gone {stale:?} \
             (`cargo xtask arch --markdown` prints the tables)"
        );
    }

    /// The rules of docs/ARCHITECTURE.md hold for the whole workspace.
    #[test]
    fn the_workspace_keeps_its_rules() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let report = read(&root).unwrap();
        assert!(
            report.crates.len() >= 7,
            "read {} crates",
            report.crates.len()
        );
        assert!(
            report.crates.iter().map(|c| c.files.len()).sum::<usize>() > 100,
            "the reader found too few files"
        );
        assert_eq!(
            report.circles(),
            Vec::<Vec<PathBuf>>::new(),
            "\n{}",
            report.render()
        );
        assert_eq!(
            report.long_files(),
            Vec::<(PathBuf, usize)>::new(),
            "\n{}",
            report.render()
        );
    }
}
