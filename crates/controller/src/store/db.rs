//! The database handle, its error type and the row codec that the store's files share.

use std::path::PathBuf;
use std::sync::Arc;

use redb::{Database, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, CatalogError};

/// `meta`: schema version and counters.
pub(super) const META: TableDefinition<'static, &'static str, u64> = TableDefinition::new("meta");

/// Why an operation on the inventory was refused or failed: the operator's input
/// ([`StoreError::Catalog`], HTTP 4xx), or IO and a damaged file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The change was refused by the catalog (the operator's input).
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The database file does not exist (only [`Store::check`] refuses to create it).
    #[error("the database file does not exist (`ssc run` creates it)")]
    Missing(PathBuf),
    /// The file was written by a newer `ssc`.
    #[error("database schema version {found} is newer than this ssc supports ({supported}); use a newer ssc")]
    TooNew {
        /// Version in the file.
        found: u64,
        /// Newest version known here.
        supported: u64,
    },
    /// The file needs migrations that were not run (only from [`Store::check`]).
    #[error("database schema version {found} is older than {supported}; `ssc run` migrates it")]
    TooOld {
        /// Version in the file.
        found: u64,
        /// Version this binary writes.
        supported: u64,
    },
    /// A row that does not decode.
    #[error("database row {key} is damaged: {reason}")]
    Corrupt {
        /// Table and key.
        key: String,
        /// Why.
        reason: String,
    },
    /// The stored contents break a rule (written by another version, or edited by hand).
    #[error("database contents are invalid: {0}")]
    StoredInvalid(CatalogError),
    /// The migration list is not 0→1→2→... (our bug).
    #[error("migration #{index} starts at version {from}, expected {index}")]
    BadMigrations {
        /// Position in the list.
        index: usize,
        /// Its `from`.
        from: u64,
    },
    /// Another process (or another `Store` in this one) has the file open; redb locks it.
    #[error("the database file is in use by another process (is `ssc run` running?)")]
    Locked(PathBuf),
    /// The database (IO, a damaged file).
    #[error("database: {0}")]
    Db(Box<redb::Error>),
}

impl StoreError {
    /// Whether the operator's input caused it (an HTTP 4xx).
    pub fn is_input(&self) -> bool {
        !matches!(
            self,
            Self::Missing(_)
                | Self::TooNew { .. }
                | Self::TooOld { .. }
                | Self::Corrupt { .. }
                | Self::StoredInvalid(_)
                | Self::BadMigrations { .. }
                | Self::Locked(_)
                | Self::Db(_)
        )
    }
}

macro_rules! redb_error {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self {
                Self::Db(Box::new(e.into()))
            }
        }
    )*};
}
redb_error!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

pub(super) fn to_json<T: Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Corrupt {
        key: "(encoding)".into(),
        reason: e.to_string(),
    })
}

pub(super) fn from_json<'a, T: Deserialize<'a>>(
    key: impl FnOnce() -> String,
    s: &'a str,
) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Corrupt {
        key: key(),
        reason: e.to_string(),
    })
}

/// The inventory database (one redb file).
pub struct Store {
    pub(super) db: Database,
    pub(super) path: PathBuf,
    /// The catalog after the last committed update (the OFC follows it).
    pub(super) changes: tokio::sync::watch::Sender<Arc<Catalog>>,
    /// Held from an update's write transaction until its catalog is published, so subscribers
    /// see the commits in order.
    pub(super) publish: std::sync::Mutex<()>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}
