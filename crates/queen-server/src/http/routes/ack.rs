//! `POST /api/v1/ack` and `POST /api/v1/ack/batch`: arrays of per-item results.

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use queen_proto::responses::AckResult;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::consumer_group;
use crate::app::AppState;
use crate::broker::AckRequest;
use crate::http::body::{opt_str, opt_uuid, parse_object, read_bytes};
use crate::http::error::ApiError;
use crate::http::limits::text_limit;
use crate::http::record_target;
use crate::store::{AckItem, AckStatus};

/// Reads the fields of one acknowledgement; `messages` are the errors for a
/// missing transactionId and partitionId.
pub fn parse_ack_item(
    map: &Map<String, Value>,
    missing_txn: &str,
    missing_partition: &str,
) -> Result<AckItem, ApiError> {
    let transaction_id = opt_str(map, "transactionId", missing_txn)?
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::bad_request(missing_txn))?;
    let partition_id = opt_str(map, "partitionId", missing_partition)?
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::bad_request(missing_partition))?;
    let partition_id = Uuid::parse_str(partition_id)
        .map_err(|_| ApiError::bad_request("partitionId must be a valid UUID"))?;
    let status = AckStatus::parse(opt_str(map, "status", "status must be a string")?);
    let error = opt_str(map, "error", "error must be a string")?.map(str::to_owned);
    Ok(AckItem {
        partition_id,
        transaction_id: transaction_id.to_owned(),
        lease_id: opt_uuid(map, "leaseId")?,
        status,
        error,
    })
}

async fn respond(app: &AppState, req: AckRequest) -> Result<Response, ApiError> {
    record_target(None, None, Some(req.group.as_str()));
    let outcomes = app.broker.ack(&req).await?;
    let mut size = 2;
    let results: Vec<AckResult<'_>> = outcomes
        .iter()
        .map(|o| {
            let transaction_id = req.items[o.index].transaction_id.as_str();
            size += RESULT_OVERHEAD
                + transaction_id.len()
                + [&o.error, &o.queue_name, &o.partition_name]
                    .iter()
                    .map(|s| s.as_ref().map_or(0, String::len))
                    .sum::<usize>();
            AckResult {
                index: o.index,
                transaction_id,
                success: o.success,
                error: o.error.as_deref(),
                queue_name: o.queue_name.as_deref(),
                partition_name: o.partition_name.as_deref(),
                lease_released: o.lease_released,
                dlq: o.dlq,
            }
        })
        .collect();
    let mut body = Vec::with_capacity(size);
    AckResult::write_json_array(&results, &mut body);
    Ok(super::pop::json_body(body))
}

/// Bytes of an ack result besides its strings (keys, literals, the index),
/// about 150, rounded up so that escapes rarely make the buffer grow.
const RESULT_OVERHEAD: usize = 192;

pub async fn ack(State(app): State<AppState>, body: Body) -> Result<Response, ApiError> {
    let map = parse_object(&read_bytes(body, app.broker.config().max_body_bytes).await?)?;
    let item = parse_ack_item(
        &map,
        "transactionId is required",
        "partitionId is required to ensure message uniqueness",
    )?;
    let group = consumer_group(opt_str(
        &map,
        "consumerGroup",
        "consumerGroup must be a string",
    )?)?;
    respond(
        &app,
        AckRequest {
            group,
            items: vec![item],
        },
    )
    .await
}

pub async fn ack_batch(State(app): State<AppState>, body: Body) -> Result<Response, ApiError> {
    let bytes = read_bytes(body, app.broker.config().max_body_bytes).await?;
    let req = match plain_batch(&bytes) {
        Some(req) => req,
        None => any_batch(&bytes)?,
    };
    respond(&app, req).await
}

