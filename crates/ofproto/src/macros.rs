//! Macros shared by the codecs; this module imports nothing else of the crate.
//!
//! `enum_with_unknown!` defines the C-like wire enums of OpenFlow 1.3.5 §7 (`ofp_type`,
//! `ofp_group_type`, the OFPET_* codes, ...) so that values the spec adds later still round-trip
//! (STYLE.md §3).

/// Defines a C-like enum over an integer wire type that keeps unknown values
/// (`Unknown(v)`), so they round-trip (STYLE.md §3, after smoltcp's `enum_with_unknown!`).
macro_rules! enum_with_unknown {
    (
        $(#[$m:meta])*
        pub enum $name:ident($ty:ty) {
            $( $(#[$vm:meta])* $var:ident = $val:expr ),+ $(,)?
        }
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vm])* $var, )+
            /// A value this crate does not name; kept verbatim so it round-trips.
            Unknown($ty),
        }

        impl From<$ty> for $name {
            fn from(v: $ty) -> Self {
                match v {
                    $( $val => $name::$var, )+
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$name> for $ty {
            fn from(v: $name) -> $ty {
                match v {
                    $( $name::$var => $val, )+
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}
pub(crate) use enum_with_unknown;
