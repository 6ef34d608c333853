//! Shows the supervisor's restart in place for a withdrawn client CA, with the real memcached
//! (Debian's) as its child and a memory file: a request whose `ca.crt` has not arrived yet is
//! waited for; once the file has the requested digest, the supervisor records the request,
//! stops memcached with SIGUSR1 (which saves its items) and exits cleanly, as the container
//! then ends; the next supervisor, given the same request, starts memcached, which restores
//! the items, and does not restart it again.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memcached_operator::sidecar::ca_restart::digest;
use testkit::memcache::{Connection, PORT_FILE_VARIABLE, port_file_dir, reported_port};

use crate::auth_file::running_as_root;
use crate::cluster::{Env, OPERATOR};

/// How long the supervisor may take to act on a request here: a few reads (every 200 ms) and
/// memcached's save of 64 MiB.
const ACT: Duration = Duration::from_secs(20);

/// The supervisor, with memcached keeping its items in `dir/memory_file`.
fn start(dir: &Path) -> (Child, u16) {
    let port_file = dir.join("ports");
    let _ = std::fs::remove_file(&port_file);
    let mut command = Command::new(OPERATOR.path());
    command
        .args(["supervise", "--interval=200ms", "--warm-restart"])
        .arg(format!(
            "--client-ca-request={}",
            dir.join("request").display()
        ))
        .arg(format!("--client-ca={}", dir.join("ca.crt").display()))
        .arg(format!(
            "--restarted-file={}",
            dir.join("restarted").display()
        ))
        .args([
            "--",
            "memcached",
            "-p",
            "-1",
            "-U",
            "0",
            "-l",
            "127.0.0.1",
            "-m",
            "64",
        ])
        .arg(format!(
            "--memory-file={}",
            dir.join("memory_file").display()
        ))
        .env(PORT_FILE_VARIABLE, &port_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if running_as_root() {
        command.args(["-u", "nobody"]);
    }
    let mut child = command.spawn().expect("the supervisor starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    let port = loop {
        if let Some(port) = reported_port(&port_file) {
            break port;
        }
        if let Some(status) = child.try_wait().expect("the supervisor's status") {
            panic!("the supervisor ended ({status}) before memcached listened");
        }
        assert!(Instant::now() < deadline, "memcached never listened");
        std::thread::sleep(Duration::from_millis(20));
    };
    (child, port)
}

/// The supervisor's exit code, if it ends within `limit`.
fn ended_within(child: &mut Child, limit: Duration) -> Option<Option<i32>> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("its status") {
            return Some(status.code());
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

async fn connect(port: u16) -> Connection {
    Connection::open(([127, 0, 0, 1], port).into(), None)
        .await
        .expect("memcached answers")
}

pub async fn the_supervisor_restarts_memcached_warm_once_per_request_for_a_withdrawn_ca(
    _env: Arc<Env>,
) {
    let dir = port_file_dir();
    let dir = dir.path();
    let (old, new) = ("one and two\n", "two\n");
    std::fs::write(dir.join("ca.crt"), old).expect("ca.crt");
    std::fs::write(dir.join("request"), "").expect("no request");
    let (mut first, port) = start(dir);
    connect(port)
        .await
        .set("kept", "across the restart")
        .await
        .expect("an item is set");

    // Asked for a ca.crt that has not arrived: the supervisor waits.
    std::fs::write(dir.join("request"), digest(new.as_bytes())).expect("the request");
    assert_eq!(
        ended_within(&mut first, Duration::from_secs(2)),
        None,
        "memcached runs on while ca.crt is not the requested one"
    );
    // The kubelet brings it: the supervisor restarts memcached, saving its items.
    let arrived = Instant::now();
    std::fs::write(dir.join("ca.crt"), new).expect("the new ca.crt");
    let code = ended_within(&mut first, ACT);
    let took = arrived.elapsed();
    let recorded = std::fs::read_to_string(dir.join("restarted")).unwrap_or_default();

    // The container starts again with the same request: memcached restores the items, and is
    // not stopped again.
    let (mut second, port) = start(dir);
    let item = connect(port).await.get("kept").await;
    let again = ended_within(&mut second, Duration::from_secs(2));
    let _ = second.kill();
    let _ = second.wait();
    eprintln!(
        "supervisor: stopped memcached {:.1} s after ca.crt had the requested digest, exit \
         code {code:?}; recorded {:?}; after the restart the item is {item:?}; the next \
         supervisor ended within 2 s: {again:?}",
        took.as_secs_f64(),
        recorded.trim()
    );
    assert_eq!(
        code,
        Some(Some(0)),
        "memcached saved and ended, and so did the supervisor"
    );
    assert_eq!(
        recorded.trim(),
        digest(new.as_bytes()),
        "the request is recorded"
    );
    assert_eq!(
        item,
        Ok(Some("across the restart".into())),
        "the items survive the restart"
    );
    assert_eq!(again, None, "a request acted on is not acted on again");
}
