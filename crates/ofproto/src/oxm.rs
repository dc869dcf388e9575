//! OXM match fields and `ofp_match` (OpenFlow 1.3.5 §7.2.3).
//!
//! Every OpenFlow-basic field (OFPXMT_OFB_*, 0..=39) is typed; every field may carry a mask on the
//! wire (Open vSwitch accepts masks on more fields than the spec lists), and [`Match::validate`]
//! reports masks the spec does not allow plus missing prerequisites (§7.2.3.6). Fields of other
//! classes (Nicira NXM, experimenter) are kept verbatim as [`OtherOxm`].
//!
//! A [`Match`] keeps its fields sorted by (class, field, experimenter), which is the order they are
//! emitted in, so equal matches give equal bytes (STYLE.md §3) — the same order os-ken uses.
//!
//! ```text
//! OXM TLV header (§7.2.3.2):
//!  0               1               2               3
//! +---------------+---------------+---------------+---------------+
//! |          oxm_class            | oxm_field   |M|  oxm_length   |
//! +---------------+---------------+---------------+---------------+
//! |   value (oxm_length or oxm_length/2 when M)  [ mask ]          |
//!
//! ofp_match (§7.2.3.1):
//! +---------------+---------------+-------------------------------+
//! |   type = OFPMT_OXM (0x0001)   | length (excluding padding)    |
//! +---------------+---------------+-------------------------------+
//! |  OXM TLVs ... | zero padding to a multiple of 8               |
//! ```

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::error::{DecodeError, EncodeError};
use crate::wire::{pad8, patch_len16, put_u16, put_u32, put_zeros, Reader};

/// `OFPXMC_NXM_0`: Nicira extension class 0.
pub const OFPXMC_NXM_0: u16 = 0x0000;
/// `OFPXMC_NXM_1`: Nicira extension class 1.
pub const OFPXMC_NXM_1: u16 = 0x0001;
/// `OFPXMC_OPENFLOW_BASIC`: the class of every field typed here.
pub const OFPXMC_OPENFLOW_BASIC: u16 = 0x8000;
/// `OFPXMC_EXPERIMENTER`: payload starts with a 32-bit experimenter id.
pub const OFPXMC_EXPERIMENTER: u16 = 0xffff;
/// `OFPMT_OXM`: the only match type of OpenFlow 1.3.
pub const OFPMT_OXM: u16 = 0x0001;
/// `OFPVID_PRESENT`: bit set in VLAN_VID when a VLAN tag is present.
pub const OFPVID_PRESENT: u16 = 0x1000;
/// `OFPVID_NONE`: VLAN_VID value matching packets without a VLAN tag.
pub const OFPVID_NONE: u16 = 0x0000;

/// A 48-bit Ethernet address: the MMS domain type, so a switch's `eth_src` and an inventory's
/// next-hop MAC are one type.
pub use mms_types::MacAddr;

/// A 24-bit unsigned value (PBB I-SID is 3 bytes on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct U24(u32);

impl U24 {
    /// The largest value.
    pub const MAX: u32 = 0x00ff_ffff;

    /// `v` if it fits in 24 bits.
    pub const fn new(v: u32) -> Option<Self> {
        if v <= Self::MAX {
            Some(Self(v))
        } else {
            None
        }
    }

    /// The value.
    pub const fn get(self) -> u32 {
        self.0
    }
}

/// A type that can be the value (and mask) of an OXM field.
pub(crate) trait OxmValue: Sized + Copy {
    /// Bytes on the wire.
    const LEN: usize;
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError>;
    fn write(&self, out: &mut Vec<u8>);
}

impl OxmValue for u8 {
    const LEN: usize = 1;
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.u8()
    }
    fn write(&self, out: &mut Vec<u8>) {
        out.push(*self);
    }
}

impl OxmValue for u16 {
    const LEN: usize = 2;
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.u16()
    }
    fn write(&self, out: &mut Vec<u8>) {
        put_u16(out, *self);
    }
}

impl OxmValue for u32 {
    const LEN: usize = 4;
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.u32()
    }
    fn write(&self, out: &mut Vec<u8>) {
        put_u32(out, *self);
    }
}

impl OxmValue for u64 {
    const LEN: usize = 8;
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.u64()
    }
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_be_bytes());
    }
}

impl OxmValue for MacAddr {
    const LEN: usize = 6;
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(MacAddr(r.array()?))
    }
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0);
    }
}

