//! The server beyond loopback: only with TLS and client certificates: only clients holding a
//! certificate the client CA signed get through the handshake; TLS without them serves
//! loopback only; a plaintext client or one with another
//! CA's certificate never reaches the service; bad certificate files stop the start with the
//! file named.
#![cfg(feature = "server")]

mod common;

use common::*;
use hotplane_p4rt::proto::p4::v1::p4_runtime_client::P4RuntimeClient;
use hotplane_p4rt::proto::p4::v1::CapabilitiesRequest;
use hotplane_p4rt::{EngineDataplane, ServeError, Server, ServerConfig, TlsConfig};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

/// A CA, and a certificate it signed for `name`: (CA pem, cert pem, key pem).
struct Pki {
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

impl Pki {
    fn new() -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = params.self_signed(&ca_key).unwrap();
        Pki { ca, ca_key }
    }

    /// A certificate and key for `name`, signed by this CA (PEM).
    fn issue(&self, name: &str) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .signed_by(&key, &self.ca, &self.ca_key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn serve(
    listen: &str,
    tls: Option<TlsConfig>,
) -> Result<(hotplane_engine::Engine, Server), ServeError> {
    let plane = engine();
    let dp = EngineDataplane::new(&plane, "pre").unwrap();
    let cfg = ServerConfig {
        listen: listen.parse().unwrap(),
        device_id: DEVICE,
        tls,
        ..Default::default()
    };
    let server = Server::spawn(&cfg, Arc::new(dp))?;
    Ok((plane, server))
}

/// Ask for the server's capabilities over a channel made with `tls` (none: plaintext).
async fn ask(port: u16, tls: Option<ClientTlsConfig>) -> Result<String, String> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut ep = Channel::from_shared(format!("{scheme}://localhost:{port}")).unwrap();
    if let Some(t) = tls {
        ep = ep.tls_config(t).map_err(|e| e.to_string())?;
    }
    let channel = ep.connect().await.map_err(|e| format!("connect: {e:?}"))?;
    let reply = P4RuntimeClient::new(channel)
        .capabilities(CapabilitiesRequest::default())
        .await
        .map_err(|e| format!("{e:?}"))?;
    Ok(reply.into_inner().p4runtime_api_version)
}

#[tokio::test]
async fn beyond_loopback_only_with_tls_and_only_clients_the_ca_signed() {
    let dir = tempdir();
    let pki = Pki::new();
    let (cert, key) = pki.issue("localhost");
    let server_cert = write(&dir, "server.pem", &cert);
    let server_key = write(&dir, "server.key", &key);
    let ca = write(&dir, "ca.pem", &pki.ca.pem());

    // Without TLS, an address beyond loopback is refused at start, saying what to set.
    let err = serve("0.0.0.0:0", None).err().expect("refused").to_string();
    assert!(err.contains("[p4runtime.tls]"), "{err}");
    // A certificate file that is not there, or not a certificate, stops the start.
    let missing =
        TlsConfig { cert: dir.join("nope.pem"), key: server_key.clone(), client_ca: None };
    let err = serve("127.0.0.1:0", Some(missing)).err().expect("refused").to_string();
    assert!(err.contains("nope.pem"), "{err}");
    let garbage = write(&dir, "garbage.pem", "not a certificate");
    let bad = TlsConfig { cert: garbage, key: server_key.clone(), client_ca: None };
    assert!(matches!(serve("127.0.0.1:0", Some(bad)), Err(ServeError::Tls(_))));

    // TLS without client certificates stays on loopback: anyone could drive the switch.
    let server_only =
        TlsConfig { cert: server_cert.clone(), key: server_key.clone(), client_ca: None };
    let err = serve("0.0.0.0:0", Some(server_only.clone())).err().expect("refused").to_string();
    assert!(err.contains("client_ca"), "{err}");
    let (plane, server) = serve("127.0.0.1:0", Some(server_only)).unwrap();
    let trust = Certificate::from_pem(pki.ca.pem());
    let anonymous = ClientTlsConfig::new().ca_certificate(trust.clone()).domain_name("localhost");
    let port = server.addr().port();
    assert_eq!(ask(port, Some(anonymous.clone())).await.unwrap(), "1.5.0", "server-only TLS");
    assert!(ask(port, None).await.is_err(), "plaintext to a TLS server");
    drop(server);
    assert_eq!(plane.stop().panics, 0);

    let tls = TlsConfig { cert: server_cert, key: server_key, client_ca: Some(ca) };
    let (plane, server) = serve("0.0.0.0:0", Some(tls)).expect("TLS may listen everywhere");
    let port = server.addr().port();
    let (client_cert, client_key) = pki.issue("controller");
    let client = ClientTlsConfig::new()
        .ca_certificate(trust.clone())
        .domain_name("localhost")
        .identity(Identity::from_pem(&client_cert, &client_key));
    assert_eq!(ask(port, Some(client)).await.unwrap(), "1.5.0", "a client the CA signed");

    // No client certificate, another CA's, or no TLS at all: refused before the service.
    assert!(ask(port, Some(anonymous)).await.is_err());
    let (other_cert, other_key) = Pki::new().issue("controller");
    let stranger = ClientTlsConfig::new()
        .ca_certificate(trust)
        .domain_name("localhost")
        .identity(Identity::from_pem(other_cert, other_key));
    assert!(ask(port, Some(stranger)).await.is_err());
    assert!(ask(port, None).await.is_err(), "plaintext");
    drop(server);
    assert_eq!(plane.stop().panics, 0);
    std::fs::remove_dir_all(&dir).ok();
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hotplane-p4rt-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
