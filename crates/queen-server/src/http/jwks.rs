//! Verification keys fetched from a JWKS endpoint (`JWT_JWKS_URL`).
//!
//! The set is fetched at start, again every `JWT_JWKS_REFRESH_INTERVAL`, and
//! at once when a token names a `kid` the set does not hold (a rotated key),
//! at most once per `JWT_JWKS_MIN_REFETCH_MS`. A failed fetch keeps the keys already
//! known; until the first fetch succeeds, tokens that need the set are
//! refused with 401.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey};

/// One usable key of the set.
struct Entry {
    kid: Option<String>,
    /// The algorithm the key is published for, when the set says.
    alg: Option<Algorithm>,
    key: DecodingKey,
}

/// The keys of one JWKS URL.
pub struct KeySet {
    url: String,
    client: reqwest::Client,
    min_refetch: Duration,
    keys: RwLock<Arc<Vec<Entry>>>,
    /// Serializes fetches; holds when the last one started.
    last_fetch: tokio::sync::Mutex<Option<Instant>>,
}

impl KeySet {
    pub fn new(url: &str, timeout: Duration, min_refetch: Duration) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()?;
        Ok(Self {
            url: url.to_owned(),
            client,
            min_refetch,
            keys: RwLock::new(Arc::new(Vec::new())),
            last_fetch: tokio::sync::Mutex::new(None),
        })
    }

    /// Fetches the set and replaces the known keys; returns how many are
    /// usable. With `min_age`, does nothing (`Ok(None)`) when the last fetch
    /// started more recently than that: concurrent misses share one fetch.
    async fn refresh(&self, min_age: Option<Duration>) -> Result<Option<usize>, String> {
        let mut last = self.last_fetch.lock().await;
        if let (Some(min), Some(t)) = (min_age, *last) {
            if t.elapsed() < min {
                return Ok(None);
            }
        }
        *last = Some(Instant::now());
        let entries = self
            .fetch()
            .await
            .map_err(|e| format!("JWKS fetch from {}: {e}", self.url))?;
        let n = entries.len();
        // stored before the lock is released, so a waiter finds the new keys
        *self.keys.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(entries);
        Ok(Some(n))
    }

    async fn fetch(&self) -> Result<Vec<Entry>, String> {
        let resp = self
            .client
            .get(&self.url)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !resp.status().is_success() {
            return Err(format!("HTTP {}", resp.status()));
        }
        let set: JwkSet = resp.json().await.map_err(|e| e.to_string())?;
        let mut entries = Vec::new();
        for jwk in &set.keys {
            let kid = jwk.common.key_id.clone();
            match DecodingKey::from_jwk(jwk) {
                Ok(key) => entries.push(Entry {
                    kid,
                    alg: jwk.common.key_algorithm.and_then(|a| a.try_into().ok()),
                    key,
                }),
                Err(e) => tracing::warn!(?kid, error = %e, "JWKS key skipped"),
            }
        }
        if entries.is_empty() {
            return Err("no usable key in the set".into());
        }
        Ok(entries)
    }

    /// The key for a token's `kid` and `alg`. Without a `kid`, the one key
    /// of the set that fits `alg`, if there is exactly one.
    pub async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, String> {
        if let Some(key) = self.find(kid, alg) {
            return Ok(key);
        }
        // a rotated key, or the first fetch has not succeeded yet
        if let Err(e) = self.refresh(Some(self.min_refetch)).await {
            tracing::warn!(error = %e, "JWKS refresh on an unknown key failed");
        }
        self.find(kid, alg).ok_or_else(|| match kid {
            Some(kid) => format!("Invalid token: no key with kid {kid} for {alg:?}"),
            None => format!("Invalid token: no kid, and no single key for {alg:?}"),
        })
    }

    fn find(&self, kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
        let keys = self.keys.read().unwrap_or_else(|p| p.into_inner()).clone();
        let mut fits = keys.iter().filter(|e| {
            e.key.family() == alg.family()
                && e.alg.is_none_or(|a| a == alg)
                && kid.is_none_or(|k| e.kid.as_deref() == Some(k))
        });
        let first = fits.next()?;
        // without a kid, two candidates are ambiguous
        if kid.is_none() && fits.next().is_some() {
            return None;
        }
        Some(first.key.clone())
    }

    /// Refreshes the set every `every` for as long as the runtime lives.
    pub fn spawn_refresher(self: &Arc<Self>, every: Duration) {
        let set = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                match set.refresh(None).await {
                    Ok(n) => tracing::info!(keys = n.unwrap_or(0), url = %set.url, "JWKS loaded"),
                    Err(e) => {
                        tracing::warn!(error = %e, "JWKS refresh failed; keeping the keys known")
                    }
                }
                tokio::time::sleep(every).await;
            }
        });
    }
}
