//! Secret and credential files: written atomically (temporary file in the same directory, fsync,
//! rename, fsync of the directory) with mode 0600 from the moment they exist, so a reader (mmsg
//! reloading on SIGHUP) never sees a half-written key and no other user ever can read one.
//!
//! A key and its certificate are two files, and no rename replaces two files at once. They are
//! replaced as one unit by [`write_pair`] and read back by [`recover_pair`] (docs/security.md
//! "Credentials written crash-safe"): before the new pair is written, the current pair, when it
//! matches, is copied to `<file>.prev`; at start a pair that does not match (a process killed
//! between the two renames) is replaced by the `.prev` pair. Whatever instant a writer dies at,
//! one of the two pairs matches, so a gateway always starts with the last complete generation
//! (or the one before it).

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

/// The mode of every file this crate writes (keys, certificates, CRLs alike: one rule).
pub const FILE_MODE: u32 = 0o600;

/// Writes `data` to `path` atomically with mode [`FILE_MODE`].
pub fn write_private(path: &Path, data: &[u8]) -> io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let tmp = match dir {
        Some(d) => d.join(&tmp_name),
        None => Path::new(&tmp_name).to_path_buf(),
    };
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        // The rename itself is durable only once the directory is (power loss; a killed
        // process needs no more than the rename).
        sync_dir(dir.unwrap_or(Path::new(".")))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// fsyncs a directory (after a rename in it).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// The fallback copy of a credential file: `<path>.prev` (same directory, same mode).
pub fn fallback_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".prev");
    PathBuf::from(s)
}

/// Whether the private key (PEM) is the key of the first certificate of `cert_pem` (their
/// SubjectPublicKeyInfo are equal). Anything unparsable is `false`.
pub fn pair_matches(cert_pem: &[u8], key_pem: &[u8]) -> bool {
    let Some(Ok(cert)) = CertificateDer::pem_slice_iter(cert_pem).next() else {
        return false;
    };
    let Ok(key) = PrivateKeyDer::from_pem_slice(key_pem) else {
        return false;
    };
    let Ok(signer) = crate::tls::provider().key_provider.load_private_key(key) else {
        return false;
    };
    CertifiedKey::new(vec![cert], signer).keys_match().is_ok()
}

fn read_pair(cert: &Path, key: &Path) -> Option<(Vec<u8>, Vec<u8>)> {
    Some((fs::read(cert).ok()?, fs::read(key).ok()?))
}

/// Replaces the certificate and key files with `cert_pem`/`key_pem` as one unit: the current
/// pair, when it matches, is first kept as `<file>.prev` (key, then certificate), then the new
/// key and the new certificate are written ([`write_private`] each). A new pair that does not
/// match is refused before anything is written.
pub fn write_pair(cert: &Path, key: &Path, cert_pem: &[u8], key_pem: &[u8]) -> io::Result<()> {
    if !pair_matches(cert_pem, key_pem) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the new key does not belong to the new certificate",
        ));
    }
    let (cert_prev, key_prev) = (fallback_path(cert), fallback_path(key));
    if let Some((c, k)) = read_pair(cert, key) {
        // A current pair that does not match (a writer died between the renames) is not
        // kept: the fallback then still holds the last matching one.
        let kept = read_pair(&cert_prev, &key_prev).is_some_and(|p| p == (c.clone(), k.clone()));
        if !kept && pair_matches(&c, &k) {
            write_private(&key_prev, &k)?;
            write_private(&cert_prev, &c)?;
        }
    }
    write_private(key, key_pem)?;
    write_private(cert, cert_pem)
}

/// What [`recover_pair`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairState {
    /// The certificate and key files match.
    Current,
    /// They did not (a writer died between the renames); the `.prev` pair matched and has
    /// been put back in their place.
    Restored,
}

/// Why no matching pair was found.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    /// Neither the files nor their `.prev` copies form a matching pair.
    #[error("{cert} and {key} do not form a matching certificate/key pair, and neither do their .prev copies")]
    NoMatchingPair {
        /// The certificate file.
        cert: String,
        /// The key file.
        key: String,
    },
    /// Putting the `.prev` pair back failed.
    #[error("restore {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: io::Error,
    },
}

