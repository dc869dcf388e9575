//! The CA's persistent state in the ssc database (schema v2, `docs/ssc.md` §6): one-time
//! enrolment tokens (only their SHA-256), the certificates the CA issued (serial, branch, expiry,
//! revocation) and the serial / CRL number counters. The CA key itself is a file
//! ([`crate::authority`]), not a row.
//!
//! Every operation is one write transaction, so "check the token and mark it used" cannot
//! race with a second enrolment using the same token.

use redb::{ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use super::db::{from_json, to_json, Store, StoreError, META};

/// `enrol_tokens`: SHA-256 of the token (hex) → JSON [`TokenRow`].
pub(super) const ENROL_TOKENS: TableDefinition<'static, &'static str, &'static str> =
    TableDefinition::new("enrol_tokens");
/// `certs`: serial → JSON [`CertRow`].
pub(super) const CERTS: TableDefinition<'static, u64, &'static str> = TableDefinition::new("certs");
/// `api_tokens`: SHA-256 of a REST API bearer token (hex) → JSON [`ApiTokenRow`].
pub(super) const API_TOKENS: TableDefinition<'static, &'static str, &'static str> =
    TableDefinition::new("api_tokens");
/// `meta` key: the next serial number to issue.
const NEXT_SERIAL_KEY: &str = "next_serial";
/// `meta` key: the number of the last CRL signed.
const CRL_NUMBER_KEY: &str = "crl_number";
/// The first serial handed out (1 is the CA certificate's own).
const FIRST_SERIAL: u64 = 2;
/// Used or expired tokens are kept this long after their expiry (for "used" vs "unknown" in the
/// refusal), then purged when a new token is added; bounds the table.
pub const TOKEN_RETENTION_S: u64 = 7 * 24 * 3600;

/// One enrolment token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenRow {
    /// The only branch it enrols.
    pub branch: u8,
    /// Unix seconds after which it is refused.
    pub expires: u64,
    /// Unix seconds of its use (`None`: unused).
    pub used: Option<u64>,
}

/// What the CA issued.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Certificate)]
pub struct CertRow {
    /// The serial number.
    pub serial: u64,
    /// The gateway's branch; 0 for the controller's own server certificate.
    pub branch: u8,
    /// Unix seconds when it expires.
    pub not_after: u64,
    /// Unix seconds of its revocation (`None`: valid).
    pub revoked: Option<u64>,
}

/// What a REST API token may do.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Only `POST /api/v1/enrol-tokens`, and only for the branches named in the token
    /// (provisioning automation, least privilege). Lowest: no GET route either.
    Provisioner,
    /// GET routes only.
    ReadOnly,
    /// Every route.
    Admin,
}

/// A REST API token (its SHA-256 is the key; the token itself is never stored).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiTokenRow {
    /// A unique name (to list and remove it).
    pub name: String,
    /// Its role.
    pub role: Role,
    /// Unix seconds of its creation.
    pub created: u64,
    /// Unix seconds from which it is refused (401); `None`: never (`--ttl never`, and the
    /// tokens of schema v2, which had no expiry; schema v3).
    pub expires: Option<u64>,
    /// [`Role::Provisioner`]: the branches it may create enrolment tokens for (empty for the
    /// other roles; absent in older rows).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub branches: Vec<u8>,
}

impl ApiTokenRow {
    /// Whether the token is refused at `now` (Unix s).
    pub fn expired(&self, now: u64) -> bool {
        self.expires.is_some_and(|e| now >= e)
    }
}

/// Why a token is refused (the peer gets the text; the token itself is never in it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    /// No such token (mistyped, or never issued).
    #[error("unknown enrolment token")]
    Unknown,
    /// Already used once.
    #[error("enrolment token already used")]
    Used,
    /// Past its expiry.
    #[error("enrolment token expired")]
    Expired,
    /// Issued for another branch.
    #[error("enrolment token is for another branch")]
    OtherBranch,
}

impl TokenRefusal {
    /// The stable label (counters, error codes).
    pub fn label(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Used => "used",
            Self::Expired => "expired",
            Self::OtherBranch => "wrong_branch",
        }
    }
}

impl Store {
    /// Adds a REST API token (by its hash); `false` if the name exists already.
    pub fn add_api_token(&self, hash: &str, row: &ApiTokenRow) -> Result<bool, StoreError> {
        let txn = self.db.begin_write()?;
        {
            let mut t = txn.open_table(API_TOKENS)?;
            for r in t.iter()? {
                let (k, v) = r?;
                let old: ApiTokenRow =
                    from_json(|| format!("api_tokens/{}", k.value()), v.value())?;
                if old.name == row.name {
                    return Ok(false);
                }
            }
            let json = to_json(row)?;
            t.insert(hash, json.as_str())?;
        }
        txn.commit()?;
        Ok(true)
    }

