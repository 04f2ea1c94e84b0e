//! `queen kv` (`POST /api/v1/kv`) and `queen locks` (`POST /api/v1/locks`).

use clap::Subcommand;
use queen_client::Client;
use serde_json::{json, Value};

use crate::admin::{items, table, table_wide};
use crate::output::{self, cell, Failure, Format};
use crate::when;

#[derive(Debug, Subcommand)]
pub enum KvCommand {
    /// One key's value, version and expiry; status 4 when the key is absent.
    Get { namespace: String, key: String },
    /// Write a key (a JSON value); forever unless --ttl.
    Put {
        namespace: String,
        key: String,
        /// The value, one JSON value.
        value: String,
        /// Expire after this long (30, 90s, 15m, 1d); default: never.
        #[arg(long, value_parser = when::seconds_arg, value_name = "DURATION")]
        ttl: Option<u64>,
        /// Only if the key is at this version (0: only if it does not exist).
        #[arg(long, value_name = "VERSION", conflicts_with = "if_absent")]
        expect: Option<u64>,
        /// Only if the key does not exist.
        #[arg(long)]
        if_absent: bool,
    },
    /// Delete a key.
    Delete {
        namespace: String,
        key: String,
        /// Only if the key is at this version.
        #[arg(long, value_name = "VERSION")]
        expect: Option<u64>,
    },
    /// The keys starting with PREFIX, in byte order.
    List {
        namespace: String,
        prefix: String,
        /// Start after this key (the NEXT AFTER of a truncated page).
        #[arg(long)]
        after: Option<String>,
        /// Most keys (1 to 1000).
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// Keys without values.
        #[arg(long)]
        keys_only: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum LocksCommand {
    /// Take a permit of a lock (a semaphore with --limit); status 1 when held.
    Acquire {
        name: String,
        /// How long the permit lasts unless renewed (30, 90s, 5m).
        #[arg(long, value_parser = when::seconds_arg, value_name = "DURATION")]
        ttl: u64,
        /// Owner recorded on the permit (default: one made by the broker).
        #[arg(long)]
        owner: Option<String>,
        /// Permits of the lock (1 to 1024; default 1).
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Give a permit back by its token (the one `acquire` printed).
    Release {
        name: String,
        #[arg(value_name = "TOKEN")]
        permit: u64,
        #[arg(long)]
        slot: Option<u32>,
    },
    /// Who holds a lock.
    Show { name: String },
}

/// One operation of `route`; its single result element.
async fn one(client: &Client, route: &str, op: Value) -> Result<Value, Failure> {
    let v = client
        .admin()
        .post_json(route, &json!({ "operations": [op] }))
        .await?;
    Ok(v["results"][0].clone())
}

fn value_arg(text: &str) -> Result<Value, Failure> {
    serde_json::from_str(text.trim())
        .map_err(|e| Failure::Usage(format!("the value is not valid JSON: {e}")))
}

const KV_COLUMNS: &[(&str, &str)] = &[
    ("KEY", "/key"),
    ("VERSION", "/version"),
    ("EXPIRES", "/expiresAt"),
    ("VALUE", "/value"),
];
const KV_WIDE: &[(&str, &str)] = &[("UPDATED", "/updatedAt")];

/// Fails with the broker's reason unless `r` says `applied`.
fn applied(r: &Value, what: &str) -> Result<(), Failure> {
    if r["applied"] == true {
        Ok(())
    } else {
        Err(Failure::Error(format!(
            "{what} not applied: {} (version {})",
            cell(&r["reason"]),
            cell(&r["version"])
        )))
    }
}

pub async fn kv(client: &Client, cmd: KvCommand, out: Format) -> Result<(), Failure> {
    const ROUTE: &str = "/api/v1/kv";
    match cmd {
        KvCommand::Get { namespace, key } => {
            let r = one(
                client,
                ROUTE,
                json!({"op": "get", "ns": namespace, "key": key}),
            )
            .await?;
            let found = r["found"] == true;
            output::show(&r, out, "", |r, wide| {
                if found {
                    table_wide(std::slice::from_ref(r), KV_COLUMNS, KV_WIDE, wide).print_or("");
                }
            })?;
            if found {
                Ok(())
            } else {
                if out.is_human() {
                    eprintln!("queen: no key {key} in {namespace}");
                }
                Err(Failure::Empty)
            }
        }
        KvCommand::Put {
            namespace,
            key,
            value,
            ttl,
            expect,
            if_absent,
        } => {
            let mut op = json!({
                "op": if if_absent { "putIfAbsent" } else { "put" },
                "ns": namespace, "key": key, "value": value_arg(&value)?,
            });
            match ttl {
                Some(0) => return Err(Failure::Usage("--ttl must be at least 1 s".into())),
                Some(s) => op["ttlSeconds"] = json!(s),
                None => op["forever"] = json!(true),
            }
            if let Some(v) = expect {
                op["expect"] = json!(v);
            }
            let r = one(client, ROUTE, op).await?;
            output::show(&r, out, "", |r, _| {
                if r["applied"] == true {
                    crate::outln!("put {key} in {namespace}: version {}", cell(&r["version"]));
                }
            })?;
            applied(&r, "put")
        }
        KvCommand::Delete {
            namespace,
            key,
            expect,
        } => {
            let mut op = json!({"op": "delete", "ns": namespace, "key": key});
            if let Some(v) = expect {
                op["expect"] = json!(v);
            }
            let r = one(client, ROUTE, op).await?;
            output::show(&r, out, "", |r, _| {
                if r["applied"] == true {
                    crate::outln!("deleted {key} from {namespace}");
                }
            })?;
            applied(&r, "delete")
        }
        KvCommand::List {
            namespace,
            prefix,
            after,
            limit,
            keys_only,
        } => {
            let mut op = json!({"op": "getPrefix", "ns": namespace, "prefix": prefix,
                                "limit": limit, "keysOnly": keys_only});
            if let Some(a) = after {
                op["after"] = json!(a);
            }
            let r = one(client, ROUTE, op).await?;
            output::show(&r, out, "/rows", |r, wide| {
                table_wide(items(r, "rows"), KV_COLUMNS, KV_WIDE, wide).print_or("no key");
                if r["truncated"] == true {
                    crate::outln!("more: --after {}", cell(&r["nextAfter"]));
                }
            })
        }
    }
}

pub async fn locks(client: &Client, cmd: LocksCommand, out: Format) -> Result<(), Failure> {
    const ROUTE: &str = "/api/v1/locks";
    let holders = |r: &Value| {
        items(r, "holders")
            .iter()
            .map(|h| format!("slot {} by {}", cell(&h["slot"]), cell(&h["owner"])))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match cmd {
        LocksCommand::Acquire {
            name,
            ttl,
            owner,
            limit,
        } => {
            let mut op = json!({"op": "acquire", "name": name, "ttlSeconds": ttl});
            if let Some(o) = owner {
                op["owner"] = json!(o);
            }
            if let Some(l) = limit {
                op["limit"] = json!(l);
            }
            let r = one(client, ROUTE, op).await?;
            let granted = r["acquired"] == true;
            output::show(&r, out, "", |r, _| {
                if granted {
                    crate::outln!(
                        "acquired {name}: slot {}, token {}, owner {}",
                        cell(&r["slot"]),
                        cell(&r["token"]),
                        cell(&r["owner"])
                    );
                }
            })?;
            if granted {
                Ok(())
            } else {
                Err(Failure::Error(format!(
                    "{name} not acquired: {} ({})",
                    cell(&r["reason"]),
                    holders(&r)
                )))
            }
        }
        LocksCommand::Release { name, permit, slot } => {
            let mut op = json!({"op": "release", "name": name, "token": permit});
            if let Some(s) = slot {
                op["slot"] = json!(s);
            }
            let r = one(client, ROUTE, op).await?;
            let released = r["released"] == true;
            output::show(&r, out, "", |_, _| {
                if released {
                    crate::outln!("released {name}");
                }
            })?;
            if released {
                Ok(())
            } else {
                Err(Failure::Error(format!(
                    "{name} not released: {} (held by: {})",
                    cell(&r["reason"]),
                    holders(&r)
                )))
            }
        }
        LocksCommand::Show { name } => {
            let r = one(client, ROUTE, json!({"op": "get", "name": name})).await?;
            output::show(&r, out, "/holders", |r, wide| {
                table(
                    items(r, "holders"),
                    &[
                        ("SLOT", "/slot"),
                        ("OWNER", "/owner"),
                        ("TOKEN", "/token"),
                        ("SINCE", "/since"),
                        ("EXPIRES", "/expiresAt"),
                    ],
                )
                .wide(wide)
                .print_or(&format!("{name} is free"));
            })
        }
    }
}
