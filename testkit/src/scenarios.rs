//! Runs end-to-end scenarios that share one expensive environment (a control plane, an
//! operator, an install through OLM) under libtest-mimic: one at a time, in the order given,
//! the environment started by the first scenario that runs and never for a listing or a run
//! that filters every scenario out. An environment that cannot start fails every scenario
//! with the reason; nothing is skipped. A suite that changes what the environment serves
//! (certificates, wiring, the operator's flags) hands [`run_restoring`] a way back to its
//! baseline, taken after a scenario fails, so that one failure is reported once and not
//! again by every scenario after it.
//!
//! Every scenario needs `.tools`, so a plain `cargo test` lists them as ignored; `make test`
//! runs them with `--ignored`.

use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Failed, Trial};
use tokio::runtime::Handle;

/// A scenario: an async function of the shared environment.
pub type Scenario<E> = fn(Arc<E>) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// Lists scenarios as `(name, Scenario)` pairs: `scenarios![module::function, ...]`.
#[macro_export]
macro_rules! scenarios {
    ($($module:ident :: $name:ident),* $(,)?) => {
        vec![$((
            stringify!($name),
            (|env| Box::pin($module::$name(env))) as $crate::scenarios::Scenario<_>,
        )),*]
    };
}

/// The environment every scenario shares, started by the first scenario that runs.
enum Shared<E> {
    /// No scenario has run yet.
    NotStarted,
    /// It runs.
    Running(Arc<E>),
    /// It could not start; the first scenario failed with the reason.
    Failed,
}

impl<E> Shared<E> {
    /// The running environment, started now by `start` if this is the first scenario.
    fn get<F, Fut>(&mut self, runtime: &Handle, start: F) -> Result<Arc<E>, Failed>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<E, String>>,
    {
        if let Shared::NotStarted = self {
            let began = Instant::now();
            let started = runtime.block_on(start());
            eprintln!("(the environment: {:.1} s)", began.elapsed().as_secs_f64());
            *self = match started {
                Ok(env) => Shared::Running(Arc::new(env)),
                Err(reason) => {
                    *self = Shared::Failed;
                    return Err(Failed::from(reason));
                }
            };
        }
        match self {
            Shared::Running(env) => Ok(env.clone()),
            _ => Err(Failed::from(
                "the shared environment did not start: see the first scenario's failure",
            )),
        }
    }
}

