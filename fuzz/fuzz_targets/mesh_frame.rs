//! Mesh frames come from the network: decoding any bytes must not panic,
//! and a frame that decodes must survive a round trip unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use queen_proto::mesh::{decode, encode};

fuzz_target!(|data: &[u8]| {
    let mut at = 0;
    while let Ok(Some((frame, used))) = decode(&data[at..]) {
        let mut again = Vec::new();
        encode(&frame, &mut again);
        let (back, n) = decode(&again)
            .expect("a re-encoded frame decodes")
            .expect("a re-encoded frame is complete");
        assert_eq!(back, frame);
        assert_eq!(n, again.len());
        at += used;
    }
});
