//! UI (seed 000 §IV): the OpenAPI 3.1 document of the REST API, built from
//! [`super::routes::ROUTES`] (so every route is in it, with its method, parameters, bodies and
//! statuses) plus the JSON schemas of the bodies.
//!
//! The schemas of the inventory, path group, import, SDC, WRR, adaptive, CA and token bodies are
//! derived from their serde types with `utoipa` (`api::derived_schemas`, passed in: this module
//! imports only [`super::routes`], never `api`), so they cannot drift from them (a test compares
//! each with a serialized example). The others are still written by hand below, because their
//! types live in modules this change does not annotate (`path_config::Settings`, `swap`'s flow
//! IR, the gateway channel's `gwc` views, the CA's `authority::NewToken`), or the body is not
//! one serde type (`Stats` is `sdc::StatsView` or a fixed "not available" answer).
use serde_json::{json, Map, Value};
use utoipa::openapi::{RefOr, Schema};
use utoipa::ToSchema;

pub use super::routes::path_params;
use super::routes::{Route, ROUTES};

fn param_schema(name: &str) -> Value {
    match name {
        "branch" | "source" | "destination" => {
            json!({"type": "integer", "minimum": 1, "maximum": 15, "description": "branch id"})
        }
        "group" => {
            json!({"type": "integer", "minimum": 0, "maximum": 15, "description": "path group id G"})
        }
        "port" => json!({"type": "string", "pattern": "^[a-h]$", "description": "WAN port letter"}),
        _ => json!({"type": "string"}),
    }
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn operation(r: &Route) -> Value {
    let mut op = Map::new();
    op.insert("operationId".into(), json!(format!("{:?}", r.op)));
    op.insert("summary".into(), json!(r.summary));
    op.insert("tags".into(), json!([r.tag]));
    let params: Vec<Value> = path_params(r.path)
        .into_iter()
        .map(|p| json!({"name": p, "in": "path", "required": true, "schema": param_schema(p)}))
        .collect();
    if !params.is_empty() {
        op.insert("parameters".into(), Value::Array(params));
    }
    if let Some(req) = r.request {
        op.insert(
            "requestBody".into(),
            json!({"required": true, "content": {"application/json": {"schema": schema_ref(req)}}}),
        );
    }
    let mut responses = Map::new();
    let ok = match r.response {
        Some(s) => {
            json!({"description": "success", "content": {"application/json": {"schema": schema_ref(s)}}})
        }
        None if r.status == 204 => json!({"description": "done, no body"}),
        None => {
            json!({"description": "success", "content": {"application/json": {"schema": {"type": "object"}}}})
        }
    };
    responses.insert(r.status.to_string(), ok);
    let error = |d: &str| json!({"description": d, "content": {"application/json": {"schema": schema_ref("Error")}}});
    if r.auth {
        op.insert("security".into(), json!([{"bearer": []}]));
        responses.insert("401".into(), error("missing or wrong bearer token"));
    } else {
        op.insert("security".into(), json!([]));
    }
    if !path_params(r.path).is_empty() {
        responses.insert("404".into(), error("no such branch, port or path group"));
    }
    if r.request.is_some() {
        responses.insert("400".into(), error("malformed JSON"));
        responses.insert(
            "409".into(),
            error("conflicts with the inventory (exists, in use)"),
        );
        responses.insert(
            "422".into(),
            error("invalid: the message names the field and the rule"),
        );
    } else if r.status == 204 {
        responses.insert("409".into(), error("still used by path groups"));
    }
    if r.auth {
        responses.insert("500".into(), error("database failure"));
    }
    op.insert("responses".into(), Value::Object(responses));
    Value::Object(op)
}

fn schemas() -> Value {
    let branch_id = json!({"type": "integer", "minimum": 1, "maximum": 15});
    let settings = json!({"type": "object", "additionalProperties": false, "properties": {
        "groups_per_pair": {"type": "integer", "minimum": 1, "maximum": 16, "default": 4},
        "mdi_threshold": {"type": "number", "minimum": 0, "maximum": 0.5, "default": 0.4},
        "replace_margin": {"type": "number", "minimum": 0, "default": 0.2},
        "allow_transit": {"type": "boolean", "default": true},
        "ports": {"type": "string", "default": "paper", "description": "outer port plan: \"paper\" (0xBASG, branch ids 1..=15) or an extended range \"FIRST-LAST\" reserved on every gateway (issue #20; docs/controller.md \"Extended port plan\")"},
        "adaptive": {"type": "object", "additionalProperties": false, "description": "adaptive path groups (seed 003; docs/ssc.md \"Adaptive path groups\"); off by default", "properties": {
            "enabled": {"type": "boolean", "default": false},
            "lambda": {"type": "number", "exclusiveMinimum": true, "minimum": 0, "maximum": 1, "default": 0.8},
            "min_groups": {"type": "integer", "minimum": 1, "maximum": 16, "default": 1},
            "add_after_s": {"type": "number", "minimum": 0, "default": 6},
            "settle_s": {"type": "number", "minimum": 0, "default": 10},
            "min_gain": {"type": "number", "minimum": 0, "default": 0.1},
            "backoff_s": {"type": "number", "minimum": 0, "default": 60},
            "retire_share": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5},
            "retire_after_s": {"type": "number", "minimum": 0, "default": 60},
            "max_report_age_s": {"type": "number", "minimum": 0, "default": 6},
            "limited_backlog_s": {"type": "number", "minimum": 0, "default": 0.1},
            "limited_hold_s": {"type": "number", "minimum": 0, "default": 4}}}}});
    let mut schemas = json!({
        "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
        "BranchList": {"type": "array", "items": schema_ref("Branch")},
        "PathGroupList": {"type": "array", "items": schema_ref("PathGroup")},
        "Settings": settings,
        "Flow": {"type": "object", "description": "one OpenFlow 1.3 flow of table 0 (see docs/controller.md §4)", "properties": {
            "table": {"type": "integer"}, "priority": {"type": "integer"},
            "cookie": {"type": "integer", "format": "int64"},
            "matches": {"type": "object"}, "actions": {"type": "array", "items": {}},
            "ofctl": {"type": "string", "description": "ovs-ofctl add-flow syntax"}}},
        "Flows": {"type": "object", "properties": {
            "branch": branch_id, "count": {"type": "integer"},
            "flows": {"type": "array", "items": schema_ref("Flow")}}},
    });
    if let (Value::Object(all), Value::Object(more)) = (&mut schemas, stats_schemas(&branch_id)) {
        all.extend(more);
    }
    to_3_1(&mut schemas);
    schemas
}