/// Reads any batch body, answering what it refuses with its error.
fn any_batch(bytes: &[u8]) -> Result<AckRequest, ApiError> {
    let map = parse_object(bytes)?;
    let Some(Value::Array(acks)) = map.get("acknowledgments") else {
        return Err(ApiError::bad_request("acknowledgments array is required"));
    };
    let group = consumer_group(opt_str(
        &map,
        "consumerGroup",
        "consumerGroup must be a string",
    )?)?;
    let items = acks
        .iter()
        .map(|a| {
            let obj = a
                .as_object()
                .ok_or_else(|| ApiError::bad_request("Each acknowledgment must be an object"))?;
            parse_ack_item(
                obj,
                "Each acknowledgment must have a valid transactionId string",
                "Each acknowledgment must have a valid partitionId string to ensure message uniqueness",
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(AckRequest { group, items })
}

/// The batch body the clients send, read straight from the request bytes
/// (no `serde_json::Value` built, strings borrowed): `None` unless it is an
/// object of just `acknowledgments` and `consumerGroup`, each item an object
/// of just `transactionId`, `partitionId`, `leaseId`, `status` and `error`
/// (strings or `null`, no key twice, no escape in a string), and every check
/// of [`any_batch`] passes, which would then build this same request.
/// Anything else goes to [`any_batch`], which answers it as it always has
/// (error texts included).
fn plain_batch(bytes: &[u8]) -> Option<AckRequest> {
    // UTF-8 checked once for the whole body, not string by string
    let body: PlainBatch<'_> = serde_json::from_str(std::str::from_utf8(bytes).ok()?).ok()?;
    let group = body.consumer_group;
    if !fits("consumerGroup", group) {
        return None;
    }
    let group = consumer_group(group).ok()?;
    let items = body
        .acknowledgments
        .iter()
        .map(PlainItem::to_item)
        .collect::<Option<Vec<_>>>()?;
    Some(AckRequest { group, items })
}

/// The checks of `check_body_strings` on one string field: no NUL, and
/// within the field's length limit (counted in bytes here, which is never
/// less than in characters: near the limit [`any_batch`] decides).
fn fits(field: &str, value: Option<&str>) -> bool {
    value.is_none_or(|v| !v.contains('\0') && text_limit(field).is_none_or(|max| v.len() <= max))
}

/// `{"acknowledgments": [...], "consumerGroup": ...}`, see [`plain_batch`].
struct PlainBatch<'a> {
    acknowledgments: Vec<PlainItem<'a>>,
    consumer_group: Option<&'a str>,
}

/// One acknowledgment of a [`PlainBatch`].
#[derive(Default)]
struct PlainItem<'a> {
    transaction_id: Option<&'a str>,
    partition_id: Option<&'a str>,
    lease_id: Option<&'a str>,
    status: Option<&'a str>,
    error: Option<&'a str>,
}

impl PlainItem<'_> {
    /// What [`parse_ack_item`] builds from the same fields, `None` where it
    /// (or the length and NUL checks before it) would refuse them.
    fn to_item(&self) -> Option<AckItem> {
        let checked = [
            ("transactionId", self.transaction_id),
            ("partitionId", self.partition_id),
            ("leaseId", self.lease_id),
            ("status", self.status),
            ("error", self.error),
        ];
        if !checked.iter().all(|(field, value)| fits(field, *value)) {
            return None;
        }
        let transaction_id = self.transaction_id.filter(|s| !s.is_empty())?;
        let partition_id = Uuid::parse_str(self.partition_id?).ok()?;
        let lease_id = match self.lease_id {
            None | Some("") => None,
            Some(s) => Some(Uuid::parse_str(s).ok()?),
        };
        Some(AckItem {
            partition_id,
            transaction_id: transaction_id.to_owned(),
            lease_id,
            status: AckStatus::parse(self.status),
            error: self.error.map(str::to_owned),
        })
    }
}

/// Sets a field once; a second occurrence of its key is an error (the
/// [`any_batch`] would keep the last one: it decides such a body).
fn once<'de, A: MapAccess<'de>>(
    slot: &mut Option<&'de str>,
    seen: &mut bool,
    map: &mut A,
) -> Result<(), A::Error> {
    if std::mem::replace(seen, true) {
        return Err(de::Error::custom("duplicate field"));
    }
    *slot = map.next_value()?;
    Ok(())
}

impl<'de> Deserialize<'de> for PlainItem<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = PlainItem<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an acknowledgment object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut item = PlainItem::default();
                let mut seen = [false; 5];
                while let Some(key) = map.next_key::<&'de str>()? {
                    let (slot, seen) = match key {
                        "transactionId" => (&mut item.transaction_id, &mut seen[0]),
                        "partitionId" => (&mut item.partition_id, &mut seen[1]),
                        "leaseId" => (&mut item.lease_id, &mut seen[2]),
                        "status" => (&mut item.status, &mut seen[3]),
                        "error" => (&mut item.error, &mut seen[4]),
                        _ => return Err(de::Error::custom("other field")),
                    };
                    once(slot, seen, &mut map)?;
                }
                Ok(item)
            }
        }
        // a map only: a struct read by serde_json would take an array too
        d.deserialize_map(Visit)
    }
}

