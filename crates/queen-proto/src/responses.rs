//! Response bodies of the CORE routes (push, pop, ack, lease) and the error
//! body of every route, with the exact field names the clients read.

use serde::Serialize;
use serde_json::value::RawValue;
use uuid::Uuid;

/// Every error answer of API v1: `{"error": "..."}` with a 4xx/5xx status.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorBody {
    pub error: String,
}

/// One element of the bare array `POST /api/v1/push` answers with.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum PushResult {
    Queued {
        index: usize,
        transaction_id: String,
        status: &'static str,
        message_id: String,
        partition_id: String,
        trace_id: Option<String>,
        #[serde(rename = "queueName")]
        queue_name: String,
    },
    Duplicate {
        index: usize,
        transaction_id: String,
        status: &'static str,
        message_id: String,
        #[serde(rename = "queueName")]
        queue_name: String,
    },
    Buffered {
        index: usize,
        status: &'static str,
        queue: String,
        partition: String,
        #[serde(rename = "transactionId")]
        transaction_id: String,
    },
    /// Not stored (a queue at its `maxSize`): the error names the bound.
    Failed {
        index: usize,
        status: &'static str,
        queue: String,
        partition: String,
        #[serde(rename = "transactionId")]
        transaction_id: String,
        error: String,
    },
}

/// A message as a pop delivers it: exactly the ten fields of the contract plus
/// `queue` and `deliveryAttempt`.
///
/// It borrows from the claimed messages, so an answer of a hundred messages
/// is written without copying a string of it first. The ids serialize as
/// their lowercase hyphenated text (`Uuid`'s `Serialize`, which is its
/// `to_string()`), `data` as the stored JSON text itself.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoppedMessage<'a> {
    pub id: Uuid,
    pub transaction_id: &'a str,
    pub trace_id: Option<Uuid>,
    pub data: &'a RawValue,
    pub producer_sub: Option<&'a str>,
    /// `YYYY-MM-DDTHH:MM:SS.ffffffZ` ([`crate::time::format_micros`]).
    pub created_at: &'a str,
    pub partition_id: Uuid,
    pub partition: &'a str,
    pub lease_id: &'a str,
    pub consumer_group: &'a str,
    pub queue: &'a str,
    /// How many times the message has been handed to this consumer group,
    /// this delivery included: 1 on the first.
    pub delivery_attempt: i32,
}

/// The body of a pop that returns at least one message.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PopResponse<'a> {
    pub success: bool,
    pub queue: &'a str,
    pub partition: &'a str,
    pub partition_id: Uuid,
    pub lease_id: &'a str,
    pub consumer_group: &'a str,
    pub partitions_claimed: usize,
    pub messages: Vec<PoppedMessage<'a>>,
    /// How the pop was served, last (each key only when set).
    #[serde(flatten)]
    pub echo: PopEcho,
}

/// What a pop answer says about how it was served, for the 2.6.0 client:
/// the conflation echo and the autopilot decision. Each key is written only
/// when set, after every other key of the answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PopEcho {
    /// `"conflation": true`: the consumer group conflates (last-value delivery).
    #[serde(skip_serializing_if = "is_false")]
    pub conflation: bool,
    /// `"conflationConflict": true`: the pop asked for conflation and the
    /// group's stored policy is the opposite.
    #[serde(skip_serializing_if = "is_false")]
    pub conflation_conflict: bool,
    /// `"autopilot": {...}`: the sizing the broker chose for a pop that
    /// left it the knobs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autopilot: Option<AutopilotEcho>,
}

/// The `autopilot` object of a pop answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AutopilotEcho {
    /// Sweep width used for this pop.
    pub partitions: u32,
    /// Message budget used for this pop.
    pub batch: u32,
    /// Advice: milliseconds to wait before polling again after an empty
    /// non-waiting pop; not written when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub wait_ms: u64,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl PopEcho {
    /// Whether the answer has nothing to say about how it was served (an
    /// empty pop may then be a bodiless 204).
    pub fn is_empty(&self) -> bool {
        !self.conflation && !self.conflation_conflict && self.autopilot.is_none()
    }

    /// Appends the set keys, each preceded by a comma.
    pub fn write_keys(&self, out: &mut Vec<u8>) {
        if self.conflation {
            out.extend_from_slice(b",\"conflation\":true");
        }
        if self.conflation_conflict {
            out.extend_from_slice(b",\"conflationConflict\":true");
        }
        if let Some(a) = self.autopilot {
            out.extend_from_slice(b",\"autopilot\":{\"partitions\":");
            push_usize(out, a.partitions as usize);
            out.extend_from_slice(b",\"batch\":");
            push_usize(out, a.batch as usize);
            if a.wait_ms > 0 {
                out.extend_from_slice(b",\"waitMs\":");
                push_usize(out, usize::try_from(a.wait_ms).unwrap_or(usize::MAX));
            }
            out.push(b'}');
        }
    }

    /// The body of a pop that found nothing but must say how it was served:
    /// `{"success":true,"messages":[],...}`.
    pub fn write_empty(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"success\":true,\"messages\":[]");
        self.write_keys(out);
        out.push(b'}');
    }
}

