//! xtask library (testbed, WAN emulator).
