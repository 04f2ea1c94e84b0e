//! Many small pushes gathered client-side and sent in batches.
//!
//! ```sh
//! cargo run -p queen-client --example buffered -- http://localhost:6632
//! ```

mod common;

use std::time::Duration;

use queen_client::BufferOptions;
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> queen_client::Result<()> {
    let client = common::client_from_args()?;
    let producer = client.queue("example-events").buffer(BufferOptions {
        max_messages: 500,
        max_delay: Duration::from_millis(200),
        ..Default::default()
    });
    for n in 0..10_000 {
        producer.push(&json!({"n": n, "kind": "click"})).await?;
    }
    // close() sends the rest and waits; dropping the producer would send it in the background
    let stats = producer.close().await;
    println!("{stats:?}");
    Ok(())
}
