//! Runs end-to-end scenarios that share one expensive environment (a control plane, an
//! operator, an install through OLM) under libtest-mimic: one at a time, in the order given,
//! the environment started by the first scenario that runs and never for a listing or a run
//! that filters every scenario out. An environment that cannot start fails every scenario
//! with the reason; nothing is skipped.
//!
//! Every scenario needs `.tools`, so a plain `cargo test` lists them as ignored; `make test`
//! runs them with `--ignored`.

use std::future::Future;
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
            *self = match runtime.block_on(start()) {
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

/// Runs `scenarios` (filtered by the command line) one at a time in order, on an environment
/// made by `start`, drops the environment inside the runtime, and exits with libtest's code.
pub fn run<E, F, Fut>(start: F, scenarios: Vec<(&'static str, Scenario<E>)>) -> !
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
                handle.block_on(scenario(env));
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

/// Polls `check` until it returns `Some`, or panics naming `what` after `within`.
pub async fn eventually<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
