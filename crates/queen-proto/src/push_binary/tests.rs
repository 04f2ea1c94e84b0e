use proptest::prelude::*;

use super::*;

const LIMITS: Limits = Limits {
    max_decoded_bytes: 1 << 20,
    max_payload_depth: 64,
    max_items: 10_000,
};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    ::hex::decode(s).unwrap()
}

fn item(q: &str, p: &str, txn: Option<&str>, id: Option<&str>, payload: &str) -> Item {
    Item {
        queue: QueueName::new(q).unwrap(),
        partition: PartitionName::new(p).unwrap(),
        transaction_id: txn.map(str::to_owned),
        message_id: id.map(|i| Uuid::parse_str(i).unwrap()),
        payload: payload.to_owned(),
    }
}

// spec: client-dataplane-2.6 §8.1 .. §8.5, bytes made by the client's own encoders

const V81: &str = "515042310402000000010071020070310200000002007431070000007b226e22
    3a317d020074320400000022686922010071070044656661756c740100000000
    00040000006e756c6c";
const V82: &str = "5150423102010000000100710200703101000000070000007b226e223a317d";
const V83: &str = "51504231052a00000028b52ffd202a5101000100000001007102007031020000
    0002007431070000007b226e223a317d020074320400000022686922";
const V84: &str = "51504231080100000001007102007031020000006800000028b52ffd205ff902
    001c00000000019b76daa87b7102830405060708090a020074317b226e223a31
    7d3b00000000019b76daa87b7b0c8d0e0f101112131424003031396237366461
    2d613837622d376230632d386430652d30663130313131323133313422686922";
const V85: &str = "5154423100800000007b226f7065726174696f6e73223a5b7b2274797065223a
    2261636b222c227472616e73616374696f6e4964223a226131222c2270617274
    6974696f6e4964223a2237222c22737461747573223a22636f6d706c65746564
    222c226c656173654964223a224c227d5d2c2272657175697265644c65617365
    73223a5b224c225d7d0100000001007102007031010000002900000028b52ffd
    20200101001c00000000019b76daa87b7102830405060708090a020074317b22
    6e223a317d";

const ID1: &str = "019b76da-a87b-7102-8304-05060708090a";
const ID2: &str = "019b76da-a87b-7b0c-8d0e-0f1011121314";

