//! Spool records are read back from disk after crashes: decoding any bytes
//! must not panic, and a record that decodes must re-encode to the very
//! bytes it came from (the checksum covers them).
#![no_main]

use libfuzzer_sys::fuzz_target;
use queen_proto::spool::{decode, encode};

fuzz_target!(|data: &[u8]| {
    let mut at = 0;
    while let Ok(Some((record, used))) = decode(&data[at..]) {
        let mut again = Vec::new();
        encode(&record, &mut again).expect("a decoded record encodes");
        assert_eq!(&again[..], &data[at..at + used]);
        at += used;
    }
});
