//! The binary push and transaction bodies (`QPB1`, `QTB1`) come from anyone
//! who reaches the port. For any bytes: decoding must not panic nor inflate
//! zstd past the bound, and items that decode must decode again, equal,
//! from their re-encoding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use queen_proto::push_binary::{
    decode_push, decode_transaction, encode_push, encode_transaction, kind, regroup, Form, Kind,
    Limits,
};

/// Small bounds, so that a run spends its time on the parser.
const LIMITS: Limits = Limits {
    max_decoded_bytes: 1 << 20,
    max_payload_depth: 64,
    max_items: 10_000,
};

fuzz_target!(|data: &[u8]| {
    match kind(data) {
        Some(Kind::Push) => {
            let Ok(body) = decode_push(data, &LIMITS) else {
                return;
            };
            let form = if body.items.iter().all(|i| i.message_id.is_some()) {
                Form::Frames
            } else {
                Form::Plain { zstd: false }
            };
            let again = encode_push(&regroup(&body.items), form, body.counts).expect("encodes");
            let decoded = decode_push(&again, &LIMITS).expect("a re-encoding decodes");
            assert_eq!(decoded, body);
        }
        Some(Kind::Transaction) => {
            let Ok(body) = decode_transaction(data, &LIMITS) else {
                return;
            };
            let again = encode_transaction(body.head.as_bytes(), &regroup(&body.items), body.counts)
                .expect("encodes");
            let decoded = decode_transaction(&again, &LIMITS).expect("a re-encoding decodes");
            assert_eq!(decoded, body);
        }
        None => {}
    }
});