    /// The role of the token with SHA-256 `hash`, if it exists.
    pub fn api_token(&self, hash: &str) -> Result<Option<ApiTokenRow>, StoreError> {
        let txn = self.db.begin_read()?;
        let t = txn.open_table(API_TOKENS)?;
        let row = match t.get(hash)? {
            Some(v) => Some(from_json(|| "api_tokens/(token)".into(), v.value())?),
            None => None,
        };
        Ok(row)
    }

    /// Every REST API token (names and roles; never a token or its hash).
    pub fn api_tokens(&self) -> Result<Vec<ApiTokenRow>, StoreError> {
        let txn = self.db.begin_read()?;
        let t = txn.open_table(API_TOKENS)?;
        let mut out = Vec::new();
        for r in t.iter()? {
            let (k, v) = r?;
            out.push(from_json(
                || format!("api_tokens/{}", k.value()),
                v.value(),
            )?);
        }
        out.sort_by(|a: &ApiTokenRow, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Removes the REST API token named `name`; `false` if there is none.
    pub fn remove_api_token(&self, name: &str) -> Result<bool, StoreError> {
        let txn = self.db.begin_write()?;
        let found = {
            let mut t = txn.open_table(API_TOKENS)?;
            let mut key = None;
            for r in t.iter()? {
                let (k, v) = r?;
                let row: ApiTokenRow =
                    from_json(|| format!("api_tokens/{}", k.value()), v.value())?;
                if row.name == name {
                    key = Some(k.value().to_owned());
                }
            }
            match key {
                Some(k) => {
                    t.remove(k.as_str())?;
                    true
                }
                None => false,
            }
        };
        txn.commit()?;
        Ok(found)
    }

    /// Stores a token's hash for `branch`, valid until `expires` (Unix s); purges tokens that
    /// expired more than [`TOKEN_RETENTION_S`] before `now`.
    pub fn add_enrol_token(
        &self,
        hash: &str,
        branch: u8,
        expires: u64,
        now: u64,
    ) -> Result<(), StoreError> {
        let txn = self.db.begin_write()?;
        {
            let mut t = txn.open_table(ENROL_TOKENS)?;
            let mut stale = Vec::new();
            for row in t.iter()? {
                let (k, v) = row?;
                let r: TokenRow = from_json(|| format!("enrol_tokens/{}", k.value()), v.value())?;
                if r.expires.saturating_add(TOKEN_RETENTION_S) < now {
                    stale.push(k.value().to_owned());
                }
            }
            for k in stale {
                t.remove(k.as_str())?;
            }
            let row = to_json(&TokenRow {
                branch,
                expires,
                used: None,
            })?;
            t.insert(hash, row.as_str())?;
        }
        txn.commit()?;
        Ok(())
    }

    /// Checks the token with hash `hash` for `branch` at `now` and marks it used, in one write
    /// transaction. A refused token is left as it was.
    pub fn redeem_enrol_token(
        &self,
        hash: &str,
        branch: u8,
        now: u64,
    ) -> Result<Result<(), TokenRefusal>, StoreError> {
        let txn = self.db.begin_write()?;
        let verdict = {
            let mut t = txn.open_table(ENROL_TOKENS)?;
            let row: Option<TokenRow> = match t.get(hash)? {
                Some(v) => Some(from_json(|| "enrol_tokens/(token)".into(), v.value())?),
                None => None,
            };
            match row {
                None => Err(TokenRefusal::Unknown),
                Some(r) if r.used.is_some() => Err(TokenRefusal::Used),
                Some(r) if r.expires <= now => Err(TokenRefusal::Expired),
                Some(r) if r.branch != branch => Err(TokenRefusal::OtherBranch),
                Some(mut r) => {
                    r.used = Some(now);
                    let json = to_json(&r)?;
                    t.insert(hash, json.as_str())?;
                    Ok(())
                }
            }
        };
        if verdict.is_ok() {
            txn.commit()?;
        } else {
            txn.abort()?;
        }
        Ok(verdict)
    }

    /// Allocates the next serial and records the certificate of `branch` (0: the controller's)
    /// expiring at `not_after`.
    pub fn record_cert(&self, branch: u8, not_after: u64) -> Result<u64, StoreError> {
        let txn = self.db.begin_write()?;
        let serial = {
            let mut meta = txn.open_table(META)?;
            let serial = meta
                .get(NEXT_SERIAL_KEY)?
                .map_or(FIRST_SERIAL, |v| v.value());
            meta.insert(NEXT_SERIAL_KEY, serial + 1)?;
            let row = to_json(&CertRow {
                serial,
                branch,
                not_after,
                revoked: None,
            })?;
            txn.open_table(CERTS)?.insert(serial, row.as_str())?;
            serial
        };
        txn.commit()?;
        Ok(serial)
    }

    /// Every certificate the CA issued, by serial.
    pub fn certs(&self) -> Result<Vec<CertRow>, StoreError> {
        let txn = self.db.begin_read()?;
        let t = txn.open_table(CERTS)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            let (k, v) = row?;
            out.push(from_json(|| format!("certs/{}", k.value()), v.value())?);
        }
        Ok(out)
    }

    /// Revokes the certificates `which` selects (not yet revoked ones) at `now`; returns their
    /// serials and the next CRL number to sign with.
    pub fn revoke(
        &self,
        which: impl Fn(&CertRow) -> bool,
        now: u64,
    ) -> Result<(Vec<u64>, u64), StoreError> {
        let txn = self.db.begin_write()?;
        let (serials, number) = {
            let mut t = txn.open_table(CERTS)?;
            let mut hit = Vec::new();
            for row in t.iter()? {
                let (k, v) = row?;
                let r: CertRow = from_json(|| format!("certs/{}", k.value()), v.value())?;
                if r.revoked.is_none() && which(&r) {
                    hit.push(r);
                }
            }
            for mut r in hit.clone() {
                r.revoked = Some(now);
                let json = to_json(&r)?;
                t.insert(r.serial, json.as_str())?;
            }
            let number = self.bump_crl_number(&txn)?;
            (hit.into_iter().map(|r| r.serial).collect(), number)
        };
        txn.commit()?;
        Ok((serials, number))
    }

    /// The next CRL number (monotonic), for re-signing the CRL without a change.
    pub fn next_crl_number(&self) -> Result<u64, StoreError> {
        let txn = self.db.begin_write()?;
        let n = self.bump_crl_number(&txn)?;
        txn.commit()?;
        Ok(n)
    }

    fn bump_crl_number(&self, txn: &redb::WriteTransaction) -> Result<u64, StoreError> {
        let mut meta = txn.open_table(META)?;
        let n = meta.get(CRL_NUMBER_KEY)?.map_or(0, |v| v.value()) + 1;
        meta.insert(CRL_NUMBER_KEY, n)?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("ssc.redb")).unwrap();
        (d, s)
    }

