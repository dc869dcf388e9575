//! UI/PC (seed 000 §IV, §III): path groups per ordered branch pair, their member paths in the
//! paper's notation or structured, and their path codes `0xBASG`.
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::common::{blocking, parse_branch, parse_group, snapshot, ApiError, ApiJson, AppState};
use crate::catalog::CatalogError;
use crate::inventory::PortRef;
use crate::path_group::{MemberPath, PathGroup, Transit};

/// A member path, structured.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StructuredMember {
    /// First port, e.g. `1a`.
    pub source: String,
    /// Transits (at most one).
    #[serde(default)]
    pub transits: Vec<StructuredTransit>,
    /// Last port, e.g. `2a`.
    pub destination: String,
}

/// One transit, structured.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Transit)]
pub struct StructuredTransit {
    /// Where the path arrives, e.g. `4a`.
    pub ingress: String,
    /// Where it leaves, e.g. `4b` (the same port when it hairpins).
    pub egress: String,
}

/// One member in a response: both forms plus its path code.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = Member)]
pub struct MemberView {
    /// Member id S (1..=15).
    pub id: u8,
    /// The paper's notation.
    pub path: String,
    /// The outer port code used on the wire: `0xBASG` in the paper's port plan, the allocated
    /// one in the extended plan.
    pub code: String,
    /// WAN hops.
    pub wan_hops: usize,
    /// Structured form.
    pub source: String,
    /// Structured form.
    pub transits: Vec<StructuredTransit>,
    /// Structured form.
    pub destination: String,
}

/// One path group in a response.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = PathGroup)]
pub struct GroupView {
    /// Source branch A.
    pub source: u8,
    /// Destination branch B.
    pub destination: u8,
    /// Group id G.
    pub id: u8,
    /// The port the destination MPA listens on for this group: `0xB00G` in the paper's port
    /// plan, `first + G` in the extended one.
    pub listen_port: String,
    /// Members in id order.
    pub members: Vec<MemberView>,
}

impl GroupView {
    fn of(g: &PathGroup, ports: mms_types::PortPlan, codes: &crate::codes::CodeTable) -> Self {
        let listen = ports.listen_port(g.destination, g.id).unwrap_or(0);
        let code = |id| match ports {
            mms_types::PortPlan::Paper => g.code(id).port(),
            mms_types::PortPlan::Extended(_) => codes.get(g.code(id)).unwrap_or(0),
        };
        Self {
            source: g.source.get(),
            destination: g.destination.get(),
            id: g.id.get(),
            listen_port: format!("{listen:#06x}"),
            members: g
                .members
                .iter()
                .map(|(&id, m)| MemberView {
                    id: id.get(),
                    path: m.to_string(),
                    code: format!("{:#06x}", code(id)),
                    wan_hops: m.wan_hops(),
                    source: m.source().to_string(),
                    transits: m
                        .transits()
                        .iter()
                        .map(|t| StructuredTransit {
                            ingress: t.ingress.to_string(),
                            egress: t.egress.to_string(),
                        })
                        .collect(),
                    destination: m.destination().to_string(),
                })
                .collect(),
        }
    }
}

/// `PUT /api/v1/path-groups/{source}/{destination}/{group}`: `members` holds strings in the
/// paper's notation or [`StructuredMember`] objects (mixed is fine).
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SetPathGroup)]
pub struct SetGroup {
    /// Member paths; the first is member 1.
    #[schema(value_type = Vec<MemberForm>, min_items = 1, max_items = 15)]
    pub members: Vec<Value>,
}

/// A member path in `PUT` bodies: the paper's notation or [`StructuredMember`] (OpenAPI only).
#[derive(Serialize, utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // only its schema is used
enum MemberForm {
    /// The paper's notation, `1a>4a>4b>2a`: branch number + port letter, hops separated by `>`.
    Notation(String),
    /// `{source, transits, destination}`.
    Structured(StructuredMember),
}

