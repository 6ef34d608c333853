//! Serves a TLS echo: the floor the webhook server is compared with.
//!
//! It is built from the same stack as `memcached-operator webhooks` (axum on axum-server,
//! rustls with ring, the operator's own TLS configuration, HTTP/1 only, the same body limit
//! and request timeout) and answers each path with a response serialised beforehand, of the
//! same bytes as the webhook's answer to the same request. What the webhook costs beyond it
//! is decoding, deciding and encoding.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use axum_server::accept::NoDelayAcceptor;
use axum_server::tls_rustls::RustlsConfig;
use memcached_operator::tls::certs::{self, CertPaths, CertResolver};
use memcached_operator::tls::config::tls_config;
use memcached_operator::tls::profile::TlsSettings;
use memcached_operator::webhook::server::DEFAULT_MAX_REQUEST_BYTES;

/// Serves, at `/NAME`, the bytes of each file `NAME` of `responses`, over TLS with the
/// certificate in `cert_dir`, on a port of 127.0.0.1 of the kernel's choosing, whose address
/// it prints on a line of its own once it listens, until killed.
pub fn serve(cert_dir: &Path, responses: &Path) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let provider = certs::crypto_provider();
        let paths = CertPaths {
            cert: cert_dir.join("tls.crt"),
            key: cert_dir.join("tls.key"),
        };
        let cert_pem = std::fs::read(&paths.cert).expect("read tls.crt");
        let key_pem = std::fs::read(&paths.key).expect("read tls.key");
        let serving =
            certs::load_pair(&paths, &cert_pem, &key_pem, &provider).expect("a serving pair");
        let resolver = Arc::new(CertResolver::default());
        resolver.set(serving.key);
        let tls = tls_config(resolver, provider, &TlsSettings::intermediate(), false)
            .expect("a TLS configuration");

        let mut router = Router::new();
        for entry in std::fs::read_dir(responses).expect("the responses directory") {
            let entry = entry.expect("a directory entry");
            let name = entry.file_name().to_string_lossy().to_string();
            let body = Bytes::from(std::fs::read(entry.path()).expect("a response"));
            router = router.route(
                &format!("/{name}"),
                post(move |request: Request| {
                    let body = body.clone();
                    async move {
                        match Bytes::from_request(request, &()).await {
                            Ok(_) => (
                                StatusCode::OK,
                                [(
                                    header::CONTENT_TYPE,
                                    HeaderValue::from_static("application/json"),
                                )],
                                body,
                            )
                                .into_response(),
                            Err(rejection) => rejection.into_response(),
                        }
                    }
                }),
            );
        }
        let router = router
            .layer(DefaultBodyLimit::max(DEFAULT_MAX_REQUEST_BYTES))
            .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                StatusCode::REQUEST_TIMEOUT,
                Duration::from_secs(10),
            ));

        let listener = std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .expect("bind the echo port");
        let address = listener.local_addr().expect("the echo port's address");
        println!("{address}");
        listener.set_nonblocking(true).expect("non-blocking");
        let mut server =
            axum_server::from_tcp_rustls(listener, RustlsConfig::from_config(Arc::new(tls)))
                .expect("a TLS server")
                .map(|tls| tls.acceptor(NoDelayAcceptor::new()))
                .http1_only();
        server
            .http_builder()
            .http1()
            .header_read_timeout(Duration::from_secs(10));
        server
            .serve(router.into_make_service())
            .await
            .expect("the echo server runs");
    });
}
