//! Round trips of generated bodies, and what the fuzz target asserts.

use proptest::prelude::*;

use super::*;

fn json_payload() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        "\\PC{0,30}".prop_map(|s| serde_json::Value::String(s).to_string()),
        ("[a-z]{1,8}", any::<bool>())
            .prop_map(|(k, v)| serde_json::json!({ k: [v, null, 1.5] }).to_string()),
    ]
}

#[derive(Debug, Clone)]
struct Gen {
    queue: String,
    partition: String,
    messages: Vec<(String, u128, String)>,
}

fn batches() -> impl Strategy<Value = Vec<Gen>> {
    let message = ("[a-zA-Z0-9:-]{0,40}", any::<u128>(), json_payload());
    let batch = (
        "[a-z][a-z0-9.-]{0,20}",
        "[a-zA-Z0-9 _:é-]{1,20}",
        proptest::collection::vec(message, 1..6),
    )
        .prop_map(|(queue, partition, messages)| Gen {
            queue,
            partition,
            messages,
        });
    proptest::collection::vec(batch, 1..5)
}

fn to_batches(gens: &[Gen]) -> Vec<Batch<'_>> {
    gens.iter()
        .map(|g| Batch {
            queue: &g.queue,
            partition: &g.partition,
            messages: g
                .messages
                .iter()
                .map(|(t, id, p)| Message {
                    transaction_id: t,
                    message_id: Uuid::from_u128(*id),
                    payload: p.as_bytes(),
                })
                .collect(),
        })
        .collect()
}

/// The items a decoder must give for `gens` written in `form`.
fn expected(gens: &[Gen], frames: bool) -> Vec<Item> {
    let mut out = Vec::new();
    for g in gens {
        for (t, id, p) in &g.messages {
            let id = Uuid::from_u128(*id);
            let txn = match (t.is_empty(), frames) {
                (false, _) => Some(t.clone()),
                (true, true) => Some(id.to_string()),
                (true, false) => None,
            };
            out.push(Item {
                queue: QueueName::new(g.queue.clone()).unwrap(),
                partition: PartitionName::new(g.partition.clone()).unwrap(),
                transaction_id: txn,
                message_id: frames.then_some(id),
                payload: p.clone(),
            });
        }
    }
    out
}

/// Decodes `bytes` as whichever body its magic announces and, when it
/// decodes, checks the items survive a re-encoding: what the fuzz target and
/// the corpus replay assert.
pub(crate) fn decode_and_reencode(bytes: &[u8]) {
    let (items, counts, head) = match kind(bytes) {
        Some(Kind::Push) => match decode_push(bytes, &LIMITS) {
            Ok(b) => (b.items, b.counts, None),
            Err(_) => return,
        },
        Some(Kind::Transaction) => match decode_transaction(bytes, &LIMITS) {
            Ok(b) => (b.items, b.counts, Some(b.head.to_owned())),
            Err(_) => return,
        },
        None => return,
    };
    let framed = items.iter().all(|i| i.message_id.is_some());
    let again = match &head {
        Some(h) => encode_transaction(h.as_bytes(), &regroup(&items), counts).unwrap(),
        None if framed => encode_push(&regroup(&items), Form::Frames, counts).unwrap(),
        None => encode_push(&regroup(&items), Form::Plain { zstd: false }, counts).unwrap(),
    };
    let decoded = match &head {
        Some(_) => decode_transaction(&again, &LIMITS).unwrap().items,
        None => decode_push(&again, &LIMITS).unwrap().items,
    };
    assert_eq!(decoded, items);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn push_bodies_round_trip(gens in batches(), counts in any::<bool>()) {
        let b = to_batches(&gens);
        for (form, framed) in [
            (Form::Plain { zstd: false }, false),
            (Form::Plain { zstd: true }, false),
            (Form::Frames, true),
        ] {
            let bytes = encode_push(&b, form, counts).unwrap();
            let body = decode_push(&bytes, &LIMITS).unwrap();
            prop_assert_eq!(body.counts, counts);
            prop_assert_eq!(&body.items, &expected(&gens, framed));
            decode_and_reencode(&bytes);
        }
    }

    #[test]
    fn transaction_bodies_round_trip(gens in batches(), head in "\\PC{0,40}") {
        let bytes = encode_transaction(head.as_bytes(), &to_batches(&gens), false).unwrap();
        let body = decode_transaction(&bytes, &LIMITS).unwrap();
        prop_assert_eq!(body.head, head.as_str());
        prop_assert_eq!(&body.items, &expected(&gens, true));
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        magic in prop_oneof![Just(*b"QPB1"), Just(*b"QTB1")],
        flags in any::<u8>(),
        rest in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut bytes = magic.to_vec();
        bytes.push(flags);
        bytes.extend_from_slice(&rest);
        decode_and_reencode(&bytes);
    }

    #[test]
    fn a_flipped_byte_never_panics(gens in batches(), pick in any::<usize>(), bit in 0u8..8) {
        let b = to_batches(&gens);
        for form in [Form::Plain { zstd: false }, Form::Plain { zstd: true }, Form::Frames] {
            let mut bytes = encode_push(&b, form, false).unwrap();
            let i = pick % bytes.len();
            bytes[i] ^= 1 << bit;
            decode_and_reencode(&bytes);
        }
    }
}

/// Replays every saved input under `fuzz/corpus/push_binary/` (and crash
/// artifacts, if any): none may panic, and whatever decodes must survive a
/// re-encoding.
#[test]
fn corpus_replays_without_panicking() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let dirs = [
        root.join("corpus/push_binary"),
        root.join("artifacts/push_binary"),
    ];
    let mut seen = 0;
    let mut decoded = 0;
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let bytes = std::fs::read(entry.path()).unwrap();
            decode_and_reencode(&bytes);
            let ok = match kind(&bytes) {
                Some(Kind::Push) => decode_push(&bytes, &LIMITS).is_ok(),
                Some(Kind::Transaction) => decode_transaction(&bytes, &LIMITS).is_ok(),
                None => false,
            };
            decoded += usize::from(ok);
            seen += 1;
        }
    }
    assert!(seen >= 8, "the corpus has seed files");
    assert!(decoded >= 5, "the sheet's vectors decode");
}