/// What puts a shared environment back to its baseline after a failed scenario: `Err` says
/// what could not be put back.
pub type Restore<E> = fn(Arc<E>) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// Runs `scenarios` (filtered by the command line) one at a time in order, each saying how
/// long it took once it passed, on an environment made by `start` (its start timed too),
/// drops the environment inside the runtime, and exits with libtest's code.
pub fn run<E, F, Fut>(start: F, scenarios: Vec<(&'static str, Scenario<E>)>) -> !
where
    E: Send + Sync + 'static,
    F: Fn() -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = Result<E, String>>,
{
    run_with(start, None, scenarios)
}

/// [`run`], and after a scenario fails (its future dropped, so the tasks it owned with it),
/// `restore` puts the environment back to the suite's baseline before the failure is
/// reported; what it could not put back is printed beside the failure.
pub fn run_restoring<E, F, Fut>(
    start: F,
    restore: Restore<E>,
    scenarios: Vec<(&'static str, Scenario<E>)>,
) -> !
where
    E: Send + Sync + 'static,
    F: Fn() -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = Result<E, String>>,
{
    run_with(start, Some(restore), scenarios)
}

fn run_with<E, F, Fut>(
    start: F,
    restore: Option<Restore<E>>,
    scenarios: Vec<(&'static str, Scenario<E>)>,
) -> !
where
    E: Send + Sync + 'static,
    F: Fn() -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = Result<E, String>>,
{
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => panic!("cannot start a tokio runtime: {error}"),
    };
    let shared = Arc::new(Mutex::new(Shared::NotStarted));
    let trials: Vec<Trial> = scenarios
        .into_iter()
        .map(|(name, scenario)| {
            let shared = shared.clone();
            let handle = runtime.handle().clone();
            let start = start.clone();
            Trial::test(name, move || {
                let env = shared
                    .lock()
                    .map_err(|_| {
                        Failed::from("a scenario panicked while starting the environment")
                    })?
                    .get(&handle, start)?;
                let began = Instant::now();
                let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
                    handle.block_on(scenario(env.clone()))
                }));
                if let Err(failure) = outcome {
                    if let Some(restore) = restore {
                        restore_after_failure(&handle, restore, env, name);
                    }
                    panic::resume_unwind(failure);
                }
                eprintln!("({name}: {:.1} s)", began.elapsed().as_secs_f64());
                Ok(())
            })
            // A plain `cargo test` ignores it: needs .tools (make test).
            .with_ignored_flag(true)
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    // Stops what the environment started (its Drop impls), inside the runtime.
    let shared = Arc::into_inner(shared).and_then(|shared| shared.into_inner().ok());
    runtime.block_on(async move { drop(shared) });
    conclusion.exit();
}

/// Puts the environment back after `name` failed, saying how it went.
fn restore_after_failure<E>(handle: &Handle, restore: Restore<E>, env: Arc<E>, name: &str) {
    let began = Instant::now();
    let restored = panic::catch_unwind(AssertUnwindSafe(|| handle.block_on(restore(env))));
    let secs = began.elapsed().as_secs_f64();
    match restored {
        Ok(Ok(())) => eprintln!("(after {name} failed, the environment was restored: {secs:.1} s)"),
        Ok(Err(what)) => {
            eprintln!("(after {name} failed, the environment could not be restored: {what})")
        }
        Err(failure) => eprintln!(
            "(after {name} failed, restoring the environment panicked: {})",
            panic_message(failure.as_ref())
        ),
    }
}

/// The message a panic carried, if it was a string.
fn panic_message(failure: &(dyn std::any::Any + Send)) -> &str {
    failure
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| failure.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message")
}

/// What one look of [`eventually`] found: the awaited value, or not yet, with what was seen
/// instead when the check can say (`Result<T, E>` with a displayable `E`; `Option<T>` says
/// nothing more).
pub trait Look<T> {
    /// `Ok` with the awaited value, or `Err` with what was seen instead, if anything.
    fn seen(self) -> Result<T, Option<String>>;
}

impl<T> Look<T> for Option<T> {
    fn seen(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

impl<T, E: std::fmt::Display> Look<T> for Result<T, E> {
    fn seen(self) -> Result<T, Option<String>> {
        self.map_err(|seen| Some(seen.to_string()))
    }
}

/// Polls `check` until it finds what is awaited, or panics after `within` naming `what` and
/// what the last look saw instead. A wait on an event, not a measure of the machine's speed:
/// `within` is a generous bound for a run on a loaded machine.
pub async fn eventually<T, L, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    L: Look<T>,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = L>,
{
    let start = Instant::now();
    let mut last = None;
    loop {
        match check().await.seen() {
            Ok(value) => return value,
            Err(seen) => last = seen.or(last),
        }
        if start.elapsed() >= within {
            match last {
                Some(seen) => panic!("{what}: not within {within:?}; last seen: {seen}"),
                None => panic!("{what}: not within {within:?}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wait_that_expires_names_what_it_saw_last() {
        let mut looks = 0;
        let waited = tokio::spawn(async move {
            eventually("three", Duration::from_millis(300), || {
                looks += 1;
                let seen = looks;
                async move { Err::<(), _>(format!("{seen} looks")) }
            })
            .await
        })
        .await;
        let panic = waited.expect_err("the wait expires").into_panic();
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            message.starts_with("three: not within 300ms; last seen: "),
            "{message}"
        );
        assert!(message.ends_with(" looks"), "{message}");
    }

    #[tokio::test]
    async fn a_wait_returns_what_it_awaited() {
        let mut looks = 0;
        let found = eventually("the third look", Duration::from_secs(60), || {
            looks += 1;
            let seen = looks;
            async move { (seen == 3).then_some(seen) }
        })
        .await;
        assert_eq!(found, 3);
    }
}
