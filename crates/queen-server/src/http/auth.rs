//! JWT bearer authentication and the role each route needs (http-api.md §1.7).
//!
//! Levels: public (skip paths, `OPTIONS`), read-only (GETs of status,
//! analytics, resources, messages, consumer groups, DLQ, traces), admin
//! (system, internal, deleting groups and queues, stats refresh) and
//! read-write for everything else. Roles come from the `role` string claim or
//! the `roles` array claim: admin ⊃ read-write ⊃ read-only.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use serde_json::Value;

use super::error::ApiError;
use super::jwks::KeySet;
use crate::config::{AuthConfig, JwtAlgorithm};

/// Access levels, ordered: a role grants its level and every lower one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Public,
    ReadOnly,
    ReadWrite,
    Admin,
}

/// Who made the request, once the token checked out.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's `sub`, stamped into pushed messages as `producerSub`.
    pub subject: Option<String>,
    pub level: Level,
}

/// Verifies tokens with the configured keys.
pub struct Verifier {
    config: AuthConfig,
    hmac: Option<DecodingKey>,
    rsa: Option<DecodingKey>,
    ed: Option<DecodingKey>,
    jwks: Option<Arc<KeySet>>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// Loads the keys; an unusable key is a start-up error.
    pub fn new(config: &AuthConfig) -> anyhow::Result<Self> {
        let pem = config.public_key.as_bytes();
        let rsa = (!pem.is_empty())
            .then(|| DecodingKey::from_rsa_pem(pem).ok())
            .flatten();
        let ed = (!pem.is_empty())
            .then(|| DecodingKey::from_ed_pem(pem).ok())
            .flatten();
        if !pem.is_empty() && rsa.is_none() && ed.is_none() {
            anyhow::bail!("JWT_PUBLIC_KEY is neither an RSA nor an Ed25519 public key in PEM form");
        }
        let hmac = if config.secret.is_empty() {
            None
        } else {
            Some(DecodingKey::from_secret(config.secret.as_bytes())?)
        };
        let jwks = match &config.jwks_url {
            Some(url) => {
                let set = Arc::new(KeySet::new(
                    url,
                    config.jwks_timeout,
                    config.jwks_min_refetch,
                )?);
                set.spawn_refresher(config.jwks_refresh);
                Some(set)
            }
            None => None,
        };
        Ok(Self {
            config: config.clone(),
            hmac,
            rsa,
            ed,
            jwks,
        })
    }

    fn allowed(&self, alg: Algorithm) -> bool {
        match self.config.algorithm {
            JwtAlgorithm::Hs256 => alg == Algorithm::HS256,
            JwtAlgorithm::Rs256 => alg == Algorithm::RS256,
            JwtAlgorithm::EdDsa => alg == Algorithm::EdDSA,
            JwtAlgorithm::Auto => {
                matches!(alg, Algorithm::HS256 | Algorithm::RS256 | Algorithm::EdDSA)
            }
        }
    }

    /// The configured key (secret or PEM) for `alg`.
    fn static_key(&self, alg: Algorithm) -> Option<&DecodingKey> {
        match alg {
            Algorithm::HS256 => self.hmac.as_ref(),
            Algorithm::RS256 => self.rsa.as_ref(),
            Algorithm::EdDSA => self.ed.as_ref(),
            _ => None,
        }
    }

    /// Checks a bearer token and returns the caller, or why it was refused.
    ///
    /// A token with a `kid` is checked with that key of the JWKS set when
    /// one is configured; otherwise with the configured secret or PEM key, or
    /// failing those with the set's only key for the algorithm.
    pub async fn verify(&self, token: &str) -> Result<Caller, String> {
        let header = decode_header(token).map_err(|e| format!("Invalid token: {e}"))?;
        let refused = || format!("Invalid token: algorithm {:?} not accepted", header.alg);
        if !self.allowed(header.alg) {
            return Err(refused());
        }
        let fetched;
        let key = match (
            &self.jwks,
            header.kid.as_deref(),
            self.static_key(header.alg),
        ) {
            (Some(set), Some(kid), _) => {
                fetched = set.key(Some(kid), header.alg).await?;
                &fetched
            }
            (_, _, Some(key)) => key,
            (Some(set), None, None) => {
                fetched = set.key(None, header.alg).await?;
                &fetched
            }
            (None, _, None) => return Err(refused()),
        };
        let v = validation(&self.config, header.alg);
        let data = decode::<Value>(token, key, &v).map_err(|e| format!("Invalid token: {e}"))?;
        let claims = data.claims;
        let subject = match claims.get("sub") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err("Invalid token: sub must be a string".into()),
        };
        if let Some(s) = &subject {
            // the subject is stamped into every pushed message (producerSub)
            crate::http::limits::check_text("sub", s, crate::http::limits::MAX_NAME_CHARS)
                .map_err(|e| format!("Invalid token: {}", e.message))?;
        }
        let mut roles: Vec<&str> = Vec::new();
        if let Some(r) = claims.get(&self.config.roles_claim).and_then(Value::as_str) {
            roles.push(r);
        }
        if let Some(list) = claims
            .get(&self.config.roles_array_claim)
            .and_then(Value::as_array)
        {
            roles.extend(list.iter().filter_map(Value::as_str));
        }
        let c = &self.config;
        let level = roles
            .iter()
            .map(|r| {
                if *r == c.role_admin {
                    Level::Admin
                } else if *r == c.role_read_write {
                    Level::ReadWrite
                } else if *r == c.role_read_only {
                    Level::ReadOnly
                } else {
                    Level::Public
                }
            })
            .max()
            .unwrap_or(Level::Public);
        Ok(Caller { subject, level })
    }

    /// The level a request needs.
    pub fn required_level(&self, method: &Method, path: &str) -> Level {
        if method == Method::OPTIONS || self.config.skip_paths.iter().any(|p| p == path) {
            return Level::Public;
        }
        required_level(method, path)
    }
}

