//! Shows that the operator reads memcached's auth file as memcached itself does: the real
//! memcached (Debian's, from `hack/tools.sh memcached`) is started with each file of a corpus,
//! and whether it refuses the file, and which credentials authenticate, are compared with
//! `api::auth_file::read`, which the sidecars and admission judge by.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memcached_operator::api::auth_file::{Credentials, Read, read};
use testkit::memcache::{PORT_FILE_VARIABLE, port_file_dir, readable_dir, reported_port};

use crate::cluster::Env;

/// memcached, stopped when dropped.
struct Memcached(Child);

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What memcached did with a file: refused it, or serves with it.
enum Outcome {
    Refused(String),
    Serving(Memcached, u16),
}

fn start(file: &std::path::Path) -> Outcome {
    let ports = port_file_dir();
    let port_file = ports.path().join("ports");
    let mut command = Command::new("memcached");
    command
        .args(["-p", "-1", "-U", "0", "-l", "127.0.0.1", "-Y"])
        .arg(file)
        .env(PORT_FILE_VARIABLE, &port_file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // memcached refuses to run as root without a user to switch to.
    if running_as_root() {
        command.args(["-u", "nobody"]);
    }
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start memcached (hack/tools.sh memcached): {e}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("memcached's status") {
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                let _ = pipe.read_to_string(&mut stderr);
            }
            return Outcome::Refused(format!("{status}: {}", stderr.trim()));
        }
        if let Some(port) = reported_port(&port_file) {
            return Outcome::Serving(Memcached(child), port);
        }
        assert!(Instant::now() < deadline, "memcached never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
}

/// Whether memcached on `port` authenticates `credentials`.
pub fn authenticates(port: u16, credentials: &Credentials) -> bool {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("memcached answers");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a timeout");
    let mut data = credentials.user.clone();
    data.push(b' ');
    data.extend_from_slice(&credentials.password);
    let mut request = format!("set auth 0 0 {}\r\n", data.len()).into_bytes();
    request.extend_from_slice(&data);
    request.extend_from_slice(b"\r\n");
    stream.write_all(&request).expect("sent");
    let mut reply = [0u8; 64];
    let read = stream.read(&mut reply).expect("an answer");
    let reply = String::from_utf8_lossy(&reply[..read]);
    match reply.trim_end() {
        "STORED" => true,
        "CLIENT_ERROR authentication failure" => false,
        other => panic!("memcached answered the credentials with {other:?}"),
    }
}

pub fn creds(user: &str, password: &str) -> Credentials {
    Credentials {
        user: user.into(),
        password: password.into(),
    }
}

/// Files memcached reads in each of the ways `read` tells apart, and credentials to try on
/// each: the ones written, and the ones memcached might load instead.
fn corpus() -> Vec<(Vec<u8>, Vec<Credentials>)> {
    let x = |n| "x".repeat(n);
    let nine: String = (0..9).map(|i| format!("u{i}:p\n")).collect();
    vec![
        (
            b"a:bc\nd:ef:g\n".to_vec(),
            vec![creds("a", "bc"), creds("d", "ef:g")],
        ),
        (
            b"a:bc\r\nd:ef\r\n".to_vec(),
            vec![creds("a", "bc"), creds("d", "ef")],
        ),
        (b"a:bc\n\n".to_vec(), vec![]),
        (b"\na:bc\n".to_vec(), vec![]),
        (b"abc\n".to_vec(), vec![]),
        (b"a:b\r\n\r\n".to_vec(), vec![]),
        (
            format!("a:{}\nd:ef\n", x(252)).into_bytes(),
            vec![creds("a", &x(252)), creds("d", "ef")],
        ),
        (
            format!("a:{}\nd:ef\n", x(253)).into_bytes(),
            vec![creds("a", &x(253)), creds("d", "ef")],
        ),
        (
            format!("a:{}\nd:ef\n", x(254)).into_bytes(),
            vec![creds("a", &x(254)), creds("a", &x(253)), creds("d", "ef")],
        ),
        (format!("a:{}\r\nd:ef\r\n", x(252)).into_bytes(), vec![]),
        (
            nine.into_bytes(),
            vec![creds("u0", "p"), creds("u7", "p"), creds("u8", "p")],
        ),
        (
            b"a:b\0c\nd:e\n".to_vec(),
            vec![creds("a", "b"), creds("d", "e")],
        ),
        (
            b"a:b\rc\nd:e\n".to_vec(),
            vec![creds("a", "b"), creds("a", "b\rc"), creds("d", "e")],
        ),
        (b"a\0:b\n".to_vec(), vec![]),
        (b"".to_vec(), vec![]),
    ]
}

pub async fn memcached_reads_auth_files_as_the_operator_says(_env: Arc<Env>) {
    // memcached, switched to nobody, must read the file.
    let dir = readable_dir();
    for (index, (content, tries)) in corpus().into_iter().enumerate() {
        let path = dir.path().join(format!("authfile-{index}"));
        std::fs::write(&path, &content).expect("the file is written");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
            .expect("the file is readable");
        let said = read(&content);
        match (start(&path), &said) {
            (Outcome::Refused(why), Read::Malformed { .. }) => {
                assert!(why.contains("malformed"), "{content:?}: {why}");
            }
            (Outcome::Serving(_server, port), Read::Loaded { entries, .. }) => {
                for credentials in &tries {
                    assert_eq!(
                        authenticates(port, credentials),
                        entries.contains(credentials),
                        "{content:?}: memcached and read() disagree on {credentials:?}"
                    );
                }
            }
            (Outcome::Refused(why), said) => {
                panic!("{content:?}: memcached refused it ({why}); read() says {said:?}")
            }
            (Outcome::Serving(..), said) => {
                panic!("{content:?}: memcached serves with it; read() says {said:?}")
            }
        }
    }
}
