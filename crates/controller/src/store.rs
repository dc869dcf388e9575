//! The UI module's persistent inventory (seed 000 §IV, "User Interface"): branches, WAN ports,
//! path groups per ordered branch pair, and settings, kept in an embedded database.
//!
//! Two layers, as STYLE §1 asks:
//! - [`Catalog`] ([`crate::catalog`], re-exported here) is the pure core: the whole inventory as
//!   one always-valid value, validated on every change.
//! - [`Store`] (this module) is the driver: a [redb](https://docs.rs/redb) database file. An update is one write
//!   transaction: read the catalog, apply the operation, validate, write, commit. redb serialises
//!   writers and commits atomically (copy-on-write B-trees, fsync on commit), so a failed or
//!   rejected update leaves nothing behind and readers never see half an update.
//!
//! Schema (version [`SCHEMA_VERSION`]):
//!
//! | table      | key                              | value                                     |
//! |------------|----------------------------------|-------------------------------------------|
//! | `meta`     | `"schema_version"`               | `u64`                                     |
//! | `branches` | branch id `u8`                   | JSON of [`Branch`] (with its WAN ports)   |
//! | `groups`   | `(source, destination, group)`   | JSON `{"1": "1a>2a", ...}` (member id → notation) |
//! | `settings` | `"path_config"`                  | JSON of [`Settings`]                      |
//! | `settings` | `"port_codes"`                   | JSON of [`CodeTable`] (extended port plan) |
//! | `enrol_tokens` (v2) | SHA-256 of a token, hex | JSON of [`creds::TokenRow`] (branch, expiry, used) |
//! | `certs` (v2) | serial `u64`                     | JSON of [`creds::CertRow`] (branch, expiry, revoked) |
//! | `api_tokens` (v2) | SHA-256 of a REST token, hex | JSON of [`creds::ApiTokenRow`] (name, role, created; `expires` since v3) |
//!
//! `meta` also holds `next_serial` and `crl_number` (v2, the CA's counters; [`creds`]).
//!
//! Migrations ([`MIGRATIONS`]) run in order when [`Store::open`] finds an older version; each
//! one is its own write transaction that also bumps `schema_version`, so an interrupted upgrade
//! resumes where it stopped. Version 0 is a file without the `meta` table (new or empty).
//! A file newer than this binary is refused ([`StoreError::TooNew`]), never rewritten.
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use redb::{Database, ReadableTable, TableDefinition, WriteTransaction};
use serde::Serialize;

pub use crate::catalog::{
    validate_settings, BranchPatch, Catalog, CatalogError, NewPort, PortPatch,
};
use crate::codes::CodeTable;
use crate::inventory::{Branch, BranchId, InventoryFile};
use crate::path_config::Settings;
use crate::path_group::{GroupsFile, MemberId, MemberPath, PathGroup, PathGroupId};

pub mod creds;
mod db;

use db::{from_json, to_json, META};
pub use db::{Store, StoreError};

/// The schema version this binary writes.
pub const SCHEMA_VERSION: u64 = 3;

const BRANCHES: TableDefinition<'static, u8, &'static str> = TableDefinition::new("branches");
const GROUPS: TableDefinition<'static, (u8, u8, u8), &'static str> = TableDefinition::new("groups");
const SETTINGS: TableDefinition<'static, &'static str, &'static str> =
    TableDefinition::new("settings");
const VERSION_KEY: &str = "schema_version";
const PATH_CONFIG_KEY: &str = "path_config";
/// The member path codes of the extended port plan (`crate::codes`), kept so that a restart
/// gives every member path the code its flows already have. Absent: none (the paper's plan).
const PORT_CODES_KEY: &str = "port_codes";

// ---------------------------------------------------------------------------------------------
// Migrations
// ---------------------------------------------------------------------------------------------

/// One schema migration from version `from` to `from + 1`, run inside one write transaction
/// (the version bump is written in the same transaction).
#[derive(Clone, Copy)]
pub struct Migration {
    /// The version it upgrades from.
    pub from: u64,
    /// What it does (logged).
    pub description: &'static str,
    /// The change.
    pub apply: fn(&WriteTransaction) -> Result<(), StoreError>,
}