/// Rewrites the hand-written schemas' OpenAPI 3.0 forms into 3.1 (JSON Schema 2020-12), the
/// version `utoipa` 5 emits: `nullable: true` becomes a `null` type (or a `oneOf` with it), a
/// boolean `exclusiveMinimum` becomes the bound itself.
fn to_3_1(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if o.remove("nullable") == Some(Value::Bool(true)) {
                match o.get("type").cloned() {
                    Some(Value::String(t)) => {
                        o.insert("type".into(), json!([t, "null"]));
                    }
                    _ => {
                        let inner = Value::Object(std::mem::take(o));
                        o.insert("oneOf".into(), json!([{"type": "null"}, inner]));
                    }
                }
            }
            if o.get("exclusiveMinimum") == Some(&Value::Bool(true)) {
                let bound = o.remove("minimum").unwrap_or(json!(0));
                o.insert("exclusiveMinimum".into(), bound);
            }
            o.values_mut().for_each(to_3_1);
        }
        Value::Array(a) => a.iter_mut().for_each(to_3_1),
        _ => {}
    }
}

/// The field schema of `Import::settings`: a reference to the hand-written `Settings` schema
/// (`path_config::Settings` has no `ToSchema` yet).
pub fn settings_ref() -> utoipa::openapi::Ref {
    utoipa::openapi::Ref::from_schema_name("Settings")
}

/// Adds `T`'s schema and every schema it refers to (for [`document`]'s `derived` map).
pub fn add<T: ToSchema>(out: &mut Vec<(String, RefOr<Schema>)>) {
    out.push((T::name().into_owned(), T::schema()));
    T::schemas(out);
}

/// The JSON form of schemas collected with [`add`], by name.
pub fn to_map(schemas: Vec<(String, RefOr<Schema>)>) -> Map<String, Value> {
    schemas
        .into_iter()
        .map(|(name, schema)| {
            let v = serde_json::to_value(schema)
                .unwrap_or_else(|e| json!({"description": format!("unserialisable: {e}")}));
            (name, v)
        })
        .collect()
}

