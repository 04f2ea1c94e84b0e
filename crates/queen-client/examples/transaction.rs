//! Exactly-once hand-off between two stages: ack the input and push the
//! output in one transaction.
//!
//! ```sh
//! cargo run -p queen-client --example transaction -- http://localhost:6632
//! ```

mod common;

use queen_client::Error;
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> queen_client::Result<()> {
    let client = common::client_from_args()?;
    client
        .queue("example-stage-1")
        .push(&json!({"total": 99}))
        .await?;

    let input = client
        .queue("example-stage-1")
        .group("example-etl")
        .batch(10)
        .wait(false)
        .pop()
        .await?;
    let mut tx = client.transaction();
    for msg in &input {
        let total = msg.data["total"].as_f64().unwrap_or(0.0);
        tx = tx.ack(msg).push(
            "example-stage-2",
            &msg.partition,
            &json!({"total_with_tax": total * 1.2}),
        )?;
    }
    match tx.commit().await {
        Ok(r) => println!("committed {} operations", r.results.len()),
        Err(Error::TransactionFailed { error, .. }) => println!("nothing applied: {error}"),
        Err(e) => return Err(e),
    }
    Ok(())
}
