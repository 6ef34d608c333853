//! Shows the supervisor memcached runs under with authentication, with the real memcached
//! (Debian's, from `hack/tools.sh memcached`) as its child, and the auth file laid out as the
//! kubelet lays out a Secret's files (`authfile` → `..data/authfile`, `..data` a symlink to
//! the current version, swapped whole): a changed file memcached accepts reaches it (SIGHUP)
//! and its new credentials authenticate; a file memcached would refuse (a blank line) is
//! logged with its line and rule and never sent, so memcached keeps the credentials it has;
//! a SIGTERM stops memcached and the supervisor exits as memcached did.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use testkit::memcache::{PORT_FILE_VARIABLE, port_file_dir, readable_dir, reported_port};

use crate::auth_file::{authenticates, creds, running_as_root};
use crate::cluster::{Env, OPERATOR};

/// How often the supervisor reads the auth file here.
const INTERVAL: &str = "200ms";
/// How long a change may take to reach memcached: a few reads and memcached's 1 s tick.
const RELOAD: Duration = Duration::from_secs(10);

/// A Secret volume's directory, as the kubelet writes it.
struct SecretVolume {
    dir: tempfile::TempDir,
    versions: usize,
}

impl SecretVolume {
    fn new(content: &str) -> SecretVolume {
        // memcached, switched to nobody, reads the file.
        let dir = readable_dir();
        let mut volume = SecretVolume { dir, versions: 0 };
        volume.write(content);
        std::os::unix::fs::symlink("..data/authfile", volume.file()).expect("authfile");
        volume
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("authfile")
    }

    /// Writes a new version and swaps `..data` to it, as one rename.
    fn write(&mut self, content: &str) {
        self.versions += 1;
        let version = self.dir.path().join(format!("..version_{}", self.versions));
        std::fs::create_dir(&version).expect("a version directory");
        std::fs::set_permissions(
            &version,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("the version is readable");
        std::fs::write(version.join("authfile"), content).expect("the version's file");
        let link = self.dir.path().join("..data_tmp");
        std::os::unix::fs::symlink(&version, &link).expect("the new link");
        std::fs::rename(&link, self.dir.path().join("..data")).expect("..data swapped");
    }
}

/// The supervisor with memcached as its child; what it wrote.
struct Supervised {
    child: Child,
    port: u16,
    output: Arc<Mutex<String>>,
}

impl Drop for Supervised {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(auth_file: &Path) -> Supervised {
    let ports = port_file_dir();
    let port_file = ports.path().join("ports");
    let mut command = Command::new(OPERATOR.path());
    command
        .args(["supervise", &format!("--interval={INTERVAL}")])
        .arg(format!("--auth-file={}", auth_file.display()))
        .args(["--", "memcached", "-p", "-1", "-U", "0", "-l", "127.0.0.1"])
        .arg(format!("--auth-file={}", auth_file.display()))
        .env(PORT_FILE_VARIABLE, &port_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // memcached refuses to run as root without a user to switch to.
    if running_as_root() {
        command.args(["-u", "nobody"]);
    }
    let mut child = command.spawn().expect("the supervisor starts");
    let output = Arc::new(Mutex::new(String::new()));
    for pipe in [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    {
        let output = output.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut output = output.lock().unwrap_or_else(|e| e.into_inner());
                output.push_str(&line);
                output.push('\n');
            }
        });
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let port = loop {
        if let Some(port) = reported_port(&port_file) {
            break port;
        }
        if let Some(status) = child.try_wait().expect("the supervisor's status") {
            panic!(
                "the supervisor ended ({status}): {}",
                output.lock().unwrap_or_else(|e| e.into_inner())
            );
        }
        assert!(Instant::now() < deadline, "memcached never listened");
        std::thread::sleep(Duration::from_millis(20));
    };
    Supervised {
        child,
        port,
        output,
    }
}

fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + RELOAD;
    while !check() {
        assert!(Instant::now() < deadline, "{what} within {RELOAD:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub async fn the_supervisor_reloads_a_changed_auth_file_and_refuses_one_memcached_would_refuse(
    _env: Arc<Env>,
) {
    let mut volume = SecretVolume::new("before:old-password-1\n");
    let mut supervised = start(&volume.file());
    let port = supervised.port;
    let before = creds("before", "old-password-1");
    let after = creds("after", "new-password-2");
    let blank = creds("late", "blank-password-3");
    assert!(
        authenticates(port, &before),
        "memcached starts with the file"
    );
    assert!(!authenticates(port, &after));

    // A file memcached accepts: reread at once.
    let changed = Instant::now();
    volume.write("before:old-password-1\nafter:new-password-2\n");
    eventually("the new credentials accepted", || {
        authenticates(port, &after)
    });
    let took = changed.elapsed();

    // A blank line: memcached would keep its credentials without a word; the supervisor
    // never sends it, and says why.
    volume.write("after:new-password-2\n\nlate:blank-password-3\n");
    let said = "line 2 is blank";
    eventually("the refusal logged", || {
        supervised
            .output
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(said)
    });
    // Longer than a reload takes, had one been sent.
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        authenticates(port, &before),
        "memcached kept the credentials it had"
    );
    assert!(
        !authenticates(port, &blank),
        "the refused file never reached memcached"
    );

    // Fixed: reread, and the removed credentials are refused from then on.
    volume.write("after:new-password-2\n");
    eventually("the removed credentials refused", || {
        !authenticates(port, &before)
    });
    assert!(authenticates(port, &after));

    // SIGTERM is passed on: memcached stops, and the supervisor exits as it did.
    let status = Command::new("kill")
        .args(["-TERM", &supervised.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let code = loop {
        if let Some(status) = supervised.child.try_wait().expect("its status") {
            break status.code();
        }
        assert!(Instant::now() < deadline, "the supervisor did not end");
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = supervised
        .output
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let refusals: Vec<&str> = output.lines().filter(|line| line.contains(said)).collect();
    eprintln!(
        "supervisor: a changed auth file reached memcached in {:.1} s; the blank-line file was \
         refused ({} log line): {refusals:?}; after SIGTERM it exited with {code:?}",
        took.as_secs_f64(),
        refusals.len()
    );
    assert_eq!(refusals.len(), 1, "each refused content is reported once");
    assert!(
        refusals[0].contains("not sent"),
        "the refusal says memcached was not told: {}",
        refusals[0]
    );
    assert_eq!(
        code,
        Some(0),
        "memcached ends cleanly on SIGTERM, and so does the supervisor"
    );
}
