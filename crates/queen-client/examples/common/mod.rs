//! What every example starts with: a client for the broker URL(s) given as
//! the first argument (comma-separated), default `http://localhost:6632`.

use queen_client::Client;

/// A client for the URLs of the command line.
pub fn client_from_args() -> queen_client::Result<Client> {
    let urls = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://localhost:6632".into());
    Client::builder().urls(urls.split(',')).build()
}
