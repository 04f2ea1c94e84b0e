//! The strict mesh handshake as a listener runs it, fed bytes from the
//! network: it must never panic, and bytes made without the secret must
//! never authenticate (`queen_proto::mesh_auth::fuzz_listener`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    assert!(
        !queen_proto::mesh_auth::fuzz_listener(data),
        "input authenticated without the secret"
    );
});
