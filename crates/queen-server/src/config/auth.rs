//! JWT bearer authentication of the HTTP API (`JWT_*`, http-api.md section
//! 1.7): which algorithms and keys verify tokens, and how roles are named.

use std::fmt;
use std::time::Duration;

use super::defaults;
use super::env::{ConfigError, Reader};

/// Which algorithms verify bearer tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JwtAlgorithm {
    Hs256,
    Rs256,
    EdDsa,
    /// The token header's algorithm, among those a key is configured for.
    Auto,
}

/// JWT bearer authentication (http-api.md §1.7).
#[derive(Clone)]
pub struct AuthConfig {
    pub enabled: bool,
    pub algorithm: JwtAlgorithm,
    pub secret: String,
    /// PEM of the RSA or Ed25519 public key (the text, or a path to a file).
    pub public_key: String,
    /// `JWT_JWKS_URL`: a JWKS endpoint whose keys verify tokens too.
    pub jwks_url: Option<String>,
    pub jwks_refresh: Duration,
    pub jwks_timeout: Duration,
    /// Unknown `kid`s trigger a fetch of the set at most this often.
    pub jwks_min_refetch: Duration,
    pub issuer: Option<String>,
    pub audience: Option<String>,
    pub clock_skew_secs: u64,
    /// `JWT_ALLOW_NO_EXP`: tokens without `exp` are accepted (they never expire).
    pub allow_no_exp: bool,
    pub skip_paths: Vec<String>,
    pub roles_claim: String,
    pub roles_array_claim: String,
    pub role_admin: String,
    pub role_read_write: String,
    pub role_read_only: String,
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthConfig")
            .field("enabled", &self.enabled)
            .field("algorithm", &self.algorithm)
            .field("secret", &"<redacted>")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("jwks_url", &self.jwks_url)
            .finish_non_exhaustive()
    }
}

fn read_algorithm(r: &Reader<'_>) -> Result<JwtAlgorithm, ConfigError> {
    match r
        .string("JWT_ALGORITHM", defaults::JWT_ALGORITHM)
        .trim()
        .to_ascii_uppercase()
        .as_str()
    {
        "HS256" => Ok(JwtAlgorithm::Hs256),
        "RS256" => Ok(JwtAlgorithm::Rs256),
        "EDDSA" => Ok(JwtAlgorithm::EdDsa),
        "AUTO" => Ok(JwtAlgorithm::Auto),
        other => Err(ConfigError::new(
            "JWT_ALGORITHM",
            other,
            "expected HS256, RS256, EdDSA or auto",
        )),
    }
}

/// `JWT_PUBLIC_KEY` as PEM text: the value itself, or the file it names.
fn read_public_key(r: &Reader<'_>) -> Result<String, ConfigError> {
    let public_key = r.string("JWT_PUBLIC_KEY", "");
    if public_key.is_empty() || public_key.contains("-----BEGIN") {
        return Ok(public_key);
    }
    std::fs::read_to_string(public_key.trim()).map_err(|e| {
        ConfigError::new(
            "JWT_PUBLIC_KEY",
            public_key.clone(),
            format!("neither a PEM key nor a readable file: {e}"),
        )
    })
}

fn read_jwks_url(r: &Reader<'_>) -> Result<Option<String>, ConfigError> {
    let jwks_url = r.raw("JWT_JWKS_URL").filter(|u| !u.trim().is_empty());
    if let Some(url) = &jwks_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ConfigError::new(
                "JWT_JWKS_URL",
                url.clone(),
                "expected an http:// or https:// URL",
            ));
        }
    }
    Ok(jwks_url)
}

pub(super) fn read_auth(r: &Reader<'_>) -> Result<AuthConfig, ConfigError> {
    let enabled = r.boolean("JWT_ENABLED", defaults::JWT_ENABLED)?;
    let algorithm = read_algorithm(r)?;
    let secret = r.string("JWT_SECRET", "");
    let public_key = read_public_key(r)?;
    let jwks_url = read_jwks_url(r)?;
    let jwks_refresh = Duration::from_secs(
        r.parsed(
            "JWT_JWKS_REFRESH_INTERVAL",
            defaults::JWT_JWKS_REFRESH_INTERVAL_SECS,
        )?
        .max(1),
    );
    let jwks_timeout = r
        .millis("JWT_JWKS_TIMEOUT_MS", defaults::JWT_JWKS_TIMEOUT_MS)?
        .max(Duration::from_millis(1));
    let jwks_min_refetch =
        r.millis("JWT_JWKS_MIN_REFETCH_MS", defaults::JWT_JWKS_MIN_REFETCH_MS)?;
    if enabled {
        let needs_secret = matches!(algorithm, JwtAlgorithm::Hs256);
        let needs_key = matches!(algorithm, JwtAlgorithm::Rs256 | JwtAlgorithm::EdDsa);
        if needs_secret && secret.is_empty() {
            return Err(ConfigError::new(
                "JWT_SECRET",
                "",
                "JWT_ENABLED=true with HS256 needs a secret",
            ));
        }
        let no_key = public_key.is_empty() && jwks_url.is_none();
        if (needs_key && no_key) || (algorithm == JwtAlgorithm::Auto && secret.is_empty() && no_key)
        {
            return Err(ConfigError::new(
                "JWT_PUBLIC_KEY",
                "",
                "JWT_ENABLED=true needs JWT_PUBLIC_KEY or JWT_JWKS_URL (or JWT_SECRET for HS256)",
            ));
        }
    }
    Ok(AuthConfig {
        enabled,
        algorithm,
        secret,
        public_key,
        jwks_url,
        jwks_refresh,
        jwks_timeout,
        jwks_min_refetch,
        issuer: r.raw("JWT_ISSUER").filter(|v| !v.trim().is_empty()),
        audience: r.raw("JWT_AUDIENCE").filter(|v| !v.trim().is_empty()),
        clock_skew_secs: r.parsed("JWT_CLOCK_SKEW", defaults::JWT_CLOCK_SKEW_SECS)?,
        allow_no_exp: r.boolean("JWT_ALLOW_NO_EXP", defaults::JWT_ALLOW_NO_EXP)?,
        skip_paths: r
            .string("JWT_SKIP_PATHS", defaults::JWT_SKIP_PATHS)
            .split(',')
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .collect(),
        roles_claim: r.string("JWT_ROLES_CLAIM", defaults::JWT_ROLES_CLAIM),
        roles_array_claim: r.string("JWT_ROLES_ARRAY_CLAIM", defaults::JWT_ROLES_ARRAY_CLAIM),
        role_admin: r.string("JWT_ROLE_ADMIN", defaults::JWT_ROLE_ADMIN),
        role_read_write: r.string("JWT_ROLE_READ_WRITE", defaults::JWT_ROLE_READ_WRITE),
        role_read_only: r.string("JWT_ROLE_READ_ONLY", defaults::JWT_ROLE_READ_ONLY),
    })
}