impl std::fmt::Debug for Migration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Migration")
            .field("from", &self.from)
            .field("description", &self.description)
            .finish()
    }
}

/// Every migration, in order; the last one ends at [`SCHEMA_VERSION`].
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        from: 0,
        description: "create tables meta, branches, groups, settings with default settings",
        apply: migrate_0_to_1,
    },
    Migration {
        from: 1,
        description: "create tables enrol_tokens, certs (the gateway CA), api_tokens (REST roles)",
        apply: migrate_1_to_2,
    },
    Migration {
        from: 2,
        description: "api_tokens rows get `expires` (null: the existing tokens never expire)",
        apply: migrate_2_to_3,
    },
];

/// REST tokens expire since v3: every existing row gets an explicit `"expires": null` (they
/// were issued without an expiry, and an upgrade must not lock the operator out); `ssc token
/// list` shows them as `never`.
fn migrate_2_to_3(txn: &WriteTransaction) -> Result<(), StoreError> {
    let mut t = txn.open_table(creds::API_TOKENS)?;
    let mut rows = Vec::new();
    for r in t.iter()? {
        let (k, v) = r?;
        let key = k.value().to_owned();
        let mut row: serde_json::Value =
            serde_json::from_str(v.value()).map_err(|e| StoreError::Corrupt {
                key: format!("api_tokens/{key}"),
                reason: e.to_string(),
            })?;
        if let Some(o) = row.as_object_mut() {
            o.entry("expires").or_insert(serde_json::Value::Null);
        }
        rows.push((key, row.to_string()));
    }
    for (k, v) in rows {
        t.insert(k.as_str(), v.as_str())?;
    }
    Ok(())
}

fn migrate_1_to_2(txn: &WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(creds::ENROL_TOKENS)?;
    txn.open_table(creds::CERTS)?;
    txn.open_table(creds::API_TOKENS)?;
    Ok(())
}

fn migrate_0_to_1(txn: &WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(BRANCHES)?;
    txn.open_table(GROUPS)?;
    let mut settings = txn.open_table(SETTINGS)?;
    if settings.get(PATH_CONFIG_KEY)?.is_none() {
        let json = to_json(&Settings::default())?;
        settings.insert(PATH_CONFIG_KEY, json.as_str())?;
    }
    Ok(())
}

