//! TLS to PostgreSQL (`PG_USE_SSL`), with rustls and the `ring` provider.
//!
//! - `PG_USE_SSL=true` requires TLS on every connection (pool, migrations,
//!   advisory locks); a server that refuses it is a connection error.
//! - `PG_SSL_REJECT_UNAUTHORIZED` (default `true`) checks the certificate:
//!   it must chain to a system root or to one in `PG_SSL_ROOT_CERT`, and name
//!   the host connected to. `false` still encrypts but accepts any
//!   certificate (the server is not authenticated).
//! - Without `PG_USE_SSL`, connections are plain unless `DATABASE_URL` asks
//!   for TLS with its own `sslmode`.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::StoreError;
use crate::config::DbConfig;

/// The connector every connection of the broker is made with.
pub type Connector = MakeRustlsConnect;

/// Sets the TLS mode on `pg` and builds the connector for it.
pub fn configure(db: &DbConfig, pg: &mut tokio_postgres::Config) -> Result<Connector, StoreError> {
    if db.use_ssl {
        pg.ssl_mode(SslMode::Require);
    } else if !db.url.as_deref().is_some_and(|u| u.contains("sslmode=")) {
        // the driver's default is `prefer`: never encrypt unasked
        pg.ssl_mode(SslMode::Disable);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::internal(format!("TLS setup: {e}")))?;
    let tls_wanted = pg.get_ssl_mode() != SslMode::Disable;
    let config = if !tls_wanted {
        builder
            .with_root_certificates(RootCertStore::empty())
            .with_no_client_auth()
    } else if db.ssl_reject_unauthorized {
        builder
            .with_root_certificates(trusted_roots(db)?)
            .with_no_client_auth()
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth()
    };
    Ok(MakeRustlsConnect::new(config))
}

/// The system's roots plus those of `PG_SSL_ROOT_CERT`.
fn trusted_roots(db: &DbConfig) -> Result<RootCertStore, StoreError> {
    let mut roots = RootCertStore::empty();
    // unreadable system certificates are skipped: a private CA may be all there is
    let system = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(system.certs);
    if let Some(path) = &db.ssl_root_cert {
        let bad = |e: &dyn fmt::Display| {
            StoreError::internal(format!(
                "PG_SSL_ROOT_CERT={}: cannot read CA certificates: {e}",
                path.display()
            ))
        };
        let mut added = 0;
        for cert in CertificateDer::pem_file_iter(path).map_err(|e| bad(&e))? {
            roots.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
            added += 1;
        }
        if added == 0 {
            return Err(bad(&"no certificate in the file"));
        }
    }
    if roots.is_empty() {
        return Err(StoreError::internal(
            "PG_SSL_REJECT_UNAUTHORIZED=true but no trusted CA certificate was found: \
             set PG_SSL_ROOT_CERT to the server's CA file",
        ));
    }
    Ok(roots)
}

/// `PG_SSL_REJECT_UNAUTHORIZED=false`: any certificate is accepted, but the
/// handshake signatures are still checked (the session key belongs to the
/// certificate the server showed).
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