#[test]
fn vector_8_1_plain_with_transaction_ids() {
    let bytes = hex(V81);
    assert_eq!(bytes.len(), 73);
    assert_eq!(kind(&bytes), Some(Kind::Push));
    let body = decode_push(&bytes, &LIMITS).unwrap();
    assert!(!body.counts);
    assert_eq!(
        body.items,
        vec![
            item("q", "p1", Some("t1"), None, r#"{"n":1}"#),
            item("q", "p1", Some("t2"), None, r#""hi""#),
            // txn "" on the wire: the broker mints one
            item("q", "Default", None, None, "null"),
        ]
    );
}

#[test]
fn vector_8_2_counts_without_transaction_ids() {
    let bytes = hex(V82);
    assert_eq!(bytes.len(), 31);
    let body = decode_push(&bytes, &LIMITS).unwrap();
    assert!(body.counts);
    assert_eq!(body.items, vec![item("q", "p1", None, None, r#"{"n":1}"#)]);
}

#[test]
fn vector_8_3_zstd_body() {
    let bytes = hex(V83);
    assert_eq!(bytes.len(), 60);
    let body = decode_push(&bytes, &LIMITS).unwrap();
    assert!(!body.counts);
    assert_eq!(
        body.items,
        vec![
            item("q", "p1", Some("t1"), None, r#"{"n":1}"#),
            item("q", "p1", Some("t2"), None, r#""hi""#),
        ]
    );
}

#[test]
fn vector_8_4_frames_keep_the_client_ids() {
    let bytes = hex(V84);
    assert_eq!(bytes.len(), 128);
    let body = decode_push(&bytes, &LIMITS).unwrap();
    assert_eq!(
        body.items,
        vec![
            item("q", "p1", Some("t1"), Some(ID1), r#"{"n":1}"#),
            // no txn of its own: the client wrote the id's text
            item("q", "p1", Some(ID2), Some(ID2), r#""hi""#),
        ]
    );
}

#[test]
fn vector_8_5_transaction() {
    let bytes = hex(V85);
    assert_eq!(bytes.len(), 197);
    assert_eq!(kind(&bytes), Some(Kind::Transaction));
    let body = decode_transaction(&bytes, &LIMITS).unwrap();
    assert!(!body.counts);
    assert_eq!(
        body.head,
        r#"{"operations":[{"type":"ack","transactionId":"a1","partitionId":"7","status":"completed","leaseId":"L"}],"requiredLeases":["L"]}"#
    );
    assert_eq!(
        body.items,
        vec![item("q", "p1", Some("t1"), Some(ID1), r#"{"n":1}"#)]
    );
}

#[test]
fn each_magic_belongs_to_its_decoder() {
    assert_eq!(decode_push(&hex(V85), &LIMITS), Err(BinaryError::BadMagic));
    assert_eq!(
        decode_transaction(&hex(V81), &LIMITS),
        Err(BinaryError::BadMagic)
    );
    assert_eq!(decode_push(b"QPB", &LIMITS), Err(BinaryError::BadMagic));
    assert_eq!(
        decode_push(b"QPB2\x04", &LIMITS),
        Err(BinaryError::BadMagic)
    );
    assert_eq!(kind(b"{\"items\":[]}"), None);
    assert_eq!(
        decode_push(b"QPB1", &LIMITS),
        Err(BinaryError::Truncated(Place::Flags))
    );
}

#[test]
fn every_cut_of_every_vector_is_refused() {
    for v in [V81, V82, V83, V84] {
        let bytes = hex(v);
        for cut in 0..bytes.len() {
            assert!(
                decode_push(&bytes[..cut], &LIMITS).is_err(),
                "{v} cut at {cut}"
            );
        }
    }
    let bytes = hex(V85);
    for cut in 0..bytes.len() {
        assert!(
            decode_transaction(&bytes[..cut], &LIMITS).is_err(),
            "cut at {cut}"
        );
    }
}

#[test]
fn bytes_after_the_last_group_are_refused() {
    for v in [V81, V82, V84] {
        let mut bytes = hex(v);
        bytes.extend_from_slice(b"xy");
        assert_eq!(decode_push(&bytes, &LIMITS), Err(BinaryError::Trailing(2)));
    }
    let mut bytes = hex(V85);
    bytes.push(0);
    assert_eq!(
        decode_transaction(&bytes, &LIMITS),
        Err(BinaryError::Trailing(1))
    );
}

#[test]
fn unknown_flags_and_conflicting_flags_are_refused() {
    for flags in [0x10u8, 0x20, 0x40, 0x80, 0x14] {
        let mut bytes = hex(V81);
        bytes[4] = flags;
        assert_eq!(
            decode_push(&bytes, &LIMITS),
            Err(BinaryError::UnknownFlags(flags))
        );
    }
    for flags in [0x09u8, 0x0c, 0x0d, 0x0e] {
        let mut bytes = hex(V84);
        bytes[4] = flags;
        assert_eq!(
            decode_push(&bytes, &LIMITS),
            Err(BinaryError::FlagConflict(flags))
        );
    }
    for flags in [0x01u8, 0x04, 0x08, 0x80] {
        let mut bytes = hex(V85);
        bytes[4] = flags;
        assert_eq!(
            decode_transaction(&bytes, &LIMITS),
            Err(BinaryError::UnknownFlags(flags))
        );
    }
}

/// A group of [`plain`]: queue, partition, and (transactionId, payload) items.
type Group<'a> = (&'a [u8], &'a [u8], &'a [(&'a [u8], &'a [u8])]);

/// A plain body (flags 4) of the given groups, written byte by byte so that
/// any field can be wrong.
fn plain(groups: &[Group<'_>]) -> Vec<u8> {
    let mut out = b"QPB1\x04".to_vec();
    out.extend_from_slice(&(groups.len() as u32).to_le_bytes());
    for (q, p, items) in groups {
        for s in [q, p] {
            out.extend_from_slice(&(s.len() as u16).to_le_bytes());
            out.extend_from_slice(s);
        }
        out.extend_from_slice(&(items.len() as u32).to_le_bytes());
        for (txn, payload) in *items {
            out.extend_from_slice(&(txn.len() as u16).to_le_bytes());
            out.extend_from_slice(txn);
            out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            out.extend_from_slice(payload);
        }
    }
    out
}

fn refused(body: &[u8]) -> String {
    decode_push(body, &LIMITS).unwrap_err().to_string()
}

#[test]
fn zero_groups_or_zero_items_are_refused() {
    assert_eq!(
        decode_push(&plain(&[]), &LIMITS),
        Err(BinaryError::Zero(Place::Groups))
    );
    assert_eq!(
        refused(&plain(&[(b"q", b"p", &[])])),
        "binary body: groups[0].n must be at least 1"
    );
    assert_eq!(
        decode_push(b"QPB1\x08\x00\x00\x00\x00", &LIMITS),
        Err(BinaryError::Zero(Place::Groups))
    );
}

#[test]
fn names_are_checked_as_the_json_push_checks_them() {
    let ok: &[(&[u8], &[u8])] = &[(b"t", b"1")];
    assert_eq!(
        refused(&plain(&[(b"", b"p", ok)])),
        "binary body: groups[0].queue: queue must not be empty"
    );
    assert_eq!(
        refused(&plain(&[(b"q", b"p", ok), (b"q", b"a\0b", ok)])),
        "binary body: groups[1].partition: partition must not contain control characters"
    );
    assert_eq!(
        refused(&plain(&[(b"q\n", b"p", ok)])),
        "binary body: groups[0].queue: queue must not contain control characters"
    );
    let long = "é".repeat(256);
    assert_eq!(
        refused(&plain(&[(long.as_bytes(), b"p", ok)])),
        "binary body: groups[0].queue: queue must be at most 255 characters"
    );
    assert_eq!(
        refused(&plain(&[(b"q", b"\xff\xfe", ok)])),
        "binary body: groups[0].partition is not UTF-8"
    );
}

#[test]
fn transaction_ids_are_checked_as_the_json_push_checks_them() {
    let long = "x".repeat(256);
    assert_eq!(
        refused(&plain(&[(
            b"q",
            b"p",
            &[(b"ok", b"1"), (long.as_bytes(), b"1")]
        )])),
        "binary body: groups[0].items[1].transactionId must be at most 255 characters"
    );
    let fine = "é".repeat(255);
    assert!(decode_push(&plain(&[(b"q", b"p", &[(fine.as_bytes(), b"1")])]), &LIMITS).is_ok());
    assert_eq!(
        refused(&plain(&[(b"q", b"p", &[(b"a\0", b"1")])])),
        "binary body: groups[0].items[0].transactionId must not contain NUL characters"
    );
    assert_eq!(
        refused(&plain(&[(b"q", b"p", &[(b"\xc3", b"1")])])),
        "binary body: groups[0].items[0].transactionId is not UTF-8"
    );
}

#[test]
fn a_payload_must_be_one_json_document() {
    for bad in [&b""[..], b"{", b"1 2", b"{}{}", b"nan", b"\xff", b"[1e999]"] {
        let e = decode_push(&plain(&[(b"q", b"p", &[(b"t", bad)])]), &LIMITS).unwrap_err();
        let place = Place::Item(0, 0, ItemField::Payload);
        assert!(
            matches!(&e, BinaryError::Payload { place: p, .. } | BinaryError::NotUtf8(p) if *p == place),
            "{bad:?}: {e}"
        );
    }
    let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
    assert!(refused(&plain(&[(b"q", b"p", &[(b"t", deep.as_bytes())])]))
        .starts_with("binary body: groups[0].items[0].payload is not one JSON document"));
    // whitespace around one document is JSON
    assert!(decode_push(
        &plain(&[(b"q", b"p", &[(b"t", b" {\"a\":[1]} ")])]),
        &LIMITS
    )
    .is_ok());
}

#[test]
fn a_length_past_the_end_names_its_field() {
    let mut body = plain(&[(b"q", b"p", &[(b"t", b"1")])]);
    // the payload length says 2, one byte follows
    let at = body.len() - 5;
    body[at] = 2;
    assert_eq!(
        decode_push(&body, &LIMITS),
        Err(BinaryError::Truncated(Place::Item(
            0,
            0,
            ItemField::Payload
        )))
    );
    // n larger than the rest of the body could hold
    let mut body = plain(&[(b"q", b"p", &[(b"t", b"1")])]);
    let n_at = 4 + 1 + 4 + 3 + 3;
    body[n_at..n_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        decode_push(&body, &LIMITS),
        Err(BinaryError::Truncated(Place::Group(0, GroupField::N)))
    );
}

#[test]
fn more_items_than_allowed_are_refused() {
    let items: Vec<(&[u8], &[u8])> = vec![(b"", b"1"); 3];
    let limits = Limits {
        max_items: 2,
        ..LIMITS
    };
    assert_eq!(
        decode_push(&plain(&[(b"q", b"p", &items)]), &limits),
        Err(BinaryError::TooManyItems(2))
    );
}

/// A zstd frame with one raw block of `content`, declaring `declared` as its
/// content size (`None`: no content size), made by hand so it can lie.
fn raw_frame(content: &[u8], declared: Option<u64>) -> Vec<u8> {
    let mut out = ZSTD_MAGIC.to_vec();
    match declared {
        // single segment, 8-byte content size
        Some(n) => {
            out.push(0xe0);
            out.extend_from_slice(&n.to_le_bytes());
        }
        // no content size, window descriptor 1 MiB
        None => out.extend_from_slice(&[0x00, 0x50]),
    }
    let header = ((content.len() as u32) << 3) | 1;
    out.extend_from_slice(&header.to_le_bytes()[..3]);
    out.extend_from_slice(content);
    out
}

fn zstd_body(raw_len: u32, z: &[u8]) -> Vec<u8> {
    let mut out = b"QPB1\x05".to_vec();
    out.extend_from_slice(&raw_len.to_le_bytes());
    out.extend_from_slice(z);
    out
}

#[test]
fn a_zstd_body_must_declare_its_size_and_keep_to_it() {
    let inner = plain(&[(b"q", b"p", &[(b"t", b"1")])]);
    let raw = &inner[5..];
    let n = raw.len() as u32;
    // the hand-made frame decodes when it tells the truth
    assert_eq!(
        decode_push(&zstd_body(n, &raw_frame(raw, Some(n.into()))), &LIMITS)
            .unwrap()
            .items
            .len(),
        1
    );
    let zstd_refusal = |body: Vec<u8>| match decode_push(&body, &LIMITS) {
        Err(BinaryError::Zstd { place, reason }) => {
            assert_eq!(place, Place::RawLen);
            reason
        }
        other => panic!("{other:?}"),
    };
    assert!(zstd_refusal(zstd_body(n, &raw_frame(raw, None))).contains("content size"));
    assert!(zstd_refusal(zstd_body(n + 1, &raw_frame(raw, Some(n.into())))).contains("raw_len"));
    // a frame that says less or more than it holds
    for lie in [u64::from(n) - 1, u64::from(n) + 1] {
        let r = zstd_refusal(zstd_body(lie as u32, &raw_frame(raw, Some(lie))));
        assert!(r.contains("inflate"), "{r}");
    }
    let mut z = raw_frame(raw, Some(n.into()));
    z.push(0);
    assert!(zstd_refusal(zstd_body(n, &z)).contains("1 bytes follow"));
    assert!(zstd_refusal(zstd_body(n, raw)).contains("not a zstd frame"));
    z.truncate(z.len() - 3);
    assert!(zstd_refusal(zstd_body(n, &z)).contains("damaged"));
}

#[test]
fn a_zip_bomb_is_refused_before_it_is_inflated() {
    // declares 1 GiB: refused from its header
    let bomb = raw_frame(b"x", Some(1 << 30));
    assert_eq!(
        decode_push(&zstd_body(1 << 30, &bomb), &LIMITS),
        Err(BinaryError::Inflate {
            place: Place::RawLen,
            declared: 1 << 30,
            limit: LIMITS.max_decoded_bytes
        })
    );
    // a real frame of 2 MiB of zeros: a few hundred bytes, refused the same way
    let zeros = zstd::bulk::compress(&vec![0u8; 2 << 20], 1).unwrap();
    assert!(zeros.len() < 1024);
    assert!(matches!(
        decode_push(&zstd_body(2 << 20, &zeros), &LIMITS),
        Err(BinaryError::Inflate { declared, .. }) if declared == 2 << 20
    ));
}

/// One stored-message frame.
fn frame(flags: u8, id: u128, txn: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = ((19 + txn.len() + payload.len()) as u32)
        .to_le_bytes()
        .to_vec();
    out.push(flags);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&(txn.len() as u16).to_le_bytes());
    out.extend_from_slice(txn);
    out.extend_from_slice(payload);
    out
}

/// A frames-form body (flags 8) whose groups are `(n, z)`, all of `q`/`p`.
fn frames(groups: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut out = b"QPB1\x08".to_vec();
    out.extend_from_slice(&(groups.len() as u32).to_le_bytes());
    for (n, z) in groups {
        out.extend_from_slice(b"\x01\x00q\x01\x00p");
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&(z.len() as u32).to_le_bytes());
        out.extend_from_slice(z);
    }
    out
}

fn z(frames: &[Vec<u8>]) -> Vec<u8> {
    zstd::bulk::compress(&frames.concat(), 1).unwrap()
}

#[test]
fn frames_are_checked_one_by_one() {
    let good = frame(0, 7, b"t", b"1");
    let ok = decode_push(&frames(&[(1, z(std::slice::from_ref(&good)))]), &LIMITS).unwrap();
    assert_eq!(ok.items[0].message_id, Some(Uuid::from_u128(7)));
    assert_eq!(ok.items[0].transaction_id.as_deref(), Some("t"));
    // an empty txn in a frame: the id's text, as the client writes it
    let ok = decode_push(&frames(&[(1, z(&[frame(0, 7, b"", b"1")]))]), &LIMITS).unwrap();
    assert_eq!(
        ok.items[0].transaction_id.as_deref(),
        Some("00000000-0000-0000-0000-000000000007")
    );

    let at = |i| Place::Item(0, i, ItemField::Frame);
    let refusal =
        |fs: &[Vec<u8>], n: u32| decode_push(&frames(&[(n, z(fs))]), &LIMITS).unwrap_err();
    assert_eq!(
        refusal(&[good.clone(), frame(1, 8, b"t", b"1")], 2),
        BinaryError::FrameFlags {
            place: at(1),
            flags: 1
        }
    );
    let mut short = good.clone();
    short[..4].copy_from_slice(&18u32.to_le_bytes());
    assert_eq!(
        refusal(&[short], 1),
        BinaryError::FrameLen {
            place: at(0),
            body_len: 18
        }
    );
    let mut long = good.clone();
    long[..4].copy_from_slice(&100u32.to_le_bytes());
    assert_eq!(refusal(&[long], 1), BinaryError::Truncated(at(0)));
    assert_eq!(
        refusal(&[frame(0, 7, b"\xc3(", b"1")], 1),
        BinaryError::NotUtf8(Place::Item(0, 0, ItemField::TransactionId))
    );
    assert_eq!(
        refusal(&[frame(0, 7, b"a\0", b"1")], 1),
        BinaryError::Nul(Place::Item(0, 0, ItemField::TransactionId))
    );
    assert!(matches!(
        refusal(&[frame(0, 7, b"t", b"")], 1),
        BinaryError::Payload {
            place: Place::Item(0, 0, ItemField::Payload),
            ..
        }
    ));
    // a txn length that runs past the frame's body
    let mut bad_txn = frame(0, 7, b"t", b"1");
    bad_txn[21] = 9;
    assert_eq!(
        refusal(&[bad_txn], 1),
        BinaryError::Truncated(Place::Item(0, 0, ItemField::TransactionId))
    );
    let zf = Place::Group(0, GroupField::Z);
    assert_eq!(
        refusal(std::slice::from_ref(&good), 2),
        BinaryError::FrameCount {
            place: zf,
            expected: 2,
            found: 1
        }
    );
    assert_eq!(
        refusal(&[good.clone(), good.clone()], 1),
        BinaryError::ExtraFrames {
            place: zf,
            expected: 1
        }
    );
}

#[test]
fn a_frames_group_must_be_one_zstd_frame_with_its_size() {
    let good = frame(0, 7, b"t", b"1");
    let zstd_refusal = |z: Vec<u8>| match decode_push(&frames(&[(1, z)]), &LIMITS) {
        Err(BinaryError::Zstd { place, reason }) => {
            assert_eq!(place, Place::Group(0, GroupField::Z));
            reason
        }
        other => panic!("{other:?}"),
    };
    assert!(zstd_refusal(raw_frame(&good, None)).contains("content size"));
    assert!(zstd_refusal(good.clone()).contains("not a zstd frame"));
    let mut two = z(std::slice::from_ref(&good));
    two.extend_from_slice(&z(std::slice::from_ref(&good)));
    assert!(zstd_refusal(two).contains("follow the zstd frame"));
    // a frame that lies about its size, either way
    for lie in [good.len() as u64 - 1, good.len() as u64 + 1] {
        assert!(zstd_refusal(raw_frame(&good, Some(lie))).contains("inflate"));
    }
    // a z_len past the end
    let mut body = frames(&[(1, z(&[good]))]);
    body.pop();
    assert_eq!(
        decode_push(&body, &LIMITS),
        Err(BinaryError::Truncated(Place::Group(0, GroupField::Z)))
    );
}

#[test]
fn the_bound_covers_every_group_together() {
    // each group inflates to 600 KiB of frames: one fits in 1 MiB, two do not
    let payload = format!("\"{}\"", "a".repeat(600 << 10));
    let big = z(&[frame(0, 1, b"t", payload.as_bytes())]);
    assert!(decode_push(&frames(&[(1, big.clone())]), &LIMITS).is_ok());
    assert!(matches!(
        decode_push(&frames(&[(1, big.clone()), (1, big)]), &LIMITS),
        Err(BinaryError::Inflate {
            place: Place::Group(1, GroupField::Z),
            ..
        })
    ));
    // the 1 GiB bomb in a group
    assert!(matches!(
        decode_push(&frames(&[(1, raw_frame(b"x", Some(1 << 30)))]), &LIMITS),
        Err(BinaryError::Inflate { declared, .. }) if declared == 1 << 30
    ));
    // n that cannot fit what is left of the bound
    assert_eq!(
        decode_push(
            &frames(&[(u32::MAX, z(&[frame(0, 1, b"t", b"1")]))]),
            &LIMITS
        ),
        Err(BinaryError::Truncated(Place::Group(0, GroupField::N)))
    );
}

#[test]
fn a_transaction_head_may_be_empty_and_must_be_utf8() {
    let group = z(&[frame(0, 7, b"t", b"1")]);
    let body = |head: &[u8]| {
        let mut out = b"QTB1\x00".to_vec();
        out.extend_from_slice(&(head.len() as u32).to_le_bytes());
        out.extend_from_slice(head);
        out.extend_from_slice(&frames(&[(1, group.clone())])[5..]);
        out
    };
    let empty = body(b"");
    assert_eq!(decode_transaction(&empty, &LIMITS).unwrap().head, "");
    assert_eq!(
        decode_transaction(&body(b"{\"a\":\"\xff\"}"), &LIMITS),
        Err(BinaryError::NotUtf8(Place::Head))
    );
    let mut past = body(b"{}");
    past[5] = 200;
    assert_eq!(
        decode_transaction(&past, &LIMITS),
        Err(BinaryError::Truncated(Place::Head))
    );
    let mut counts = body(b"{}");
    counts[4] = FLAG_COUNTS;
    assert!(decode_transaction(&counts, &LIMITS).unwrap().counts);
}

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