impl OxmValue for Ipv4Addr {
    const LEN: usize = 4;
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Ipv4Addr::from(r.array::<4>()?))
    }
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.octets());
    }
}

impl OxmValue for Ipv6Addr {
    const LEN: usize = 16;
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Ipv6Addr::from(r.array::<16>()?))
    }
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.octets());
    }
}

impl OxmValue for U24 {
    const LEN: usize = 3;
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let [a, b, c] = r.array::<3>()?;
        Ok(U24(u32::from_be_bytes([0, a, b, c])))
    }
    fn write(&self, out: &mut Vec<u8>) {
        let [_, a, b, c] = self.0.to_be_bytes();
        out.extend_from_slice(&[a, b, c]);
    }
}

/// An OXM field of a class this crate does not type (NXM, experimenter, or an OpenFlow-basic
/// field number above 39), kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OtherOxm {
    /// `oxm_class`.
    pub class: u16,
    /// `oxm_field` (7 bits).
    pub field: u8,
    /// `oxm_hasmask`.
    pub hasmask: bool,
    /// The payload (for OFPXMC_EXPERIMENTER it starts with the experimenter id), at most 255 bytes.
    pub payload: Vec<u8>,
}

macro_rules! oxm_basic_fields {
    ( $( $(#[$doc:meta])* $var:ident = $num:literal : $ty:ty, maskable = $mask:literal; )+ ) => {
        /// One OXM match field (or set-field target): value and optional mask.
        ///
        /// Each OpenFlow-basic variant holds `(value, mask)`; the spec number and whether the spec
        /// allows a mask are listed on each variant.
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum OxmField {
            $( $(#[$doc])* $var($ty, Option<$ty>), )+
            /// Any other field, verbatim.
            Other(OtherOxm),
        }

        impl OxmField {
            /// `oxm_class`.
            pub fn class(&self) -> u16 {
                match self {
                    $( Self::$var(..) => OFPXMC_OPENFLOW_BASIC, )+
                    Self::Other(o) => o.class,
                }
            }

            /// `oxm_field`.
            pub fn field(&self) -> u8 {
                match self {
                    $( Self::$var(..) => $num, )+
                    Self::Other(o) => o.field,
                }
            }

            /// Whether a mask is present.
            pub fn has_mask(&self) -> bool {
                match self {
                    $( Self::$var(_, m) => m.is_some(), )+
                    Self::Other(o) => o.hasmask,
                }
            }

            /// Whether OpenFlow 1.3.5 (table 13) allows a mask on this field.
            pub fn mask_allowed(&self) -> bool {
                match self {
                    $( Self::$var(..) => $mask, )+
                    Self::Other(_) => true,
                }
            }

            /// `oxm_length`: payload bytes (value plus mask).
            pub fn payload_len(&self) -> usize {
                match self {
                    $( Self::$var(_, m) => {
                        <$ty as OxmValue>::LEN * if m.is_some() { 2 } else { 1 }
                    } )+
                    Self::Other(o) => o.payload.len(),
                }
            }

            fn write_payload(&self, out: &mut Vec<u8>) {
                match self {
                    $( Self::$var(v, m) => {
                        v.write(out);
                        if let Some(m) = m {
                            m.write(out);
                        }
                    } )+
                    Self::Other(o) => out.extend_from_slice(&o.payload),
                }
            }

            /// Decodes an OpenFlow-basic payload; `Ok(None)` for a field number not typed here.
            fn decode_basic(field: u8, hasmask: bool, payload: &[u8]) -> Result<Option<Self>, DecodeError> {
                let bad = DecodeError::BadOxmLength { field, len: payload.len() as u8 };
                let mut r = Reader::new(payload, "OXM field");
                let f = match field {
                    $( $num => {
                        if payload.len() != <$ty as OxmValue>::LEN * if hasmask { 2 } else { 1 } {
                            return Err(bad);
                        }
                        let v = <$ty as OxmValue>::read(&mut r)?;
                        let m = if hasmask { Some(<$ty as OxmValue>::read(&mut r)?) } else { None };
                        Self::$var(v, m)
                    } )+
                    _ => return Ok(None),
                };
                r.finish()?;
                Ok(Some(f))
            }
        }
    };
}

oxm_basic_fields! {
    /// OFPXMT_OFB_IN_PORT (0): switch input port.
    InPort = 0: u32, maskable = false;
    /// OFPXMT_OFB_IN_PHY_PORT (1): switch physical input port.
    InPhyPort = 1: u32, maskable = false;
    /// OFPXMT_OFB_METADATA (2): metadata passed between tables.
    Metadata = 2: u64, maskable = true;
    /// OFPXMT_OFB_ETH_DST (3).
    EthDst = 3: MacAddr, maskable = true;
    /// OFPXMT_OFB_ETH_SRC (4).
    EthSrc = 4: MacAddr, maskable = true;
    /// OFPXMT_OFB_ETH_TYPE (5).
    EthType = 5: u16, maskable = false;
    /// OFPXMT_OFB_VLAN_VID (6): VLAN id with OFPVID_PRESENT.
    VlanVid = 6: u16, maskable = true;
    /// OFPXMT_OFB_VLAN_PCP (7).
    VlanPcp = 7: u8, maskable = false;
    /// OFPXMT_OFB_IP_DSCP (8).
    IpDscp = 8: u8, maskable = false;
    /// OFPXMT_OFB_IP_ECN (9).
    IpEcn = 9: u8, maskable = false;
    /// OFPXMT_OFB_IP_PROTO (10).
    IpProto = 10: u8, maskable = false;
    /// OFPXMT_OFB_IPV4_SRC (11).
    Ipv4Src = 11: Ipv4Addr, maskable = true;
    /// OFPXMT_OFB_IPV4_DST (12).
    Ipv4Dst = 12: Ipv4Addr, maskable = true;
    /// OFPXMT_OFB_TCP_SRC (13).
    TcpSrc = 13: u16, maskable = false;
    /// OFPXMT_OFB_TCP_DST (14).
    TcpDst = 14: u16, maskable = false;
    /// OFPXMT_OFB_UDP_SRC (15).
    UdpSrc = 15: u16, maskable = false;
    /// OFPXMT_OFB_UDP_DST (16).
    UdpDst = 16: u16, maskable = false;
    /// OFPXMT_OFB_SCTP_SRC (17).
    SctpSrc = 17: u16, maskable = false;
    /// OFPXMT_OFB_SCTP_DST (18).
    SctpDst = 18: u16, maskable = false;
    /// OFPXMT_OFB_ICMPV4_TYPE (19).
    Icmpv4Type = 19: u8, maskable = false;
    /// OFPXMT_OFB_ICMPV4_CODE (20).
    Icmpv4Code = 20: u8, maskable = false;
    /// OFPXMT_OFB_ARP_OP (21).
    ArpOp = 21: u16, maskable = false;
    /// OFPXMT_OFB_ARP_SPA (22).
    ArpSpa = 22: Ipv4Addr, maskable = true;
    /// OFPXMT_OFB_ARP_TPA (23).
    ArpTpa = 23: Ipv4Addr, maskable = true;
    /// OFPXMT_OFB_ARP_SHA (24).
    ArpSha = 24: MacAddr, maskable = true;
    /// OFPXMT_OFB_ARP_THA (25).
    ArpTha = 25: MacAddr, maskable = true;
    /// OFPXMT_OFB_IPV6_SRC (26).
    Ipv6Src = 26: Ipv6Addr, maskable = true;
    /// OFPXMT_OFB_IPV6_DST (27).
    Ipv6Dst = 27: Ipv6Addr, maskable = true;
    /// OFPXMT_OFB_IPV6_FLABEL (28).
    Ipv6Flabel = 28: u32, maskable = true;
    /// OFPXMT_OFB_ICMPV6_TYPE (29).
    Icmpv6Type = 29: u8, maskable = false;
    /// OFPXMT_OFB_ICMPV6_CODE (30).
    Icmpv6Code = 30: u8, maskable = false;
    /// OFPXMT_OFB_IPV6_ND_TARGET (31).
    Ipv6NdTarget = 31: Ipv6Addr, maskable = false;
    /// OFPXMT_OFB_IPV6_ND_SLL (32).
    Ipv6NdSll = 32: MacAddr, maskable = false;
    /// OFPXMT_OFB_IPV6_ND_TLL (33).
    Ipv6NdTll = 33: MacAddr, maskable = false;
    /// OFPXMT_OFB_MPLS_LABEL (34).
    MplsLabel = 34: u32, maskable = false;
    /// OFPXMT_OFB_MPLS_TC (35).
    MplsTc = 35: u8, maskable = false;
    /// OFPXMT_OFB_MPLS_BOS (36).
    MplsBos = 36: u8, maskable = false;
    /// OFPXMT_OFB_PBB_ISID (37).
    PbbIsid = 37: U24, maskable = true;
    /// OFPXMT_OFB_TUNNEL_ID (38).
    TunnelId = 38: u64, maskable = true;
    /// OFPXMT_OFB_IPV6_EXTHDR (39).
    Ipv6Exthdr = 39: u16, maskable = true;
}

/// The key fields are ordered and deduplicated by: (class, field, experimenter id).
pub(crate) type OxmKey = (u16, u8, u32);

impl OxmField {
    /// The canonical sort key.
    pub(crate) fn key(&self) -> OxmKey {
        let exp = match self {
            Self::Other(o) if o.class == OFPXMC_EXPERIMENTER => {
                let mut r = Reader::new(&o.payload, "OXM experimenter");
                r.u32().unwrap_or(0)
            }
            _ => 0,
        };
        (self.class(), self.field(), exp)
    }

    /// Bytes this TLV takes (4-byte header plus payload).
    pub fn encoded_len(&self) -> usize {
        4 + self.payload_len()
    }

    /// Appends the TLV.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let len = self.payload_len();
        let len8 = u8::try_from(len).map_err(|_| EncodeError::TooLong {
            what: "OXM field",
            len,
        })?;
        put_u16(out, self.class());
        out.push(((self.field() & 0x7f) << 1) | u8::from(self.has_mask()));
        out.push(len8);
        self.write_payload(out);
        Ok(())
    }

    /// Decodes one TLV from `r`.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let class = r.u16()?;
        let fh = r.u8()?;
        let len = r.u8()?;
        let field = fh >> 1;
        let hasmask = fh & 1 == 1;
        let payload = r.bytes(usize::from(len))?;
        if class == OFPXMC_OPENFLOW_BASIC {
            if let Some(f) = Self::decode_basic(field, hasmask, payload)? {
                return Ok(f);
            }
        }
        if class == OFPXMC_EXPERIMENTER && payload.len() < 4 {
            return Err(DecodeError::BadLength {
                what: "OXM experimenter field",
                len: payload.len(),
            });
        }
        Ok(Self::Other(OtherOxm {
            class,
            field,
            hasmask,
            payload: payload.to_vec(),
        }))
    }

    /// The value as a u64 when this is an exact (unmasked) match on a basic integer field.
    fn exact_u64(&self) -> Option<u64> {
        match self {
            Self::EthType(v, None) | Self::VlanVid(v, None) => Some(u64::from(*v)),
            Self::IpProto(v, None) | Self::Icmpv6Type(v, None) => Some(u64::from(*v)),
            _ => None,
        }
    }
}

/// A match (`ofp_match` of type OFPMT_OXM) with its fields in canonical order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Match {
    fields: Vec<OxmField>,
}

/// A spec violation found by [`Match::validate`]; maps to OFPET_BAD_MATCH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    /// The field's prerequisite (§7.2.3.6, table 12) is missing or not an exact match.
    #[error("OXM basic field {0}: prerequisite missing (OFPBMC_BAD_PREREQ)")]
    BadPrereq(u8),
    /// The field carries a mask the spec does not allow (OFPBMC_BAD_MASK).
    #[error("OXM basic field {0}: mask not allowed (OFPBMC_BAD_MASK)")]
    BadMask(u8),
}

