//! Every `examples/ssc*.toml` parses, and unknown keys are rejected at every level (STYLE §8).
// Test helpers outside #[test] functions unwrap too (clippy.toml only covers #[test] bodies).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
use std::path::{Path, PathBuf};

use controller::ui::config::Config;

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("ssc") && name.ends_with(".toml")
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no examples/ssc*.toml");
    files
}

#[test]
fn every_example_parses() {
    for path in examples() {
        let config = Config::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // Relative paths are resolved against the file's directory.
        assert!(config.database.path.starts_with(path.parent().unwrap()));
    }
}

#[test]
fn unknown_keys_are_rejected_everywhere() {
    for path in examples() {
        let text = std::fs::read_to_string(&path).unwrap();
        // At the top level (before the first table) and inside every table.
        let mut variants = vec![format!("bogus_key = 1\n{text}")];
        for table in ["[api]", "[database]"] {
            if text.contains(table) {
                variants.push(text.replace(table, &format!("{table}\nbogus_key = 1")));
            }
        }
        variants.push(format!("{text}\n[bogus_table]\nx = 1\n"));
        for v in variants {
            let e = Config::from_toml(&v, &path).unwrap_err().to_string();
            assert!(e.contains("unknown field"), "{}: {e}", path.display());
            assert!(e.contains("bogus"), "{}: {e}", path.display());
        }
    }
}

#[test]
fn typed_values_are_checked() {
    let e = Config::from_toml("[api]\nlisten = \"localhost\"", Path::new("t.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("listen"), "{e}");
    let e = Config::from_toml("[api]\nbody_limit_bytes = -1", Path::new("t.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("body_limit_bytes"), "{e}");
}