impl<'de> Deserialize<'de> for PlainBatch<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = PlainBatch<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an ack batch object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut acknowledgments = None;
                let mut consumer_group = None;
                let mut group_seen = false;
                while let Some(key) = map.next_key::<&'de str>()? {
                    match key {
                        "acknowledgments" if acknowledgments.is_none() => {
                            acknowledgments = Some(map.next_value()?);
                        }
                        "consumerGroup" => once(&mut consumer_group, &mut group_seen, &mut map)?,
                        _ => return Err(de::Error::custom("other or repeated field")),
                    }
                }
                Ok(PlainBatch {
                    acknowledgments: acknowledgments
                        .ok_or_else(|| de::Error::missing_field("acknowledgments"))?,
                    consumer_group,
                })
            }
        }
        d.deserialize_map(Visit)
    }
}

#[cfg(test)]
mod tests {
    use axum::response::IntoResponse;
    use serde::Serialize;

    use super::*;

    const P: &str = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    const L: &str = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c";

    fn items(req: &AckRequest) -> String {
        format!("{:?} {:?}", req.group, req.items)
    }

    /// Wherever the short path answers, it answers what the general one does.
    fn same(body: &str) -> bool {
        let general = any_batch(body.as_bytes());
        match plain_batch(body.as_bytes()) {
            Some(req) => {
                let general = general.unwrap_or_else(|e| panic!("{body}: {e:?}"));
                assert_eq!(items(&req), items(&general), "{body}");
                true
            }
            None => false,
        }
    }