/// At start: makes sure `cert` and `key` form a matching pair (see the module docs). When they
/// do not and `<file>.prev` do, those are copied back (key, then certificate: a crash during the
/// copy leaves the `.prev` pair untouched for the next start). Temporary files left by killed
/// writers are removed. Missing files are not this function's business: the loader reports them.
pub fn recover_pair(cert: &Path, key: &Path) -> Result<PairState, PairError> {
    for p in [cert, key] {
        remove_stale_tmp(p);
        remove_stale_tmp(&fallback_path(p));
    }
    let Some((c, k)) = read_pair(cert, key) else {
        return Ok(PairState::Current);
    };
    if pair_matches(&c, &k) {
        return Ok(PairState::Current);
    }
    let (cert_prev, key_prev) = (fallback_path(cert), fallback_path(key));
    match read_pair(&cert_prev, &key_prev) {
        Some((pc, pk)) if pair_matches(&pc, &pk) => {
            let io = |path: &Path| {
                let path = path.display().to_string();
                move |source| PairError::Io { path, source }
            };
            write_private(key, &pk).map_err(io(key))?;
            write_private(cert, &pc).map_err(io(cert))?;
            Ok(PairState::Restored)
        }
        _ => Err(PairError::NoMatchingPair {
            cert: cert.display().to_string(),
            key: key.display().to_string(),
        }),
    }
}

/// Removes `.<name>.tmp<pid>` files of [`write_private`] whose process no longer runs.
fn remove_stale_tmp(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".tmp");
    let Some(prefix) = prefix.to_str().map(str::to_owned) else {
        return;
    };
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let file_name = e.file_name();
        let Some(pid) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix.as_str()))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn written_0600_and_replaced_atomically() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("key.pem");
        write_private(&p, b"one").unwrap();
        write_private(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, FILE_MODE);
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }

    fn pair(ca: &crate::ca::Ca, serial: u64) -> crate::ca::Issued {
        ca.issue_gateway(
            mms_types::BranchId::new(1).unwrap(),
            serial,
            crate::ca::DEFAULT_VALIDITY,
        )
        .unwrap()
    }

    #[test]
    fn pairs_are_matched_by_their_public_key() {
        let ca = crate::ca::Ca::generate("t").unwrap();
        let (a, b) = (pair(&ca, 1), pair(&ca, 2));
        assert!(pair_matches(a.cert_pem.as_bytes(), a.key_pem.as_bytes()));
        assert!(!pair_matches(a.cert_pem.as_bytes(), b.key_pem.as_bytes()));
        assert!(!pair_matches(b"junk", a.key_pem.as_bytes()));
        assert!(!pair_matches(a.cert_pem.as_bytes(), b"junk"));
    }

    /// Every state a writer can die in (after each of the four renames of `write_pair`, and
    /// in the middle of a restore) recovers to a matching pair.
    #[test]
    fn every_torn_state_recovers_to_a_matching_pair() {
        let ca = crate::ca::Ca::generate("t").unwrap();
        let (a, b) = (pair(&ca, 1), pair(&ca, 2));
        let d = tempfile::tempdir().unwrap();
        let (cert, key) = (d.path().join("gw.pem"), d.path().join("gw.key"));
        write_pair(&cert, &key, a.cert_pem.as_bytes(), a.key_pem.as_bytes()).unwrap();
        assert_eq!(recover_pair(&cert, &key).unwrap(), PairState::Current);
        // A mismatched new pair is refused before anything is written.
        assert!(write_pair(&cert, &key, a.cert_pem.as_bytes(), b.key_pem.as_bytes()).is_err());
        write_pair(&cert, &key, b.cert_pem.as_bytes(), b.key_pem.as_bytes()).unwrap();
        assert_eq!(fs::read(fallback_path(&key)).unwrap(), a.key_pem.as_bytes());
        assert_eq!(
            fs::read(fallback_path(&cert)).unwrap(),
            a.cert_pem.as_bytes()
        );
        // Killed between the key and the certificate of the next generation: new key, old cert.
        let c = pair(&ca, 3);
        write_private(&key, c.key_pem.as_bytes()).unwrap();
        assert_eq!(recover_pair(&cert, &key).unwrap(), PairState::Restored);
        assert_eq!(fs::read(&key).unwrap(), a.key_pem.as_bytes());
        assert_eq!(fs::read(&cert).unwrap(), a.cert_pem.as_bytes());
        // Killed half-way through that restore (key put back, certificate not yet): again.
        write_private(&cert, b.cert_pem.as_bytes()).unwrap();
        assert_eq!(recover_pair(&cert, &key).unwrap(), PairState::Restored);
        assert!(pair_matches(
            &fs::read(&cert).unwrap(),
            &fs::read(&key).unwrap()
        ));
        // Killed between the two .prev copies: the current pair still matches.
        write_private(&fallback_path(&key), c.key_pem.as_bytes()).unwrap();
        assert_eq!(recover_pair(&cert, &key).unwrap(), PairState::Current);
        // A torn current pair with a torn fallback is reported, not guessed at.
        write_private(&key, c.key_pem.as_bytes()).unwrap();
        assert!(matches!(
            recover_pair(&cert, &key),
            Err(PairError::NoMatchingPair { .. })
        ));
        // Stale temporary files of dead writers go away.
        let stale = d.path().join(".gw.key.tmp999999999");
        fs::write(&stale, b"x").unwrap();
        let _ = recover_pair(&cert, &key);
        assert!(!stale.exists());
    }
}