/// The claim checks of a token (configuration.md, `JWT_*`): `exp` and `nbf`
/// with `JWT_CLOCK_SKEW` of leeway; `exp` required unless
/// `JWT_ALLOW_NO_EXP`; `iss` and `aud` required, with the configured value,
/// when `JWT_ISSUER` / `JWT_AUDIENCE` are set.
fn validation(config: &AuthConfig, alg: Algorithm) -> Validation {
    let mut v = Validation::new(alg);
    v.leeway = config.clock_skew_secs;
    v.validate_exp = true;
    v.validate_nbf = true;
    v.required_spec_claims.clear();
    if !config.allow_no_exp {
        v.required_spec_claims.insert("exp".to_owned());
    }
    v.validate_aud = config.audience.is_some();
    if let Some(aud) = &config.audience {
        v.set_audience(&[aud]);
        v.required_spec_claims.insert("aud".to_owned());
    }
    if let Some(iss) = &config.issuer {
        v.set_issuer(&[iss]);
        v.required_spec_claims.insert("iss".to_owned());
    }
    v
}

/// The route table of http-api.md §1.7, without the configurable skip paths.
pub fn required_level(method: &Method, path: &str) -> Level {
    let starts = |p: &str| path == p || path.starts_with(&format!("{p}/"));
    if starts("/api/v1/system")
        || starts("/api/v1/migration")
        || starts("/internal")
        || (method == Method::DELETE
            && (starts("/api/v1/consumer-groups") || starts("/api/v1/resources/queues")))
        || (method == Method::POST && path == "/api/v1/stats/refresh")
    {
        return Level::Admin;
    }
    let read_only_prefixes = [
        "/api/v1/status",
        "/api/v1/analytics",
        "/api/v1/resources",
        "/api/v1/messages",
        "/api/v1/consumer-groups",
        "/api/v1/dlq",
        "/api/v1/traces",
    ];
    if method == Method::GET && read_only_prefixes.iter().any(|p| path.starts_with(p)) {
        return Level::ReadOnly;
    }
    if !path.starts_with("/api/") && method == Method::GET {
        // dashboard assets and anything else outside the API
        return Level::Public;
    }
    Level::ReadWrite
}

/// The bearer token of a request's `Authorization` header, if it has one.
pub fn bearer_token(req: &Request) -> Option<&str> {
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })
        .map(str::trim)
}

/// Checks `token` for a request that needs `needed`: the caller, or the
/// answer refusing it (401 for a bad token, 403 for too low a role).
pub async fn admit(verifier: &Verifier, token: &str, needed: Level) -> Result<Caller, Response> {
    match verifier.verify(token).await {
        Err(reason) => Err(unauthorized(&reason)),
        Ok(caller) if caller.level < needed => Err(ApiError {
            status: StatusCode::FORBIDDEN,
            message: "Insufficient permissions".into(),
        }
        .into_response()),
        Ok(caller) => Ok(caller),
    }
}

/// The 401 answer with `message`.
pub fn unauthorized(message: &str) -> Response {
    ApiError {
        status: StatusCode::UNAUTHORIZED,
        message: message.to_owned(),
    }
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_levels_follow_the_contract() {
        use Level::*;
        let cases = [
            (Method::GET, "/api/v1/status/queues", ReadOnly),
            (Method::GET, "/api/v1/resources/queues/q", ReadOnly),
            (Method::DELETE, "/api/v1/resources/queues/q", Admin),
            (Method::DELETE, "/api/v1/consumer-groups/g", Admin),
            (Method::GET, "/api/v1/consumer-groups/g", ReadOnly),
            (
                Method::POST,
                "/api/v1/consumer-groups/g/subscription",
                ReadWrite,
            ),
            (Method::GET, "/api/v1/system/maintenance", Admin),
            (Method::POST, "/api/v1/stats/refresh", Admin),
            (Method::POST, "/api/v1/push", ReadWrite),
            (Method::GET, "/api/v1/pop/queue/q", ReadWrite),
            (Method::DELETE, "/api/v1/messages/p/t", ReadWrite),
            (Method::GET, "/api/v1/dlq", ReadOnly),
            (Method::GET, "/assets/app.js", Public),
            (Method::GET, "/api/v1/migration/status", Admin),
            (Method::POST, "/api/v1/migration/start", Admin),
            (Method::DELETE, "/api/v1/dlq/p/t", ReadWrite),
            (Method::GET, "/api/v1/analytics/queue-ops", ReadOnly),
        ];
        for (m, p, want) in cases {
            assert_eq!(required_level(&m, p), want, "{m} {p}");
        }
    }
}
