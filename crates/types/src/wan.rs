//! What a WAN port is attached to (seed 000 §II-A).

use serde::{Deserialize, Serialize};

/// The kind of a WAN port: public internet access or a leased line.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum WanKind {
    /// A public internet access (xDSL, PON, cable, LTE/5G): reaches every other internet port.
    #[default]
    Internet,
    /// A leased line: reaches only the port at its other end; carries Type I first, Type II
    /// only with spare capacity.
    Leased,
}