impl Match {
    /// The empty match (matches every packet).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `f`, replacing a field with the same class/field; keeps canonical order.
    pub fn with(mut self, f: OxmField) -> Self {
        self.insert(f);
        self
    }

    /// Adds `f`, replacing a field with the same class/field; keeps canonical order.
    pub fn insert(&mut self, f: OxmField) {
        let key = f.key();
        match self.fields.binary_search_by(|x| x.key().cmp(&key)) {
            Ok(i) => {
                if let Some(slot) = self.fields.get_mut(i) {
                    *slot = f;
                }
            }
            Err(i) => self.fields.insert(i, f),
        }
    }

    /// The fields, in canonical order.
    pub fn fields(&self) -> &[OxmField] {
        &self.fields
    }

    /// Whether there are no fields.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The basic field number `field`, if present.
    pub fn basic(&self, field: u8) -> Option<&OxmField> {
        self.fields
            .iter()
            .find(|f| f.class() == OFPXMC_OPENFLOW_BASIC && f.field() == field)
    }

    fn exact(&self, field: u8) -> Option<u64> {
        self.basic(field).and_then(OxmField::exact_u64)
    }

    /// Checks prerequisites (§7.2.3.6) and that masks appear only where the spec allows them.
    pub fn validate(&self) -> Result<(), MatchError> {
        for f in &self.fields {
            if f.class() != OFPXMC_OPENFLOW_BASIC {
                continue;
            }
            if f.has_mask() && !f.mask_allowed() {
                return Err(MatchError::BadMask(f.field()));
            }
            if !self.prereq_ok(f.field()) {
                return Err(MatchError::BadPrereq(f.field()));
            }
        }
        Ok(())
    }