/// One element of the array `/ack` and `/ack/batch` answer with, borrowing
/// from the request and the store's outcomes.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AckResult<'a> {
    pub index: usize,
    pub transaction_id: &'a str,
    pub success: bool,
    pub error: Option<&'a str>,
    pub queue_name: Option<&'a str>,
    pub partition_name: Option<&'a str>,
    pub lease_released: bool,
    pub dlq: bool,
}

impl PopResponse<'_> {
    /// Appends the answer's JSON to `out`: the bytes its `Serialize` gives
    /// through `serde_json` (a test holds them equal), written without
    /// escaping the fixed keys, ids and timestamps one byte at a time.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"success\":");
        push_bool(out, self.success);
        out.extend_from_slice(b",\"queue\":");
        push_str(out, self.queue);
        out.extend_from_slice(b",\"partition\":");
        push_str(out, self.partition);
        out.extend_from_slice(b",\"partitionId\":");
        push_uuid(out, self.partition_id);
        out.extend_from_slice(b",\"leaseId\":");
        push_str(out, self.lease_id);
        out.extend_from_slice(b",\"consumerGroup\":");
        push_str(out, self.consumer_group);
        out.extend_from_slice(b",\"partitionsClaimed\":");
        push_usize(out, self.partitions_claimed);
        out.extend_from_slice(b",\"messages\":[");
        for (i, m) in self.messages.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            m.write_json(out);
        }
        out.push(b']');
        self.echo.write_keys(out);
        out.push(b'}');
    }
}

impl PoppedMessage<'_> {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"id\":");
        push_uuid(out, self.id);
        out.extend_from_slice(b",\"transactionId\":");
        push_str(out, self.transaction_id);
        out.extend_from_slice(b",\"traceId\":");
        match self.trace_id {
            Some(t) => push_uuid(out, t),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"data\":");
        out.extend_from_slice(self.data.get().as_bytes());
        out.extend_from_slice(b",\"producerSub\":");
        push_opt_str(out, self.producer_sub);
        out.extend_from_slice(b",\"createdAt\":");
        push_str(out, self.created_at);
        out.extend_from_slice(b",\"partitionId\":");
        push_uuid(out, self.partition_id);
        out.extend_from_slice(b",\"partition\":");
        push_str(out, self.partition);
        out.extend_from_slice(b",\"leaseId\":");
        push_str(out, self.lease_id);
        out.extend_from_slice(b",\"consumerGroup\":");
        push_str(out, self.consumer_group);
        out.extend_from_slice(b",\"queue\":");
        push_str(out, self.queue);
        out.extend_from_slice(b",\"deliveryAttempt\":");
        serde_json::to_writer(&mut *out, &self.delivery_attempt)
            .expect("a number serializes into a Vec");
        out.push(b'}');
    }
}

impl AckResult<'_> {
    /// Appends the JSON array of `results` to `out`, the bytes their
    /// `Serialize` gives through `serde_json` (see [`PopResponse::write_json`]).
    pub fn write_json_array(results: &[Self], out: &mut Vec<u8>) {
        out.push(b'[');
        for (i, r) in results.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"index\":");
            push_usize(out, r.index);
            out.extend_from_slice(b",\"transactionId\":");
            push_str(out, r.transaction_id);
            out.extend_from_slice(b",\"success\":");
            push_bool(out, r.success);
            out.extend_from_slice(b",\"error\":");
            push_opt_str(out, r.error);
            out.extend_from_slice(b",\"queueName\":");
            push_opt_str(out, r.queue_name);
            out.extend_from_slice(b",\"partitionName\":");
            push_opt_str(out, r.partition_name);
            out.extend_from_slice(b",\"leaseReleased\":");
            push_bool(out, r.lease_released);
            out.extend_from_slice(b",\"dlq\":");
            push_bool(out, r.dlq);
            out.push(b'}');
        }
        out.push(b']');
    }
}