    #[test]
    fn a_token_is_used_once_for_its_branch_before_expiry() {
        let (_d, s) = store();
        s.add_enrol_token("h1", 3, 1000, 10).unwrap();
        assert_eq!(
            s.redeem_enrol_token("nope", 3, 20).unwrap(),
            Err(TokenRefusal::Unknown)
        );
        assert_eq!(
            s.redeem_enrol_token("h1", 4, 20).unwrap(),
            Err(TokenRefusal::OtherBranch)
        );
        assert_eq!(
            s.redeem_enrol_token("h1", 3, 1000).unwrap(),
            Err(TokenRefusal::Expired)
        );
        // The refusals above left it unused.
        assert_eq!(s.redeem_enrol_token("h1", 3, 999).unwrap(), Ok(()));
        assert_eq!(
            s.redeem_enrol_token("h1", 3, 999).unwrap(),
            Err(TokenRefusal::Used)
        );
        // Long expired tokens are purged when a new one is added.
        s.add_enrol_token(
            "h2",
            3,
            10 + 2 * TOKEN_RETENTION_S,
            1000 + TOKEN_RETENTION_S + 1,
        )
        .unwrap();
        assert_eq!(
            s.redeem_enrol_token("h1", 3, 999).unwrap(),
            Err(TokenRefusal::Unknown)
        );
    }

    #[test]
    fn a_v1_file_is_migrated_and_keeps_its_data() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("ssc.redb");
        {
            let s = Store::open_with_migrations(&path, &super::super::MIGRATIONS[..1]).unwrap();
            assert_eq!(s.schema_version().unwrap(), 1);
            s.update(|c| {
                c.set_settings(crate::path_config::Settings {
                    groups_per_pair: 3,
                    ..c.settings().clone()
                })
            })
            .unwrap();
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), super::super::SCHEMA_VERSION);
        assert_eq!(s.catalog().unwrap().settings().groups_per_pair, 3);
        s.add_enrol_token("h", 1, 100, 0).unwrap();
        assert_eq!(s.redeem_enrol_token("h", 1, 1).unwrap(), Ok(()));
    }

    #[test]
    fn serials_increase_and_revocation_is_recorded() {
        let (_d, s) = store();
        let a = s.record_cert(1, 100).unwrap();
        let b = s.record_cert(2, 100).unwrap();
        let c = s.record_cert(1, 100).unwrap();
        assert_eq!(
            (a, b, c),
            (FIRST_SERIAL, FIRST_SERIAL + 1, FIRST_SERIAL + 2)
        );
        let (revoked, n1) = s.revoke(|r| r.branch == 1, 50).unwrap();
        assert_eq!(revoked, vec![a, c]);
        let (again, n2) = s.revoke(|r| r.branch == 1, 60).unwrap();
        assert!(again.is_empty());
        assert!(n2 > n1);
        let rows = s.certs().unwrap();
        assert_eq!(rows.iter().filter(|r| r.revoked == Some(50)).count(), 2);
    }
}
