//! Pinning through a registry that needs a login: a second registry (Debian's docker-registry,
//! as the local one) with htpasswd authentication, on this process's loopback address, holds
//! copies of the operator's, memcached's and the exporter's images (`skopeo copy --all
//! --preserve-digests` from the local registry, with the login: every platform of an image
//! index, so that the index's digest is the same). The packaging tool
//! (`pin::pin_images`, what `generate --image-digests` runs), asking it as the mirror of each
//! image's host, pins each image to the digest the local registry gives it when it reads the
//! login from a containers-auth.json (as `podman login` writes it, given with
//! `--registry-auth-file`), and says where the credentials came from; with no entry for the
//! registry, or a wrong password, it stops, naming the image, the registry and the refusal.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use memcached_packager::bundle::Options;
use memcached_packager::pin;
use testkit::loopback;

use crate::cluster::{Env, mirrors_at};

/// The registry's only login.
const USER: &str = "pinner";
/// Its password.
const PASSWORD: &str = "not-a-secret";
/// Its htpasswd line: bcrypt (what docker-registry's htpasswd accepts) of PASSWORD, cost 4.
const HTPASSWD: &str = "pinner:$2b$04$RCbsVnRq.TUVnAzNdgsP6ugtFNEt3T76joRAioGEzxAQdMHRXdNdC\n";
/// The port on this process's loopback address: outside the kernel's ephemeral range.
const PORT: u16 = 5001;
/// The images pinned, by `hack/images.sh` name.
const IMAGES: [&str; 3] = ["operator", "memcached", "memcached-exporter"];

/// The registry with a login, stopped when dropped.
struct LoginRegistry {
    child: Child,
    address: String,
}

impl LoginRegistry {
    fn start(dir: &Path) -> LoginRegistry {
        let address = loopback::fixed(PORT).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.join("htpasswd"), HTPASSWD).expect("htpasswd");
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: {address}\n  secret: not-shared\nauth:\n  htpasswd:\n    realm: pinning\n    path: {}\n",
            dir.join("storage").display(),
            dir.join("htpasswd").display(),
        );
        std::fs::write(dir.join("config.yml"), config).expect("config.yml");
        let child = Command::new("/usr/bin/docker-registry")
            .arg("serve")
            .arg(dir.join("config.yml"))
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(dir.join("registry.log"))
                    .map(Stdio::from)
                    .unwrap_or_else(|_| Stdio::null()),
            )
            .spawn()
            .unwrap_or_else(|e| panic!("docker-registry (hack/tools.sh images): {e}"));
        let started = Instant::now();
        while std::net::TcpStream::connect(address).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "docker-registry answers on {address}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        LoginRegistry {
            child,
            address: address.to_string(),
        }
    }
}

impl Drop for LoginRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A containers-auth.json holding `user:password` for `registry`.
fn auth_file(
    dir: &Path,
    name: &str,
    registry: &str,
    user: &str,
    password: &str,
) -> std::path::PathBuf {
    let auth = serde_json::to_value(ByteString(format!("{user}:{password}").into_bytes()))
        .expect("base64");
    let path = dir.join(name);
    let text = serde_json::json!({"auths": {registry: {"auth": auth}}});
    std::fs::write(&path, text.to_string()).expect("auth file");
    path
}

/// Pins the three images through `registry` as the mirror of their hosts, with `auth`.
fn pin_through(registry: &str, auth: &Path) -> (Options, Result<Vec<String>, pin::PinError>) {
    let reference = |name: &str| testkit::images::reference(name).unwrap_or_else(|e| panic!("{e}"));
    let mut options = Options::for_release();
    options.images.operator = reference("operator");
    options.images.memcached = reference("memcached");
    options.images.exporter = reference("memcached-exporter");
    let mirrors = mirrors_at(registry);
    let said = pin::pin_images(&mut options, &mirrors, Some(auth.to_path_buf()));
    (options, said)
}

pub async fn a_registry_that_needs_a_login_is_pinned_with_the_logins_credentials(_env: Arc<Env>) {
    tokio::task::spawn_blocking(|| {
        testkit::images::build(&IMAGES).unwrap_or_else(|e| panic!("{e}"));
        let local = testkit::images::registry_address().unwrap_or_else(|e| panic!("{e}"));
        let dir = tempfile::tempdir().expect("a directory");
        let registry = LoginRegistry::start(dir.path());
        for name in IMAGES {
            let reference = testkit::images::reference(name).unwrap_or_else(|e| panic!("{e}"));
            let output = Command::new("/usr/bin/skopeo")
                .args(["copy", "--quiet", "--all", "--preserve-digests"])
                .args(["--src-tls-verify=false", "--dest-tls-verify=false"])
                .arg(format!("--dest-creds={USER}:{PASSWORD}"))
                .arg(format!("docker://{local}/{reference}"))
                .arg(format!("docker://{}/{reference}", registry.address))
                .output()
                .expect("skopeo runs");
            assert!(
                output.status.success(),
                "skopeo copy {reference}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }

        let login = auth_file(dir.path(), "auth.json", &registry.address, USER, PASSWORD);
        let (options, said) = pin_through(&registry.address, &login);
        let said = said.unwrap_or_else(|e| panic!("pinned with the login: {e}"));
        for (name, image) in [
            ("operator", &options.images.operator),
            ("memcached", &options.images.memcached),
            ("memcached-exporter", &options.images.exporter),
        ] {
            let digest = testkit::images::digest(name).unwrap_or_else(|e| panic!("{e}"));
            assert!(
                image.ends_with(&format!("@{digest}")),
                "{name} pinned to the local registry's digest {digest}: {image}"
            );
        }
        let credited = said
            .iter()
            .filter(|line| {
                line.starts_with("pinned ")
                    && line.contains(&format!(
                        "(credentials for {} from {})",
                        registry.address,
                        login.display()
                    ))
            })
            .count();
        assert_eq!(
            credited, 3,
            "each pin says where its credentials came from: {said:?}"
        );

        let elsewhere = auth_file(dir.path(), "elsewhere.json", "quay.io", USER, PASSWORD);
        let (_, anonymous) = pin_through(&registry.address, &elsewhere);
        let anonymous = anonymous.expect_err("refused without a login").to_string();
        let wrong = auth_file(dir.path(), "wrong.json", &registry.address, USER, "wrong");
        let (_, refused) = pin_through(&registry.address, &wrong);
        let refused = refused
            .expect_err("refused with a wrong password")
            .to_string();
        eprintln!(
            "figures: pinned through {} with the login: {said:?}; without: {anonymous}; with a \
             wrong password: {refused}",
            registry.address
        );
        assert!(
            anonymous.contains("cannot resolve")
                && anonymous.contains(&registry.address)
                && anonymous.contains(&format!(
                    "read anonymously: no credentials for {} found",
                    registry.address
                )),
            "{anonymous}"
        );
        assert!(
            refused.contains("cannot resolve")
                && refused.contains(&registry.address)
                && !refused.contains("read anonymously"),
            "{refused}"
        );
    })
    .await
    .expect("the scenario's blocking part finished");
}