/// A JSON string as `serde_json` writes it: as is between quotes unless it
/// holds a byte `serde_json` escapes (a quote, a backslash, a control
/// character), then through `serde_json` itself.
fn push_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        serde_json::to_writer(&mut *out, s).expect("a string serializes into a Vec");
    } else {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

fn push_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => push_str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// Lowercase hyphenated, as `Uuid`'s `Serialize` writes it.
fn push_uuid(out: &mut Vec<u8>, id: Uuid) {
    let mut buf = Uuid::encode_buffer();
    out.push(b'"');
    out.extend_from_slice(id.hyphenated().encode_lower(&mut buf).as_bytes());
    out.push(b'"');
}

fn push_bool(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

fn push_usize(out: &mut Vec<u8>, n: usize) {
    serde_json::to_writer(&mut *out, &n).expect("a number serializes into a Vec");
}

/// The one element of the array `/lease/:id/extend` answers with.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseExtendResult {
    pub index: usize,
    pub lease_id: String,
    pub success: bool,
    pub error: Option<String>,
    pub expires_at: Option<String>,
    pub new_expires_at: Option<String>,
    pub renewed: i32,
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn uuid() -> impl Strategy<Value = Uuid> {
        any::<u128>().prop_map(Uuid::from_u128)
    }

    /// Strings of every kind: plain, escapes, controls, non-ASCII.
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9_.-]{0,12}",
            any::<String>(),
            "[\\x00-\\x7f]{0,8}",
            "(\"|\\\\|\\n|é|\\u{2028}|\\u{7f}|x){0,6}",
        ]
    }

    proptest! {
        #[test]
        fn the_pop_writer_writes_what_serde_json_writes(
            ids in prop::collection::vec((uuid(), prop::option::of(uuid()), uuid()), 1..4),
            attempt in any::<i32>(),
            strings in prop::collection::vec(text(), 10),
            sub in prop::option::of(text()),
            payload in prop_oneof![Just("null"), Just("{\"a\":[1,\"x\"]}"), Just("\"s\\u0000\"")],
            claimed in any::<usize>(),
            success in any::<bool>(),
            echo in (any::<bool>(), any::<bool>(),
                     prop::option::of((any::<u32>(), any::<u32>(), prop_oneof![Just(0u64), any::<u64>()]))),
        ) {
            let data: &RawValue = serde_json::from_str(payload).unwrap();
            let messages: Vec<PoppedMessage<'_>> = ids
                .iter()
                .map(|&(id, trace_id, partition_id)| PoppedMessage {
                    id,
                    transaction_id: &strings[0],
                    trace_id,
                    data,
                    producer_sub: sub.as_deref(),
                    created_at: &strings[1],
                    partition_id,
                    partition: &strings[2],
                    lease_id: &strings[3],
                    consumer_group: &strings[4],
                    queue: &strings[5],
                    delivery_attempt: attempt,
                })
                .collect();
            let answer = PopResponse {
                success,
                queue: &strings[6],
                partition: &strings[7],
                partition_id: ids[0].2,
                lease_id: &strings[8],
                consumer_group: &strings[9],
                partitions_claimed: claimed,
                messages,
                echo: PopEcho {
                    conflation: echo.0,
                    conflation_conflict: echo.1,
                    autopilot: echo.2.map(|(partitions, batch, wait_ms)| AutopilotEcho {
                        partitions,
                        batch,
                        wait_ms,
                    }),
                },
            };
            let mut written = Vec::new();
            answer.write_json(&mut written);
            prop_assert_eq!(
                String::from_utf8(written).unwrap(),
                serde_json::to_string(&answer).unwrap()
            );
        }

        #[test]
        fn the_ack_writer_writes_what_serde_json_writes(
            rows in prop::collection::vec(
                (any::<usize>(), text(), any::<bool>(), prop::option::of(text()),
                 prop::option::of(text()), prop::option::of(text()), any::<bool>(), any::<bool>()),
                0..4,
            ),
        ) {
            let results: Vec<AckResult<'_>> = rows
                .iter()
                .map(|r| AckResult {
                    index: r.0,
                    transaction_id: &r.1,
                    success: r.2,
                    error: r.3.as_deref(),
                    queue_name: r.4.as_deref(),
                    partition_name: r.5.as_deref(),
                    lease_released: r.6,
                    dlq: r.7,
                })
                .collect();
            let mut written = Vec::new();
            AckResult::write_json_array(&results, &mut written);
            prop_assert_eq!(
                String::from_utf8(written).unwrap(),
                serde_json::to_string(&results).unwrap()
            );
        }
    }
}