fn read_version(db: &Database) -> Result<u64, StoreError> {
    let txn = db.begin_read()?;
    match txn.open_table(META) {
        Ok(meta) => Ok(meta.get(VERSION_KEY)?.map_or(0, |v| v.value())),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// Runs the migrations `db` lacks; returns the resulting version (`migrations.len()`).
fn migrate(db: &Database, migrations: &[Migration]) -> Result<u64, StoreError> {
    for (index, m) in migrations.iter().enumerate() {
        if m.from != index as u64 {
            return Err(StoreError::BadMigrations {
                index,
                from: m.from,
            });
        }
    }
    let target = migrations.len() as u64;
    let found = read_version(db)?;
    if found > target {
        return Err(StoreError::TooNew {
            found,
            supported: target,
        });
    }
    for m in migrations.iter().skip_while(|m| m.from < found) {
        tracing::info!(
            from = m.from,
            to = m.from + 1,
            what = m.description,
            "migrating database schema"
        );
        let txn = db.begin_write()?;
        (m.apply)(&txn)?;
        txn.open_table(META)?.insert(VERSION_KEY, m.from + 1)?;
        txn.commit()?;
    }
    Ok(target)
}

// ---------------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------------

fn load(
    branches: &impl ReadableTable<u8, &'static str>,
    groups: &impl ReadableTable<(u8, u8, u8), &'static str>,
    settings: &impl ReadableTable<&'static str, &'static str>,
) -> Result<Catalog, StoreError> {
    let mut bs = Vec::new();
    for row in branches.iter()? {
        let (k, v) = row?;
        let id = k.value();
        let b: Branch = from_json(|| format!("branches/{id}"), v.value())?;
        if b.id.get() != id {
            return Err(StoreError::Corrupt {
                key: format!("branches/{id}"),
                reason: format!("holds branch {}", b.id),
            });
        }
        bs.push(b);
    }
    let mut gs = Vec::new();
    for row in groups.iter()? {
        let (k, v) = row?;
        let (s, d, g) = k.value();
        let key = || format!("groups/{s}>{d}#{g}");
        let bad = |reason: String| StoreError::Corrupt { key: key(), reason };
        let members: BTreeMap<MemberId, MemberPath> = from_json(key, v.value())?;
        gs.push(PathGroup {
            source: BranchId::new(s).map_err(|e| bad(e.to_string()))?,
            destination: BranchId::new(d).map_err(|e| bad(e.to_string()))?,
            id: PathGroupId::new(g).map_err(|e| bad(e.to_string()))?,
            members,
        });
    }
    let st: Settings = match settings.get(PATH_CONFIG_KEY)? {
        Some(v) => from_json(|| format!("settings/{PATH_CONFIG_KEY}"), v.value())?,
        None => Settings::default(),
    };
    let codes: CodeTable = match settings.get(PORT_CODES_KEY)? {
        Some(v) => from_json(|| format!("settings/{PORT_CODES_KEY}"), v.value())?,
        None => CodeTable::default(),
    };
    Catalog::with_codes(bs, gs, st, &codes).map_err(StoreError::StoredInvalid)
}

fn save(txn: &WriteTransaction, old: &Catalog, new: &Catalog) -> Result<(), StoreError> {
    let mut branches = txn.open_table(BRANCHES)?;
    for b in old.inventory().branches() {
        if new.inventory().branch(b.id).is_none() {
            branches.remove(b.id.get())?;
        }
    }
    for b in new.inventory().branches() {
        if old.inventory().branch(b.id) != Some(b) {
            branches.insert(b.id.get(), to_json(b)?.as_str())?;
        }
    }
    let mut groups = txn.open_table(GROUPS)?;
    let key = |g: &PathGroup| (g.source.get(), g.destination.get(), g.id.get());
    for g in old.groups().groups() {
        if new.groups().group(g.source, g.destination, g.id).is_none() {
            groups.remove(key(g))?;
        }
    }
    for g in new.groups().groups() {
        if old.groups().group(g.source, g.destination, g.id) != Some(g) {
            groups.insert(key(g), to_json(&g.members)?.as_str())?;
        }
    }
    if old.settings() != new.settings() {
        txn.open_table(SETTINGS)?
            .insert(PATH_CONFIG_KEY, to_json(new.settings())?.as_str())?;
    }
    if old.codes() != new.codes() {
        txn.open_table(SETTINGS)?
            .insert(PORT_CODES_KEY, to_json(new.codes())?.as_str())?;
    }
    Ok(())
}

fn locked(e: redb::DatabaseError, path: &Path) -> StoreError {
    match e {
        redb::DatabaseError::DatabaseAlreadyOpen => StoreError::Locked(path.to_owned()),
        e => e.into(),
    }
}

/// What [`Store::check`] found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// Schema version of the file.
    pub schema_version: u64,
    /// Branches.
    pub branches: usize,
    /// WAN ports.
    pub ports: usize,
    /// Path groups.
    pub groups: usize,
    /// Compiled flows, all switches.
    pub flows: usize,
}

fn read_catalog(db: &Database) -> Result<Catalog, StoreError> {
    let txn = db.begin_read()?;
    let branches = txn.open_table(BRANCHES)?;
    let groups = txn.open_table(GROUPS)?;
    let settings = txn.open_table(SETTINGS)?;
    load(&branches, &groups, &settings)
}

impl Store {
    /// Opens `path`, creating the file (and its parent directory's file, not the directory) if
    /// missing, and migrates it to [`SCHEMA_VERSION`]. The stored catalog is validated.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with_migrations(path, MIGRATIONS)
    }

    /// [`Store::open`] with an explicit migration list (tests exercise the hook with it).
    pub fn open_with_migrations(path: &Path, migrations: &[Migration]) -> Result<Self, StoreError> {
        let db = Database::create(path).map_err(|e| locked(e, path))?;
        let version = migrate(&db, migrations)?;
        let catalog = read_catalog(&db)?;
        let store = Self::with_db(db, path, catalog);
        tracing::debug!(path = %path.display(), version, "database open");
        Ok(store)
    }

    /// Validates an existing file without writing to it: schema version, every row, every rule,
    /// and that the flows compile.
    pub fn check(path: &Path) -> Result<CheckReport, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing(path.to_owned()));
        }
        let db = Database::open(path).map_err(|e| locked(e, path))?;
        let found = read_version(&db)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                found,
                supported: SCHEMA_VERSION,
            });
        }
        if found < SCHEMA_VERSION {
            return Err(StoreError::TooOld {
                found,
                supported: SCHEMA_VERSION,
            });
        }
        let c = read_catalog(&db)?;
        Ok(CheckReport {
            schema_version: found,
            branches: c.inventory().branches().count(),
            ports: c.inventory().ports().count(),
            groups: c.groups().len(),
            flows: c.flows().len(),
        })
    }

    fn with_db(db: Database, path: &Path, catalog: Catalog) -> Self {
        Self {
            db,
            path: path.to_owned(),
            changes: tokio::sync::watch::Sender::new(Arc::new(catalog)),
            publish: std::sync::Mutex::new(()),
        }
    }

    /// Follows the catalog: the receiver sees the current one, then every committed update.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Arc<Catalog>> {
        self.changes.subscribe()
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version in the file.
    pub fn schema_version(&self) -> Result<u64, StoreError> {
        read_version(&self.db)
    }

    /// The catalog of the last committed update, from memory: no read transaction, no parsing,
    /// no recompiling (the REST reads use it). It is replaced only after an update commits, so a
    /// refused or failed update leaves the old one.
    pub fn snapshot(&self) -> Arc<Catalog> {
        Arc::clone(&self.changes.borrow())
    }

    /// The current catalog as stored (one read transaction: a consistent snapshot; parses every
    /// row and recompiles the flows, see [`Store::snapshot`] for the cheap form).
    pub fn catalog(&self) -> Result<Catalog, StoreError> {
        read_catalog(&self.db)
    }

    /// Applies `op` to the current catalog in one write transaction and commits the result;
    /// if `op` refuses (or validation fails) nothing is written.
    pub fn update<E: Into<StoreError>>(
        &self,
        op: impl FnOnce(&Catalog) -> Result<Catalog, E>,
    ) -> Result<Catalog, StoreError> {
        // A poisoned lock guards no data, only the order of publication.
        let _order = self
            .publish
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let txn = self.db.begin_write()?;
        let old = {
            let branches = txn.open_table(BRANCHES)?;
            let groups = txn.open_table(GROUPS)?;
            let settings = txn.open_table(SETTINGS)?;
            load(&branches, &groups, &settings)?
        };
        let new = op(&old).map_err(Into::into)?;
        save(&txn, &old, &new)?;
        txn.commit()?;
        self.changes.send_replace(Arc::new(new.clone()));
        Ok(new)
    }

    /// Replaces everything (branches, groups, and settings if given) atomically.
    pub fn import(
        &self,
        inventory: InventoryFile,
        groups: GroupsFile,
        settings: Option<Settings>,
    ) -> Result<Catalog, StoreError> {
        self.update(|old| {
            let settings = settings.unwrap_or_else(|| old.settings().clone());
            Catalog::from_files_with_codes(inventory, groups, settings, old.codes())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::{Inventory, InventoryError, PortIndex, PortRef, WanKind};
    use crate::path_group::{GroupError, PathGroups};
    use crate::swap;
    use std::path::PathBuf;

    const INVENTORY: &str = include_str!("../../../examples/inventory-paper.toml");
    const PATHS: &str = include_str!("../../../examples/paths-paper-table2.toml");

    fn paper() -> (InventoryFile, GroupsFile) {
        (
            toml::from_str(INVENTORY).unwrap(),
            toml::from_str(PATHS).unwrap(),
        )
    }

    fn temp() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ssc.redb");
        (dir, path)
    }

    fn b(id: u8) -> BranchId {
        BranchId::new(id).unwrap()
    }

    fn branch(id: u8, third: u8) -> Branch {
        serde_json::from_value(serde_json::json!({
            "id": id, "name": format!("b{id}"), "lan": [format!("10.{third}.0.0/16")],
            "wan": [{"port": "a", "address": format!("198.18.{third}.2/24"),
                     "gateway": format!("198.18.{third}.1"), "capacity_mbps": 10}]
        }))
        .unwrap()
    }

    #[test]
    fn fresh_database_is_version_1_and_empty() {
        let (_d, path) = temp();
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let c = store.catalog().unwrap();
        assert_eq!(c.inventory().branches().count(), 0);
        assert!(c.groups().is_empty());
        assert_eq!(c.settings(), &Settings::default());
    }

    #[test]
    fn round_trip_paper_topology_across_reopen() {
        let (_d, path) = temp();
        let (inv, groups) = paper();
        let expected = {
            let inventory = Inventory::from_toml(INVENTORY).unwrap();
            let groups = PathGroups::from_toml(&inventory, PATHS).unwrap();
            swap::compile(&inventory, &groups).unwrap()
        };
        {
            let store = Store::open(&path).unwrap();
            let c = store.import(inv.clone(), groups.clone(), None).unwrap();
            assert_eq!(c.flows(), &expected);
        }
        let store = Store::open(&path).unwrap();
        let c = store.catalog().unwrap();
        assert_eq!(c.inventory().to_file(), inv);
        assert_eq!(c.groups().to_file(), groups);
        assert_eq!(c.flows(), &expected);
        assert_eq!(c.flows().len(), 140);
        drop(store);
        let report = Store::check(&path).unwrap();
        assert_eq!(
            report,
            CheckReport {
                schema_version: SCHEMA_VERSION,
                branches: 5,
                ports: 10,
                groups: 4,
                flows: 140
            }
        );
    }

    #[test]
    fn operations_round_trip() {
        let (_d, path) = temp();
        let store = Store::open(&path).unwrap();
        store.update(|c| c.add_branch(branch(1, 10))).unwrap();
        store.update(|c| c.add_branch(branch(2, 20))).unwrap();
        store
            .update(|c| {
                c.modify_branch(
                    b(2),
                    BranchPatch {
                        name: Some("two".into()),
                        lan: None,
                    },
                )
            })
            .unwrap();
        let port: NewPort = serde_json::from_value(serde_json::json!({
            "address": "198.18.21.2/24", "gateway": "198.18.21.1", "capacity_mbps": 20
        }))
        .unwrap();
        store.update(|c| c.add_port(b(2), port)).unwrap();
        let p2b: PortRef = "2b".parse().unwrap();
        store
            .update(|c| {
                c.modify_port(
                    p2b,
                    PortPatch {
                        capacity_mbps: Some(30),
                        ..PortPatch::default()
                    },
                )
            })
            .unwrap();
        let members = vec!["1a>2a".parse().unwrap(), "1a>2b".parse().unwrap()];
        store
            .update(|c| c.set_group(b(1), b(2), PathGroupId::new(3).unwrap(), members))
            .unwrap();
        let settings = Settings {
            groups_per_pair: 2,
            ..Settings::default()
        };
        store.update(|c| c.set_settings(settings.clone())).unwrap();
        drop(store);

        let store = Store::open(&path).unwrap();
        let c = store.catalog().unwrap();
        let two = c.inventory().branch(b(2)).unwrap();
        assert_eq!(two.name, "two");
        assert_eq!(two.wan.len(), 2);
        assert_eq!(c.inventory().port(p2b).unwrap().capacity_mbps, 30);
        let g = c
            .groups()
            .group(b(1), b(2), PathGroupId::new(3).unwrap())
            .unwrap();
        assert_eq!(g.members.len(), 2);
        assert_eq!(c.settings(), &settings);
        // 2 members × 3 flows at each end, + 2 or 4 patch flows.
        assert_eq!(c.flows().switch(b(1)).len(), 2 + 6);
        assert_eq!(c.flows().switch(b(2)).len(), 4 + 6);

        // In use: neither the branch nor the port can go while the group uses them.
        let e = store.update(|c| c.remove_port(p2b)).unwrap_err();
        assert!(
            matches!(e, StoreError::Catalog(CatalogError::InUse { .. })),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "WAN port 2b is used by path groups 1>2 #3; remove or change them first"
        );
        let e = store.update(|c| c.remove_branch(b(1))).unwrap_err();
        assert!(
            matches!(e, StoreError::Catalog(CatalogError::InUse { .. })),
            "{e}"
        );
        store
            .update(|c| c.remove_group(b(1), b(2), PathGroupId::new(3).unwrap()))
            .unwrap();
        store.update(|c| c.remove_port(p2b)).unwrap();
        store.update(|c| c.remove_branch(b(1))).unwrap();
        let c = store.catalog().unwrap();
        assert_eq!(c.inventory().branches().count(), 1);
        assert_eq!(c.inventory().branch(b(2)).unwrap().wan.len(), 1);
    }

    #[test]
    fn invalid_changes_are_rejected_and_nothing_is_written() {
        let (_d, path) = temp();
        let store = Store::open(&path).unwrap();
        let (inv, groups) = paper();
        store.import(inv, groups, None).unwrap();
        let before = store.catalog().unwrap();

        // Duplicate WAN address.
        let mut dup = branch(6, 60);
        dup.wan[0].address = "198.18.10.2/24".parse().unwrap();
        dup.wan[0].gateway = "198.18.10.1".parse().unwrap();
        let e = store.update(|c| c.add_branch(dup)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid inventory: WAN address 198.18.10.2 is used by ports 1a and 6a"
        );
        // Overlapping LAN.
        let mut overlap = branch(6, 60);
        overlap.lan = vec!["198.19.0.0/16".parse().unwrap()];
        let e = store.update(|c| c.add_branch(overlap)).unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::Catalog(CatalogError::Invalid(InventoryError::LanOverlap { .. }))
            ),
            "{e}"
        );
        // Existing id.
        let e = store.update(|c| c.add_branch(branch(1, 60))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "branch 1 exists already (modify it, or remove it first)"
        );
        // Bad name.
        let e = store
            .update(|c| {
                c.modify_branch(
                    b(1),
                    BranchPatch {
                        name: Some("no spaces".into()),
                        lan: None,
                    },
                )
            })
            .unwrap_err();
        assert!(e.to_string().contains("name \"no spaces\""), "{e}");
        // Zero capacity names the port and the field.
        let e = store
            .update(|c| {
                c.modify_port(
                    "3a".parse().unwrap(),
                    PortPatch {
                        capacity_mbps: Some(0),
                        ..PortPatch::default()
                    },
                )
            })
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid inventory: port 3a: capacity_mbps must be at least 1"
        );
        // A port that is not next.
        let e = store
            .update(|c| {
                c.add_port(
                    b(1),
                    NewPort {
                        port: Some(PortIndex::from_letter('d').unwrap()),
                        address: "198.18.12.2/24".parse().unwrap(),
                        gateway: "198.18.12.1".parse().unwrap(),
                        gateway_mac: None,
                        mac: None,
                        kind: WanKind::Internet,
                        capacity_mbps: 1,
                        nat: false,
                    },
                )
            })
            .unwrap_err();
        assert!(
            matches!(e, StoreError::Catalog(CatalogError::PortNotNext { .. })),
            "{e}"
        );
        // A group with an impossible member.
        let e = store
            .update(|c| {
                c.set_group(
                    b(1),
                    b(2),
                    PathGroupId::new(5).unwrap(),
                    vec!["1a>2a".parse().unwrap(), "1a>2a".parse().unwrap()],
                )
            })
            .unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::Catalog(CatalogError::Groups(GroupError::DuplicatePair { .. }))
            ),
            "{e}"
        );
        // A transit egress without MACs cannot compile.
        let e = store
            .update(|c| {
                let mut branches = c.branches();
                branches[2].wan[0].mac = None;
                branches[2].wan[0].gateway_mac = None;
                Catalog::new(branches, c.group_list(), c.settings().clone())
            })
            .unwrap_err();
        assert!(
            matches!(e, StoreError::Catalog(CatalogError::Compile(_))),
            "{e}"
        );
        // Settings out of range name the field.
        let e = store
            .update(|c| {
                c.set_settings(Settings {
                    mdi_threshold: 0.7,
                    ..Settings::default()
                })
            })
            .unwrap_err();
        assert!(e.to_string().starts_with("settings.mdi_threshold: "), "{e}");
        let e = store
            .update(|c| {
                c.set_settings(Settings {
                    groups_per_pair: 17,
                    ..Settings::default()
                })
            })
            .unwrap_err();
        assert!(
            e.to_string().starts_with("settings.groups_per_pair: "),
            "{e}"
        );
        assert!(e.is_input());
        // Missing things.
        let e = store.update(|c| c.remove_branch(b(9))).unwrap_err();
        assert_eq!(e.to_string(), "branch 9 does not exist");
        let e = store
            .update(|c| c.remove_port("1a".parse().unwrap()))
            .unwrap_err();
        assert!(
            matches!(e, StoreError::Catalog(CatalogError::NotLastPort { .. })),
            "{e}"
        );

        assert_eq!(store.catalog().unwrap(), before);
    }

    #[test]
    fn check_refuses_missing_and_old_files() {
        let (_d, path) = temp();
        assert!(matches!(Store::check(&path), Err(StoreError::Missing(_))));
        // A redb file without our tables is version 0.
        drop(Database::create(&path).unwrap());
        assert!(matches!(
            Store::check(&path),
            Err(StoreError::TooOld {
                found: 0,
                supported: SCHEMA_VERSION
            })
        ));
        drop(Store::open(&path).unwrap());
        assert_eq!(Store::check(&path).unwrap().schema_version, SCHEMA_VERSION);
    }

    #[test]
    fn open_database_is_locked_for_others() {
        let (_d, path) = temp();
        let _store = Store::open(&path).unwrap();
        let e = Store::check(&path).unwrap_err();
        assert!(matches!(e, StoreError::Locked(_)), "{e}");
        assert!(e
            .to_string()
            .ends_with("is in use by another process (is `ssc run` running?)"));
        let e = Store::open(&path).unwrap_err();
        assert!(matches!(e, StoreError::Locked(_)), "{e}");
    }

    /// A migration to SCHEMA_VERSION + 1 for the tests: renames every branch to upper case (a
    /// data rewrite inside the same transaction as the version bump).
    fn upper_names(txn: &WriteTransaction) -> Result<(), StoreError> {
        let mut table = txn.open_table(BRANCHES)?;
        let mut rows = Vec::new();
        for row in table.iter()? {
            let (k, v) = row?;
            let mut b: Branch = from_json(|| "test".into(), v.value())?;
            b.name = b.name.to_uppercase();
            rows.push((k.value(), to_json(&b)?));
        }
        for (k, v) in rows {
            table.insert(k, v.as_str())?;
        }
        Ok(())
    }

    fn failing(txn: &WriteTransaction) -> Result<(), StoreError> {
        upper_names(txn)?;
        Err(CatalogError::Setting {
            field: "test",
            reason: "fails on purpose".into(),
        }
        .into())
    }

    #[test]
    fn migration_hook_runs_once_in_order_and_atomically() {
        let (_d, path) = temp();
        {
            let store = Store::open(&path).unwrap();
            store.update(|c| c.add_branch(branch(1, 10))).unwrap();
        }
        // A failing migration writes nothing: version and data stay.
        let with_failing: Vec<Migration> = MIGRATIONS
            .iter()
            .copied()
            .chain([Migration {
                from: SCHEMA_VERSION,
                description: "fails",
                apply: failing,
            }])
            .collect();
        let e = Store::open_with_migrations(&path, &with_failing).unwrap_err();
        assert!(e.to_string().contains("fails on purpose"), "{e}");
        {
            let store = Store::open(&path).unwrap();
            assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
            assert_eq!(
                store
                    .catalog()
                    .unwrap()
                    .inventory()
                    .branch(b(1))
                    .unwrap()
                    .name,
                "b1"
            );
        }
        // The real hook: one more migration rewrites the data and bumps the version.
        let next = SCHEMA_VERSION + 1;
        let v2: Vec<Migration> = MIGRATIONS
            .iter()
            .copied()
            .chain([Migration {
                from: SCHEMA_VERSION,
                description: "upper-case names",
                apply: upper_names,
            }])
            .collect();
        {
            let store = Store::open_with_migrations(&path, &v2).unwrap();
            assert_eq!(store.schema_version().unwrap(), next);
            assert_eq!(
                store
                    .catalog()
                    .unwrap()
                    .inventory()
                    .branch(b(1))
                    .unwrap()
                    .name,
                "B1"
            );
        }
        // Runs once: reopening at v3 changes nothing more.
        {
            let store = Store::open_with_migrations(&path, &v2).unwrap();
            store
                .update(|c| {
                    c.modify_branch(
                        b(1),
                        BranchPatch {
                            name: Some("lower".into()),
                            lan: None,
                        },
                    )
                })
                .unwrap();
        }
        {
            let store = Store::open_with_migrations(&path, &v2).unwrap();
            assert_eq!(
                store
                    .catalog()
                    .unwrap()
                    .inventory()
                    .branch(b(1))
                    .unwrap()
                    .name,
                "lower"
            );
        }
        // This binary refuses the newer file instead of misreading it.
        let e = Store::open(&path).unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::TooNew { found, supported }
                    if found == next && supported == SCHEMA_VERSION
            ),
            "{e}"
        );
        assert!(matches!(
            Store::check(&path),
            Err(StoreError::TooNew { found, supported })
                if found == next && supported == SCHEMA_VERSION
        ));
        // A list with a gap is our bug and is refused.
        let gap = [Migration {
            from: 2,
            description: "gap",
            apply: upper_names,
        }];
        let e = Store::open_with_migrations(&path, &gap).unwrap_err();
        assert!(
            matches!(e, StoreError::BadMigrations { index: 0, from: 2 }),
            "{e}"
        );
    }

    #[test]
    fn v2_api_tokens_migrate_to_never_expiring_rows() {
        let (_d, path) = temp();
        {
            // A v2 file with a token row as v2 wrote it (no `expires`).
            let store = Store::open_with_migrations(&path, &MIGRATIONS[..2]).unwrap();
            assert_eq!(store.schema_version().unwrap(), 2);
            let txn = store.db.begin_write().unwrap();
            txn.open_table(creds::API_TOKENS)
                .unwrap()
                .insert("ab12", r#"{"name":"old","role":"admin","created":5}"#)
                .unwrap();
            txn.commit().unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), 3);
        let row = store.api_token("ab12").unwrap().unwrap();
        assert_eq!(
            row,
            creds::ApiTokenRow {
                name: "old".into(),
                role: creds::Role::Admin,
                created: 5,
                expires: None,
                branches: Vec::new(),
            }
        );
        assert!(!row.expired(u64::MAX));
        let txn = store.db.begin_read().unwrap();
        let raw = txn.open_table(creds::API_TOKENS).unwrap();
        let text = raw.get("ab12").unwrap().unwrap().value().to_owned();
        assert!(text.contains(r#""expires":null"#), "{text}");
    }

    #[test]
    fn damaged_rows_are_reported_with_their_key() {
        let (_d, path) = temp();
        drop(Store::open(&path).unwrap());
        {
            let db = Database::create(&path).unwrap();
            let txn = db.begin_write().unwrap();
            txn.open_table(BRANCHES)
                .unwrap()
                .insert(4u8, "{\"id\": 4, \"nam\": 1}")
                .unwrap();
            txn.commit().unwrap();
        }
        let e = Store::open(&path).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("database row branches/4 is damaged"),
            "{e}"
        );
        assert!(!e.is_input());
    }
}
