//! UI (seed 000 §IV): the OpenAPI schemas derived from the REST bodies' serde types with
//! `utoipa`, and the document served at `/openapi.json` ([`openapi_document`]).
use serde_json::{Map, Value};

use crate::catalog::{BranchPatch, NewPort, PortPatch};
use crate::inventory::{Branch, InventoryFile, WanPort};
use crate::path_group::GroupsFile;
use crate::ui::openapi::{add, document, to_map};

/// The OpenAPI document served at `/openapi.json`.
pub fn openapi_document() -> Value {
    document(derived_schemas())
}

/// The schemas derived from the serde types with `utoipa` (by schema name).
pub fn derived_schemas() -> Map<String, Value> {
    let mut all = Vec::new();
    add::<super::common::Health>(&mut all);
    add::<Branch>(&mut all);
    add::<WanPort>(&mut all);
    add::<InventoryFile>(&mut all);
    add::<BranchPatch>(&mut all);
    add::<NewPort>(&mut all);
    add::<PortPatch>(&mut all);
    add::<GroupsFile>(&mut all);
    add::<super::Import>(&mut all);
    add::<super::Summary>(&mut all);
    add::<super::GroupView>(&mut all);
    add::<super::MemberView>(&mut all);
    add::<super::StructuredTransit>(&mut all);
    add::<super::StructuredMember>(&mut all);
    add::<super::SetGroup>(&mut all);
    add::<crate::sdc::BranchStats>(&mut all);
    add::<crate::sdc::PairStats>(&mut all);
    add::<crate::sdc::GroupStats>(&mut all);
    add::<crate::sdc::MemberStats>(&mut all);
    add::<super::WeightList>(&mut all);
    add::<super::AdaptiveList>(&mut all);
    add::<crate::history::HistoryView>(&mut all);
    add::<crate::history::SeriesView>(&mut all);
    add::<crate::history::AdaptiveEvent>(&mut all);
    add::<super::NewEnrolToken>(&mut all);
    add::<super::CertificateList>(&mut all);
    add::<super::RevokeRequest>(&mut all);
    add::<super::Revoked>(&mut all);
    add::<super::NewApiToken>(&mut all);
    add::<super::ApiToken>(&mut all);
    add::<super::ApiTokenList>(&mut all);
    to_map(all)
}
