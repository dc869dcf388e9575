//! Secret and credential files: written atomically (temporary file in the same directory, fsync,
//! rename, fsync of the directory) with mode 0600 from the moment they exist, so a reader (mmsg reloading on SIGHUP)
//! never sees a half-written key and no other user ever can read one.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

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
}