    fn prereq_ok(&self, field: u8) -> bool {
        let eth = self.exact(5);
        let proto = self.exact(10);
        let ip = eth == Some(0x0800) || eth == Some(0x86dd);
        match field {
            1 => self.basic(0).is_some(),
            7 => matches!(self.basic(6), Some(f) if f.exact_u64() != Some(u64::from(OFPVID_NONE))),
            8..=10 => ip,
            11 | 12 => eth == Some(0x0800),
            13 | 14 => ip && proto == Some(6),
            15 | 16 => ip && proto == Some(17),
            17 | 18 => ip && proto == Some(132),
            19 | 20 => eth == Some(0x0800) && proto == Some(1),
            21..=25 => eth == Some(0x0806),
            26..=28 | 39 => eth == Some(0x86dd),
            29 | 30 => eth == Some(0x86dd) && proto == Some(58),
            31 => matches!(self.exact(29), Some(135 | 136)),
            32 => self.exact(29) == Some(135),
            33 => self.exact(29) == Some(136),
            34..=36 => eth == Some(0x8847) || eth == Some(0x8848),
            37 => eth == Some(0x88e7),
            _ => true,
        }
    }

    /// `ofp_match.length`: header plus TLVs, excluding padding.
    pub fn unpadded_len(&self) -> usize {
        4 + self.fields.iter().map(OxmField::encoded_len).sum::<usize>()
    }

