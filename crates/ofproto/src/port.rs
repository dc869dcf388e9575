//! Port description `ofp_port` (OpenFlow 1.3.5 §7.2.1), used by PORT_STATUS and PORT_DESC.
//!
//! ```text
//! ofp_port (64 bytes):
//! | port_no u32 | pad[4] | hw_addr[6] | pad[2] | name[16] |
//! | config u32 | state u32 | curr u32 | advertised u32 | supported u32 | peer u32 |
//! | curr_speed u32 | max_speed u32 |
//! ```

use crate::error::{DecodeError, EncodeError};
use crate::oxm::MacAddr;
use crate::wire::{get_fixed_str, put_fixed_str, put_u32, put_zeros, Reader};

/// `OFP_MAX_PORT_NAME_LEN`.
pub const OFP_MAX_PORT_NAME_LEN: usize = 16;

/// Reserved port numbers (`ofp_port_no`, §7.2.1).
pub mod ofpp {
    /// Maximum number of physical and logical switch ports.
    pub const MAX: u32 = 0xffff_ff00;
    /// Send the packet out the input port.
    pub const IN_PORT: u32 = 0xffff_fff8;
    /// Submit the packet to the first flow table (packet-out only).
    pub const TABLE: u32 = 0xffff_fff9;
    /// Forward using non-OpenFlow pipeline.
    pub const NORMAL: u32 = 0xffff_fffa;
    /// Flood using non-OpenFlow pipeline.
    pub const FLOOD: u32 = 0xffff_fffb;
    /// All standard ports except input port.
    pub const ALL: u32 = 0xffff_fffc;
    /// Send to controller.
    pub const CONTROLLER: u32 = 0xffff_fffd;
    /// Local openflow "port".
    pub const LOCAL: u32 = 0xffff_fffe;
    /// Special value used in some requests when no port is specified (wildcarded).
    pub const ANY: u32 = 0xffff_ffff;
}

/// One port (`ofp_port`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Port {
    /// Port number.
    pub port_no: u32,
    /// Ethernet address.
    pub hw_addr: MacAddr,
    /// Name: bytes before the first NUL, at most 16.
    pub name: Vec<u8>,
    /// OFPPC_* bits.
    pub config: u32,
    /// OFPPS_* bits.
    pub state: u32,
    /// Current features (OFPPF_*).
    pub curr: u32,
    /// Features being advertised.
    pub advertised: u32,
    /// Features supported.
    pub supported: u32,
    /// Features advertised by peer.
    pub peer: u32,
    /// Current bitrate in kbps.
    pub curr_speed: u32,
    /// Max bitrate in kbps.
    pub max_speed: u32,
}

impl Port {
    /// Bytes on the wire.
    pub const LEN: usize = 64;

    /// The name as text (lossy).
    pub fn name_str(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_u32(out, self.port_no);
        put_zeros(out, 4);
        out.extend_from_slice(&self.hw_addr.0);
        put_zeros(out, 2);
        put_fixed_str(out, &self.name, OFP_MAX_PORT_NAME_LEN, "ofp_port.name")?;
        for v in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
            self.curr_speed,
            self.max_speed,
        ] {
            put_u32(out, v);
        }
        Ok(())
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let port_no = r.u32()?;
        r.skip(4)?;
        let hw_addr = MacAddr(r.array()?);
        r.skip(2)?;
        let name = get_fixed_str(r, OFP_MAX_PORT_NAME_LEN)?;
        Ok(Port {
            port_no,
            hw_addr,
            name,
            config: r.u32()?,
            state: r.u32()?,
            curr: r.u32()?,
            advertised: r.u32()?,
            supported: r.u32()?,
            peer: r.u32()?,
            curr_speed: r.u32()?,
            max_speed: r.u32()?,
        })
    }
}
