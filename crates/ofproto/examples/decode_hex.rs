//! Decodes OpenFlow 1.3 messages given as hex (arguments, or stdin) and prints them — handy with
//! `ovs-ofctl -O OpenFlow13 --names ...` captures, tcpdump hex, or an OVS log line.
//!
//! ```sh
//! cargo run -p ofproto --example decode_hex -- 0400000800000001
//! echo "0412 0010 0000 0040 000d 0000 0000 0000" | cargo run -p ofproto --example decode_hex
//! ```

use std::io::Read;
use std::process::ExitCode;

use ofproto::Message;

fn main() -> ExitCode {
    let mut text: String = std::env::args().skip(1).collect::<Vec<_>>().join("");
    if text.is_empty() && std::io::stdin().read_to_string(&mut text).is_err() {
        eprintln!("cannot read stdin");
        return ExitCode::FAILURE;
    }
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    let bytes: Option<Vec<u8>> = digits
        .chunks(2)
        .map(|p| {
            std::str::from_utf8(p)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok())
        })
        .collect();
    let Some(bytes) = bytes.filter(|_| digits.len() % 2 == 0) else {
        eprintln!("input is not an even number of hex digits");
        return ExitCode::FAILURE;
    };
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        match Message::decode(rest) {
            Ok(Some((m, used))) => {
                println!("{m:#?}");
                rest = rest.get(used..).unwrap_or_default();
            }
            Ok(None) => {
                eprintln!("{} trailing bytes: incomplete message", rest.len());
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("invalid message: {e} (answer: {:?})", e.to_ofp_error());
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
