//! The traffic classes of seed 000 §II-A.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The traffic class, highest priority first. Written `type1`, `type2`, `type3` in configs, JSON
/// and the CLI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Class {
    /// Type I: internal inter-branch traffic of the highest priority (prefers leased lines).
    #[serde(rename = "type1", alias = "TypeI")]
    TypeI,
    /// Type II: internal inter-branch traffic, normal priority.
    #[serde(rename = "type2", alias = "TypeII")]
    TypeII,
    /// Type III: external traffic. Never tunnelled: routed straight out a WAN port.
    #[serde(rename = "type3", alias = "TypeIII")]
    TypeIII,
}

impl Class {
    /// The classes that travel in tunnels (one MPTCP connection each per path group).
    pub const TUNNELLED: [Class; 2] = [Class::TypeI, Class::TypeII];

    /// The class byte on the wire (hello and frame header): Type I = 0x01, Type II = 0x02.
    /// Type III never travels in a tunnel and has no wire value.
    pub const fn wire(self) -> Option<u8> {
        match self {
            Class::TypeI => Some(0x01),
            Class::TypeII => Some(0x02),
            Class::TypeIII => None,
        }
    }

    /// The tunnelled class of a wire byte, `None` for anything but 0x01 and 0x02.
    pub const fn from_wire(b: u8) -> Option<Self> {
        match b {
            0x01 => Some(Class::TypeI),
            0x02 => Some(Class::TypeII),
            _ => None,
        }
    }

    /// Whether the class travels in tunnels.
    pub const fn is_tunnelled(self) -> bool {
        !matches!(self, Class::TypeIII)
    }

    /// `type1`, `type2`, `type3`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Class::TypeI => "type1",
            Class::TypeII => "type2",
            Class::TypeIII => "type3",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A class name that is not `type1`, `type2` or `type3`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a traffic class (type1, type2, type3)")]
pub struct ClassParseError(pub String);

impl FromStr for Class {
    type Err = ClassParseError;
    fn from_str(s: &str) -> Result<Self, ClassParseError> {
        match s {
            "type1" => Ok(Class::TypeI),
            "type2" => Ok(Class::TypeII),
            "type3" => Ok(Class::TypeIII),
            _ => Err(ClassParseError(s.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_values() {
        for c in Class::TUNNELLED {
            assert_eq!(c.wire().and_then(Class::from_wire), Some(c));
        }
        assert_eq!(Class::TypeIII.wire(), None);
        assert_eq!(Class::from_wire(0), None);
        assert_eq!(Class::from_wire(3), None);
    }

    #[test]
    fn names() {
        for c in [Class::TypeI, Class::TypeII, Class::TypeIII] {
            assert_eq!(c.to_string().parse::<Class>(), Ok(c));
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{c}\""));
            assert_eq!(serde_json::from_str::<Class>(&json).unwrap(), c);
        }
        assert_eq!(
            serde_json::from_str::<Class>("\"TypeI\"").unwrap(),
            Class::TypeI
        );
    }
}
