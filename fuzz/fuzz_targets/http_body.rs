//! Request bodies come from anyone who reaches the port. For any bytes: the
//! payload check and the NUL walk of the broker's body parsers must not panic
//! (nor overflow the stack, whatever the nesting), and a payload the check
//! accepts must parse with a strict parser into a value whose serialization
//! parses again: what push accepts, pop can return to any JSON reader.
#![no_main]

use libfuzzer_sys::fuzz_target;
use queen_proto::payload::{check_payload, nul_field};
use serde_json::Value;

/// The broker's default `MAX_PAYLOAD_DEPTH`.
const DEPTH: usize = 64;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if check_payload(text, DEPTH).is_ok() {
        let v: Value = serde_json::from_str(text).expect("an accepted payload parses");
        // its serialization parses again (equality is not asserted: the
        // parser's float reading is not exactly rounded)
        let _: Value = serde_json::from_str(&v.to_string()).expect("its serialization parses");
    }
    if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) {
        if let Some(field) = nul_field(&map) {
            assert!(!field.is_empty());
        }
    }
});