    /// Bytes on the wire, padding included.
    pub fn encoded_len(&self) -> usize {
        let l = self.unpadded_len();
        l + pad8(l)
    }

    /// Appends the `ofp_match`, padding included.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        put_u16(out, OFPMT_OXM);
        put_u16(out, 0);
        for f in &self.fields {
            f.encode(out)?;
        }
        let len = out.len() - start;
        patch_len16(out, start + 2, len, "ofp_match")?;
        put_zeros(out, pad8(len));
        Ok(())
    }

    /// Decodes an `ofp_match` and its padding.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let typ = r.u16()?;
        let len = usize::from(r.u16()?);
        if typ != OFPMT_OXM {
            return Err(DecodeError::BadMatchType(typ));
        }
        if len < 4 {
            return Err(DecodeError::BadLength {
                what: "ofp_match",
                len,
            });
        }
        let mut body = r.sub(len - 4, "ofp_match")?;
        r.skip(pad8(len))?;
        // A typical TLV is 5..8 bytes (swap matches: 5 fields in 33 bytes); one slot per 6 bytes
        // avoids regrowth without allocating more than ~8x the input.
        let mut fields = Vec::with_capacity(body.remaining() / 6);
        while !body.is_empty() {
            fields.push(OxmField::decode(&mut body)?);
        }
        // Canonical order; OVS emits fields in its own order, so sort (stably) when needed.
        // One pass both checks order and finds duplicates of an already sorted list.
        let mut sorted = true;
        let mut prev: Option<OxmKey> = None;
        for f in &fields {
            let k = f.key();
            match prev {
                Some(p) if k < p => {
                    sorted = false;
                    break;
                }
                Some(p) if k == p => {
                    return Err(DecodeError::DuplicateOxm {
                        class: k.0,
                        field: k.1,
                    })
                }
                _ => prev = Some(k),
            }
        }
        if !sorted {
            fields.sort_by_key(OxmField::key);
            for w in fields.windows(2) {
                if let [a, b] = w {
                    if a.key() == b.key() {
                        let (class, field, _) = a.key();
                        return Err(DecodeError::DuplicateOxm { class, field });
                    }
                }
            }
        }
        let m = Match { fields };
        Ok(m)
    }
}

impl FromIterator<OxmField> for Match {
    fn from_iter<I: IntoIterator<Item = OxmField>>(iter: I) -> Self {
        let mut m = Match::new();
        for f in iter {
            m.insert(f);
        }
        m
    }
}