fn member_from_value(i: usize, v: Value) -> Result<MemberPath, ApiError> {
    let at = |e: &dyn std::fmt::Display| ApiError::invalid(format!("members[{i}]: {e}"));
    match v {
        Value::String(s) => s.parse().map_err(|e| at(&e)),
        Value::Object(_) => {
            let m: StructuredMember = serde_json::from_value(v).map_err(|e| at(&e))?;
            let port = |field: &str, s: &str| {
                s.parse::<PortRef>()
                    .map_err(|e| at(&format_args!("{field}: {e}")))
            };
            let transits = m
                .transits
                .iter()
                .enumerate()
                .map(|(k, t)| {
                    Ok(Transit {
                        ingress: port(&format!("transits[{k}].ingress"), &t.ingress)?,
                        egress: port(&format!("transits[{k}].egress"), &t.egress)?,
                    })
                })
                .collect::<Result<Vec<_>, ApiError>>()?;
            MemberPath::new(
                port("source", &m.source)?,
                transits,
                port("destination", &m.destination)?,
            )
            .map_err(|e| at(&e))
        }
        _ => Err(at(
            &"expected a string like \"1a>4a>4b>2a\" or an object {source, transits, destination}",
        )),
    }
}

pub(super) async fn list_groups(
    State(state): State<AppState>,
) -> Result<Json<Vec<GroupView>>, ApiError> {
    let c = snapshot(&state);
    let view = |g| GroupView::of(g, c.settings().ports, c.codes());
    Ok(Json(c.groups().groups().map(view).collect()))
}

pub(super) async fn list_pair_groups(
    State(state): State<AppState>,
    Path((source, destination)): Path<(String, String)>,
) -> Result<Json<Vec<GroupView>>, ApiError> {
    let a = parse_branch("source", &source)?;
    let b = parse_branch("destination", &destination)?;
    let c = snapshot(&state);
    for id in [a, b] {
        if c.inventory().branch(id).is_none() {
            return Err(CatalogError::NoBranch(id).into());
        }
    }
    let groups = c
        .groups()
        .pair(a, b)
        .map(|m| {
            m.values()
                .map(|g| GroupView::of(g, c.settings().ports, c.codes()))
                .collect()
        })
        .unwrap_or_default();
    Ok(Json(groups))
}

pub(super) async fn set_group(
    State(state): State<AppState>,
    Path((source, destination, group)): Path<(String, String, String)>,
    ApiJson(body): ApiJson<SetGroup>,
) -> Result<Json<GroupView>, ApiError> {
    let a = parse_branch("source", &source)?;
    let b = parse_branch("destination", &destination)?;
    let g = parse_group(&group)?;
    let members = body
        .members
        .into_iter()
        .enumerate()
        .map(|(i, v)| member_from_value(i, v))
        .collect::<Result<Vec<_>, _>>()?;
    let c = blocking(&state, move |s| s.update(|c| c.set_group(a, b, g, members))).await?;
    let view = c
        .groups()
        .group(a, b, g)
        .map(|g| GroupView::of(g, c.settings().ports, c.codes()))
        .ok_or(CatalogError::NoGroup {
            source_branch: a,
            destination: b,
            group: g,
        })?;
    tracing::info!(
        source = a.get(),
        destination = b.get(),
        pg = g.get(),
        members = view.members.len(),
        "path group set"
    );
    Ok(Json(view))
}

pub(super) async fn remove_group(
    State(state): State<AppState>,
    Path((source, destination, group)): Path<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    let a = parse_branch("source", &source)?;
    let b = parse_branch("destination", &destination)?;
    let g = parse_group(&group)?;
    blocking(&state, move |s| s.update(|c| c.remove_group(a, b, g))).await?;
    tracing::info!(
        source = a.get(),
        destination = b.get(),
        pg = g.get(),
        "path group removed"
    );
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn member_forms() {
        let a = member_from_value(0, json!("1b>4a>4b>2a")).unwrap();
        let b = member_from_value(
            0,
            json!({"source": "1b", "transits": [{"ingress": "4a", "egress": "4b"}], "destination": "2a"}),
        )
        .unwrap();
        assert_eq!(a, b);
        let e = member_from_value(3, json!("1a>9z")).unwrap_err();
        assert!(e.message.starts_with("members[3]: "), "{}", e.message);
        let e = member_from_value(1, json!({"source": "1a", "destination": "2x"})).unwrap_err();
        assert!(e.message.contains("destination"), "{}", e.message);
        let e = member_from_value(1, json!({"source": "1a", "dest": "2a"})).unwrap_err();
        assert!(e.message.contains("unknown field `dest`"), "{}", e.message);
        assert!(member_from_value(0, json!(5)).is_err());
    }
}
