//! zstd bodies and the frames form: declared sizes, bombs, frames one by one.

use super::*;

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
