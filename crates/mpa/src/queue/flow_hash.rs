//! The keyed flow hash that picks an inner flow's bucket in [`super::FairQueue`].

use std::hash::{BuildHasher, Hash, Hasher};

/// A hash of an inner packet's flow (5-tuple; addresses and protocol only when the protocol has no
/// ports), keyed per gateway ([`FlowHasher`]); [`super::FairQueue`] picks the flow's bucket with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowHash(pub u32);

/// Computes [`FlowHash`]es with a secret per-gateway key, so that hosts behind the gateway cannot
/// choose 5-tuples that land in one bucket (fq_codel's hash perturbation, RFC 8290 §5.3). SipHash-1-3
/// (std's `DefaultHasher`) over the key and the flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowHasher {
    key: [u64; 2],
}

impl FlowHasher {
    /// A hasher with a random key (std's per-process random `RandomState` keys, drawn once).
    pub fn random() -> Self {
        let s = std::collections::hash_map::RandomState::new();
        FlowHasher {
            key: [s.hash_one(0x6d6d_7331u32), s.hash_one(0x6d6d_7332u32)],
        }
    }

    /// A hasher with a fixed key (tests, reproducible simulations).
    pub fn with_key(key: [u64; 2]) -> Self {
        FlowHasher { key }
    }

    /// The hash of `flow`.
    pub fn hash(&self, flow: &impl Hash) -> FlowHash {
        let mut h = std::hash::DefaultHasher::new();
        h.write_u64(self.key[0]);
        h.write_u64(self.key[1]);
        flow.hash(&mut h);
        let x = h.finish();
        // Fold to 32 bits; both halves depend on every input bit.
        FlowHash((x ^ (x >> 32)) as u32)
    }
}
