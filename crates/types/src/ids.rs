//! The ids of the path code `0xBASG` (seed 000 §III-A): group and member one nibble each; the
//! branch id one nibble in the paper's port plan ([`BranchId::PAPER_MAX`]) and up to
//! [`BranchId::MAX`] = 250 with the extended plan (`crate::PortPlan::Extended`, issue #20).

use std::fmt;

use serde::{Deserialize, Serialize};

/// An id out of its range (the input's fault: a config, a peer's hello, a REST body).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// A branch id that is not 1..=250.
    #[error("branch id {0} is out of range 1..=250")]
    Branch(u8),
    /// A path group id that is not 0..=15.
    #[error("path group id {0} is out of range 0..=15")]
    Group(u8),
    /// A member path id that is not 1..=15.
    #[error("member path id {0} is out of range 1..=15")]
    Member(u8),
}

macro_rules! nibble_id {
    ($(#[$doc:meta])* $name:ident, $min:expr, $max:expr, $err:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "u8", into = "u8")]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        pub struct $name(u8);

        impl $name {
            /// The smallest valid id.
            pub const MIN: u8 = $min;
            /// The largest valid id.
            pub const MAX: u8 = $max;

            /// `Ok` when `id` is in `MIN..=MAX`.
            pub const fn new(id: u8) -> Result<Self, IdError> {
                if id >= Self::MIN && id <= Self::MAX {
                    Ok(Self(id))
                } else {
                    Err(IdError::$err(id))
                }
            }

            /// The id as a number.
            pub const fn get(self) -> u8 {
                self.0
            }

            /// Every valid id, ascending.
            pub fn all() -> impl Iterator<Item = Self> {
                (Self::MIN..=Self::MAX).map(Self)
            }
        }

        impl TryFrom<u8> for $name {
            type Error = IdError;
            fn try_from(id: u8) -> Result<Self, IdError> {
                Self::new(id)
            }
        }

        impl From<$name> for u8 {
            fn from(id: $name) -> u8 {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

nibble_id!(
    /// A branch id, 1..=250. In the paper's port plan (ids 1..=15, [`BranchId::PAPER_MAX`]) it is
    /// nibble B (destination) or A (source) of `0xBASG`; 0 is never a branch, because `0xB00G`
    /// is the listen port. Larger ids need the extended port plan (`crate::PortPlan`).
    BranchId,
    1,
    250,
    Branch
);

impl BranchId {
    /// The largest id the paper's port plan `0xBASG` can carry (one nibble).
    pub const PAPER_MAX: u8 = 15;

    /// Whether this id fits one nibble of `0xBASG` (the paper's port plan).
    pub const fn fits_paper(self) -> bool {
        self.0 <= Self::PAPER_MAX
    }
}

nibble_id!(
    /// A path group id, 0..=15: nibble G of `0xBASG` and of the listen port `0xB00G`.
    PathGroupId,
    0,
    15,
    Group
);

nibble_id!(
    /// A member path id, 1..=15: nibble S of `0xBASG` (0 marks the listen port, as in the paper).
    MemberId,
    1,
    15,
    Member
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(BranchId::new(0), Err(IdError::Branch(0)));
        assert_eq!(BranchId::new(15).map(BranchId::get), Ok(15));
        assert_eq!(BranchId::new(250).map(BranchId::get), Ok(250));
        assert_eq!(BranchId::new(251), Err(IdError::Branch(251)));
        assert!(BranchId::new(15).unwrap().fits_paper());
        assert!(!BranchId::new(16).unwrap().fits_paper());
        assert_eq!(PathGroupId::new(0).map(u8::from), Ok(0));
        assert_eq!(PathGroupId::new(16), Err(IdError::Group(16)));
        assert_eq!(MemberId::new(0), Err(IdError::Member(0)));
        assert_eq!(BranchId::all().count(), 250);
        assert_eq!(PathGroupId::all().count(), 16);
    }

    #[test]
    fn serde_validates_once_at_the_edge() {
        let b: BranchId = serde_json::from_str("7").unwrap();
        assert_eq!(b.get(), 7);
        assert_eq!(serde_json::to_string(&b).unwrap(), "7");
        let err = serde_json::from_str::<BranchId>("251")
            .unwrap_err()
            .to_string();
        assert!(err.contains("branch id 251 is out of range"), "{err}");
        assert!(serde_json::from_str::<PathGroupId>("16").is_err());
    }
}
