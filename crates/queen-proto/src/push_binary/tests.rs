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

mod frames;
mod roundtrip;