/// The SDC's schemas (`GET /api/v1/stats`).
fn stats_schemas(branch_id: &Value) -> Value {
    json!({
        "Stats": {"type": "object", "description": "collected by the SDC from every connected switch (multipart FLOW by cookie, PORT_STATS); `available` is false when the OpenFlow server does not run in this process", "properties": {
            "available": {"type": "boolean"}, "note": {"type": "string"},
            "last_push": {"type": "object", "nullable": true, "description": "the last change pushed to the switches", "properties": {
                "switches": {"type": "integer"}, "steps": {"type": "integer"}, "flow_mods": {"type": "integer"},
                "failed_members": {"type": "integer"}, "ms": {"type": "number", "description": "diff, FLOW_MODs and every barrier reply"}}},
            "branches": {"type": "array", "items": schema_ref("BranchStats")},
            "pairs": {"type": "array", "items": schema_ref("PairStats")},
            "groups": {"type": "array", "items": schema_ref("GroupStats")},
            "members": {"type": "array", "items": schema_ref("MemberStats")}}},
        "GatewayReport": {"type": "object", "description": "a gateway's periodic report (docs/gwchan.md)", "properties": {
            "healthy": {"type": "boolean"},
            "config_version": {"type": "integer"},
            "config_source": {"type": "string", "enum": ["file", "cache", "controller"]},
            "connections_up": {"type": "integer"},
            "connections_total": {"type": "integer"},
            "drops": {"type": "integer"},
            "groups": {"type": "array", "items": {"type": "object", "properties": {
                "branch": branch_id, "group": {"type": "integer", "minimum": 0, "maximum": 15},
                "bytes_tx": {"type": "integer"}, "up": {"type": "boolean"}}}}}},
        "Gateway": {"type": "object", "properties": {
            "branch": branch_id,
            "connected": {"type": "boolean"},
            "peer": {"type": "string"},
            "software_version": {"type": "string"},
            "wan": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "address": {"type": "string"}}}},
            "config_version": {"type": "integer", "description": "the version the controller has for this branch"},
            "config_version_sent": {"type": "integer"},
            "config_version_acked": {"type": "integer", "description": "the version the gateway runs (its last ack)"},
            "last_error": {"type": "string", "nullable": true, "description": "why the gateway refused the last config"},
            "last_report": {"allOf": [schema_ref("GatewayReport")], "nullable": true},
            "last_report_age_ms": {"type": "integer", "nullable": true},
            "sessions": {"type": "integer"}}},
        "GatewayList": {"type": "object", "properties": {
            "gateways": {"type": "array", "items": schema_ref("Gateway")},
            "rejected_unknown_branch": {"type": "integer"},
            "rejected_other": {"type": "integer"},
            "replaced": {"type": "integer"},
            "rejected_auth": {"type": "integer", "description": "TLS listener: no client certificate, a certificate of another branch, or an enrolment over clear TCP"},
            "unauthenticated_reports": {"type": "integer", "description": "reports of sessions registered over clear TCP: shown, never fed into capacity, WRR or adaptive decisions"},
            "enrolment": {"type": "object", "nullable": true, "properties": {
                "enrolled": {"type": "integer"}, "renewed": {"type": "integer"},
                "refused_unknown": {"type": "integer"}, "refused_used": {"type": "integer"},
                "refused_expired": {"type": "integer"}, "refused_wrong_branch": {"type": "integer"},
                "refused_other": {"type": "integer"}}}}},
        "EnrolToken": {"type": "object", "description": "shown once: only its SHA-256 is stored", "properties": {
            "token": {"type": "string", "description": "64 hex digits (256 random bits)"},
            "branch": branch_id, "expires": {"type": "integer", "description": "Unix seconds"},
            "ca_fingerprint": {"type": "string", "description": "SHA-256 of the CA certificate (DER), hex"}}},
    })
}

/// The derived schemas, then the hand-written ones (none has the name of a derived one).
fn all_schemas(derived: Map<String, Value>) -> Value {
    let mut all = derived;
    if let Value::Object(hand) = schemas() {
        all.extend(hand);
    }
    Value::Object(all)
}

/// The document served at `/openapi.json`: every route of [`ROUTES`], the `derived` schemas
/// (the serde types' own, collected by [`crate::ui::api::derived_schemas`]) and the hand-written
/// ones.
pub fn document(derived: Map<String, Value>) -> Value {
    let mut paths = Map::new();
    for r in ROUTES {
        let entry = paths
            .entry(r.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(m) = entry {
            m.insert(r.method.as_str().to_ascii_lowercase(), operation(r));
        }
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "MMS SD-WAN controller (ssc) API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Inventory (branches, WAN ports), path groups, settings and compiled flows of the SSC (seed 000 §IV, UI module). JSON everywhere; errors are {\"error\": message}. Every /api/v1 route needs `Authorization: Bearer <token>`: GET routes a read-only or admin token, every other method an admin token (401 missing/unknown token, 403 read-only token on a mutating route)."
        },
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": all_schemas(derived),
        },
    })
}
