//! The effective configuration as one line for the boot log and
//! `check-config`: secrets redacted, and the `sync[...]` block with
//! `auth: hmac|hmac-strict|off` that the HA design asks for.

use super::db::redact_url;
use super::Config;

impl Config {
    /// Describes the effective configuration for the boot log, secrets redacted.
    pub fn describe(&self) -> String {
        let mut db = match &self.db.url {
            Some(url) => format!("url={}", redact_url(url)),
            None => format!(
                "host={} port={} db={} user={} password=<redacted>",
                self.db.host,
                self.db
                    .ports
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                self.db.dbname,
                self.db.user
            ),
        };
        db.push_str(&format!(
            " ssl={} verify={}",
            self.db.use_ssl, self.db.ssl_reject_unauthorized
        ));
        if let Some(ca) = &self.db.ssl_root_cert {
            db.push_str(&format!(" root_cert={}", ca.display()));
        }
        let sync = format!(
            "sync[enabled={} mesh={} port={} peers={} auth: {} heartbeat_ms={}]",
            self.mesh.sync_enabled,
            if self.mesh.is_active() { "on" } else { "off" },
            self.mesh.port,
            if self.mesh.peers.is_empty() {
                "-".to_owned()
            } else {
                self.mesh.peers.join(",")
            },
            self.mesh.auth.as_str(),
            self.mesh.heartbeat.as_millis(),
        );
        format!(
            "listen={}:{} server_id={} workers={} db[{db} pool={} stmt_timeout_ms={}] pop[batch={} timeout_ms={} subscription={}] max_body_bytes={} {sync} jwt={}",
            self.host,
            self.port,
            self.server_id,
            self.worker_threads
                .map_or_else(|| "cpus".to_owned(), |n| n.to_string()),
            self.db.pool_size,
            self.db.statement_timeout.as_millis(),
            self.pop.default_batch,
            self.pop.default_timeout.as_millis(),
            self.pop.default_subscription_mode.as_str(),
            self.max_body_bytes,
            if self.auth.enabled { "on" } else { "off" },
        )
    }
}