    #[test]
    fn the_python_clients_body_takes_the_short_path() {
        // queen-mq 2.6.0 client.py ack(): error null, leaseId last, group null in queue mode
        let body = format!(
            r#"{{"acknowledgments": [{{"transactionId": "t-1", "partitionId": "{P}", "status": "completed", "error": null, "leaseId": "{L}"}}, {{"transactionId": "t-2", "partitionId": "{P}", "status": "failed", "error": "boom", "leaseId": "{L}"}}], "consumerGroup": null}}"#
        );
        assert!(same(&body));
        let req = plain_batch(body.as_bytes()).unwrap();
        assert_eq!(req.items.len(), 2);
        assert_eq!(req.items[1].error.as_deref(), Some("boom"));
        assert!(same(&format!(
            r#"{{"consumerGroup":"workers","acknowledgments":[{{"transactionId":"t","partitionId":"{P}"}}]}}"#
        )));
        assert!(same(r#"{"acknowledgments": []}"#));
        // statuses pass as given; an empty leaseId is no lease
        assert!(same(&format!(
            r#"{{"acknowledgments":[{{"transactionId":"t","partitionId":"{P}","status":"COMPLETED","leaseId":""}}]}}"#
        )));
    }

    #[test]
    fn anything_else_goes_the_general_way() {
        let long = "x".repeat(text_limit("transactionId").unwrap() + 1);
        let bodies = [
            String::new(),
            " ".into(),
            "[]".into(),
            "null".into(),
            "{}".into(),
            r#"{"acknowledgments": null}"#.into(),
            // an array where an object is due: a derived struct would take it
            format!(r#"[[{{"transactionId":"t","partitionId":"{P}"}}], null]"#),
            format!(r#"{{"acknowledgments":[["t","{P}",null,null,null]]}}"#),
            // repeated keys: the general path keeps the last
            format!(
                r#"{{"acknowledgments":[{{"transactionId":"a","transactionId":"b","partitionId":"{P}"}}]}}"#
            ),
            format!(
                r#"{{"acknowledgments":[],"acknowledgments":[{{"transactionId":"a","partitionId":"{P}"}}]}}"#
            ),
            format!(
                r#"{{"consumerGroup":"a","consumerGroup":"b","acknowledgments":[{{"transactionId":"a","partitionId":"{P}"}}]}}"#
            ),
            // unknown fields, escapes, other types
            format!(r#"{{"acknowledgments":[{{"transactionId":"t","partitionId":"{P}","x":1}}]}}"#),
            r#"{"acknowledgments":[{"transactionId":"t"}],"x":"\u0000"}"#.into(),
            format!(r#"{{"acknowledgments":[{{"transactionId":"t\u00e9","partitionId":"{P}"}}]}}"#),
            format!(r#"{{"acknowledgments":[{{"transactionId":7,"partitionId":"{P}"}}]}}"#),
            format!(
                r#"{{"acknowledgments":[{{"transactionId":"t","partitionId":"{P}","status":true}}]}}"#
            ),
            // what the general path refuses
            format!(r#"{{"acknowledgments":[{{"transactionId":"","partitionId":"{P}"}}]}}"#),
            format!(r#"{{"acknowledgments":[{{"partitionId":"{P}"}}]}}"#),
            r#"{"acknowledgments":[{"transactionId":"t","partitionId":"nope"}]}"#.into(),
            r#"{"acknowledgments":[{"transactionId":"t","partitionId":""}]}"#.into(),
            format!(
                r#"{{"acknowledgments":[{{"transactionId":"t","partitionId":"{P}","leaseId":"nope"}}]}}"#
            ),
            format!(r#"{{"acknowledgments":[{{"transactionId":"{long}","partitionId":"{P}"}}]}}"#),
            format!(
                r#"{{"acknowledgments":[{{"transactionId":"t","partitionId":"{P}"}}],"consumerGroup":"{long}"}}"#
            ),
            format!(
                r#"{{"acknowledgments":[{{"transactionId":"t","partitionId":"{P}"}}],"consumerGroup":"bad\u0007group"}}"#
            ),
            format!(r#"{{"acknowledgments":[{{"transactionId":"t","partitionId":"{P}"}}]}} x"#),
        ];
        for body in &bodies {
            assert!(!same(body), "short path taken for {body}");
        }
        // a body that is not UTF-8
        let mut bytes =
            format!(r#"{{"acknowledgments":[{{"transactionId":"t","partitionId":"{P}"}}]}}"#)
                .into_bytes();
        bytes[38] = 0xff; // the "t"
        assert!(plain_batch(&bytes).is_none());
        assert!(any_batch(&bytes).is_err());
        // and the general path still answers them as before, e.g.
        assert!(any_batch(bodies[0].as_bytes()).is_err());
        assert!(any_batch(bodies[8].as_bytes()).is_ok());
        assert!(any_batch(bodies[13].as_bytes()).is_ok());
    }

    /// The answer as it was built before results borrowed.
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct OwnedResult {
        index: usize,
        transaction_id: String,
        success: bool,
        error: Option<String>,
        queue_name: Option<String>,
        partition_name: Option<String>,
        lease_released: bool,
        dlq: bool,
    }

    #[tokio::test]
    async fn results_serialize_as_they_did() {
        let rows = [
            ("t-1", true, None, Some("q"), Some("p\"1"), true, false),
            (
                "t\"2\\é",
                false,
                Some("Invalid or expired lease"),
                None,
                None,
                false,
                false,
            ),
            ("t-3", true, None, Some("q"), Some("p"), false, true),
        ];
        let owned: Vec<OwnedResult> = rows
            .iter()
            .enumerate()
            .map(|(index, r)| OwnedResult {
                index,
                transaction_id: r.0.to_owned(),
                success: r.1,
                error: r.2.map(str::to_owned),
                queue_name: r.3.map(str::to_owned),
                partition_name: r.4.map(str::to_owned),
                lease_released: r.5,
                dlq: r.6,
            })
            .collect();
        let borrowed: Vec<AckResult<'_>> = owned
            .iter()
            .map(|o| AckResult {
                index: o.index,
                transaction_id: &o.transaction_id,
                success: o.success,
                error: o.error.as_deref(),
                queue_name: o.queue_name.as_deref(),
                partition_name: o.partition_name.as_deref(),
                lease_released: o.lease_released,
                dlq: o.dlq,
            })
            .collect();
        let before = axum::Json(&owned).into_response();
        let mut body = Vec::new();
        AckResult::write_json_array(&borrowed, &mut body);
        let after = super::super::pop::json_body(body);
        assert_eq!(before.status(), after.status());
        assert_eq!(before.headers(), after.headers());
        let before = axum::body::to_bytes(before.into_body(), usize::MAX)
            .await
            .unwrap();
        let after = axum::body::to_bytes(after.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(before, after);
    }
}
