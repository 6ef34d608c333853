//! Shows a CA change under client-certificate verification without a restart: the real
//! memcached (Debian's, from `hack/tools.sh memcached`) requires client certificates
//! (`ssl_verify_mode=2`), the operator's certificate refresher (`memcached-operator
//! refresh-certs`) watches its files, and a new CA is added to `ca.crt` before the server's
//! certificate is replaced by one the new CA signed. The new CA's clients are served once
//! `ca.crt` changed (the refresher sent `refresh_certs` for `ca.crt` alone), the new
//! certificate is then presented, the old CA's clients stay served throughout, and memcached
//! is never restarted. As in a pod, the refresher sees the server's certificate and `ca.crt`
//! but not its key (a directory of its own, as the pod's second volume of the Secret), and
//! presents a client certificate of its own (client authentication only).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use testkit::memcache::{Connection, Tls};
use testkit::memcache::{PORT_FILE_VARIABLE, port_file_dir, readable_dir, reported_port};
use testkit::pki::{Ca, KeyForm, Leaf};
use tokio::process::{Child, Command};

use crate::cluster::{Env, eventually};

const WAIT: Duration = Duration::from_secs(30);

/// Writes `name` in `dir` as the kubelet updates a Secret's files: whole, at once.
pub fn write(dir: &Path, name: &str, contents: &str) {
    let staged = dir.join(format!(".{name}.new"));
    std::fs::write(&staged, contents).expect("written");
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o644)).expect("readable");
    std::fs::rename(&staged, dir.join(name)).expect("renamed into place");
}

/// The server's files, and the refresher's view of them: the same without the key.
pub fn install(dir: &Path, public: &Path, server: &Leaf, ca_pem: &str) {
    write(dir, "tls.key", &server.key_pem);
    write(dir, "tls.crt", &server.cert_pem);
    write(dir, "ca.crt", ca_pem);
    write(public, "tls.crt", &server.cert_pem);
    write(public, "ca.crt", ca_pem);
}

/// Whether a client presenting `client`'s certificate (or none) is served (`version`
/// answered), and the serial of the certificate the server presented.
pub async fn served(port: u16, trust: &str, client: Option<&Leaf>) -> Result<String, String> {
    let tls = Tls::new(trust, "127.0.0.1", client);
    let address = ([127, 0, 0, 1], port).into();
    let mut connection = Connection::open(address, Some(&tls)).await?;
    let reply = connection.command("version\r\n").await?;
    if !reply.starts_with("VERSION ") {
        return Err(format!("version answered {reply:?}"));
    }
    connection
        .serial
        .ok_or_else(|| "no server certificate".into())
}

/// Starts `program` with `args` and `env`, killed when dropped.
pub fn spawn(program: &str, args: &[String], env: &[(&str, &std::path::Path)]) -> Child {
    Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"))
}

/// The real memcached serving TLS from the files in `dir` on a loopback port of its own,
/// verifying client certificates by `ssl_verify_mode=verify_mode`; with that port, once it
/// reported it, and the directory of its port file (kept while it runs).
pub async fn start_memcached(dir: &Path, verify_mode: u8) -> (Child, u16, tempfile::TempDir) {
    let ports = port_file_dir();
    let port_file = ports.path().join("ports");
    let files = |name: &str| dir.join(name).display().to_string();
    let mut memcached_args: Vec<String> = ["-p", "-1", "-U", "0", "-l", "127.0.0.1", "-Z", "-o"]
        .iter()
        .map(|a| a.to_string())
        .collect();
    memcached_args.push(format!(
        "ssl_chain_cert={},ssl_key={},ssl_ca_cert={},ssl_verify_mode={verify_mode}",
        files("tls.crt"),
        files("tls.key"),
        files("ca.crt")
    ));
    if std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0) {
        memcached_args.extend(["-u".to_string(), "nobody".to_string()]);
    }
    let memcached = spawn(
        "memcached",
        &memcached_args,
        &[(PORT_FILE_VARIABLE, &port_file)],
    );
    let port = eventually("memcached reports the port it listens on", WAIT, || async {
        reported_port(&port_file)
    })
    .await;
    (memcached, port, ports)
}

/// The operator's certificate refresher, as in a pod: the server's certificate and `ca.crt`
/// in `public` (no key), the sidecars' client certificate in `client_dir` when there is one;
/// every second.
pub fn start_refresher(public: &Path, client_dir: Option<&Path>, port: u16) -> Child {
    let mut args = vec![
        "refresh-certs".to_string(),
        format!("--cert-dir={}", public.display()),
        format!("--port={port}"),
        "--interval=1s".to_string(),
    ];
    if let Some(client_dir) = client_dir {
        args.push(format!("--client-cert-dir={}", client_dir.display()));
    }
    spawn(env!("CARGO_BIN_EXE_memcached-operator"), &args, &[])
}

pub async fn a_new_ca_is_trusted_before_certificates_it_signs_are_presented(_env: Arc<Env>) {
    let (old_ca, new_ca) = (Ca::root_named("old CA"), Ca::root_named("new CA"));
    let both = format!("{}{}", old_ca.pem, new_ca.pem);
    let (old_client, new_client) = (
        old_ca.serving(KeyForm::EcPkcs8),
        new_ca.serving(KeyForm::EcPkcs8),
    );
    let (dir, public, client_dir) = (readable_dir(), readable_dir(), readable_dir());
    let first = old_ca.serving(KeyForm::EcPkcs8);
    install(dir.path(), public.path(), &first, &old_ca.pem);
    let sidecars = old_ca.client("memcached-sidecars");
    write(client_dir.path(), "tls.crt", &sidecars.cert_pem);
    write(client_dir.path(), "tls.key", &sidecars.key_pem);

    let (mut memcached, port, _ports) = start_memcached(dir.path(), 2).await;
    let _refresher = start_refresher(public.path(), Some(client_dir.path()), port);

    let serial = eventually("memcached serves the old CA's client", WAIT, || async {
        served(port, &both, Some(&old_client)).await.ok()
    })
    .await;
    assert_eq!(serial, first.serial);
    let refused = served(port, &both, Some(&new_client)).await;
    assert!(
        refused.is_err(),
        "the new CA's client is refused: {refused:?}"
    );

    // The new CA joins ca.crt; the certificate stays.
    write(dir.path(), "ca.crt", &both);
    write(public.path(), "ca.crt", &both);
    eventually("memcached serves the new CA's client too", WAIT, || async {
        served(port, &both, Some(&new_client)).await.ok()
    })
    .await;
    served(port, &both, Some(&old_client))
        .await
        .expect("the old CA's client is still served");

    // Only now the certificate the new CA signed.
    let second = new_ca.serving(KeyForm::EcPkcs8);
    install(dir.path(), public.path(), &second, &both);
    eventually("memcached presents the new certificate", WAIT, || async {
        let serial = served(port, &both, Some(&old_client)).await.ok()?;
        (serial == second.serial).then_some(())
    })
    .await;
    for (who, client) in [("old", &old_client), ("new", &new_client)] {
        let serial = served(port, &both, Some(client))
            .await
            .unwrap_or_else(|e| panic!("the {who} CA's client: {e}"));
        assert_eq!(serial, second.serial);
    }
    assert!(
        memcached.try_wait().expect("memcached's status").is_none(),
        "memcached was never restarted"
    );
}
