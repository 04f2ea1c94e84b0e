//! A consumer with four workers that renews its leases and stops on Ctrl-C.
//!
//! ```sh
//! cargo run -p queen-client --example consume -- http://localhost:6632
//! ```

use std::time::Duration;

use queen_client::{CancellationToken, Client};

#[tokio::main]
async fn main() -> queen_client::Result<()> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://localhost:6632".into());
    let client = Client::builder().urls(url.split(',')).build()?;
    let stop = CancellationToken::new();
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            stop.cancel();
        });
    }
    let stats = client
        .queue("example-orders")
        .group("example-billing")
        .concurrency(4)
        .batch(10)
        .renew_lease(Some(Duration::from_secs(10)))
        .until(stop)
        .consume(|msg| async move {
            println!("{} {}", msg.partition, msg.data);
            if msg.data.get("amount").is_none() {
                // a failed handler nacks: retried, then dead-lettered
                return Err(format!("message {} has no amount", msg.transaction_id));
            }
            Ok(())
        })
        .await?;
    println!("{stats:?}");
    Ok(())
}
