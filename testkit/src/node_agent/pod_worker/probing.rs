//! Runs a container's startup, readiness and liveness probes on their schedule, collects
//! their results, and restarts a container whose liveness probe fails.

use super::*;

impl Worker {
    /// Starts due probes, collects finished ones, restarts a container whose liveness fails.
    pub(super) async fn probe(&mut self, index: usize) {
        let images = self.context.images.clone();
        let slot = &mut self.containers[index];
        let Some(process) = slot.process.as_ref() else {
            return;
        };
        let started = slot.record.started;
        let mut kill = false;
        let kinds: [(&mut Option<ProbeSlot>, bool); 3] = [
            (&mut slot.startup, !started),
            (&mut slot.liveness, started),
            (&mut slot.readiness, started),
        ];
        let mut results = [None, None, None];
        for (i, (probe, active)) in kinds.into_iter().enumerate() {
            let Some(probe) = probe.as_mut() else {
                continue;
            };
            if let Some(task) = &probe.running
                && task.is_finished()
            {
                let success = match probe.running.take() {
                    Some(task) => task.await.unwrap_or(false),
                    None => false,
                };
                results[i] = Some(probe.tracker.record(success));
            }
            if !active || probe.running.is_some() || Instant::now() < probe.due {
                continue;
            }
            let timings = probe.tracker.timings();
            probe.due = Instant::now() + timings.period;
            let action = probe.action.clone();
            let exec = match &action {
                ProbeAction::Exec(argv) => {
                    let resolved = images.resolve(
                        &slot.record.image,
                        &slot.spec.name,
                        argv,
                        &[],
                        &process.mounts,
                    );
                    let namespace = process
                        .namespace
                        .as_ref()
                        .and_then(|fd| fd.try_clone().ok());
                    Some((resolved, namespace, process.env.clone()))
                }
                _ => None,
            };
            probe.running = Some(tokio::spawn(async move {
                match exec {
                    Some((Ok(resolved), Some(namespace), env)) => matches!(
                        sandbox::exec_in(
                            &namespace,
                            &resolved.program,
                            &resolved.argv,
                            &env,
                            timings.timeout
                        )
                        .await,
                        Ok(Some(0))
                    ),
                    Some(_) => false,
                    None => probes::run_network(&action, timings.timeout).await,
                }
            }));
        }
        if let Some(passed) = results[0]
            && passed
        {
            slot.record.started = true;
        }
        if let Some(false) = results[1] {
            kill = true;
        }
        if let Some(ready) = results[2] {
            slot.record.ready = ready;
        }
        if kill {
            tracing::info!(container = %slot.spec.name, "liveness probe failed; restarting");
            if let Some(process) = slot.process.as_ref() {
                sandbox::signal_group(process.pgid, Signal::TERM);
            }
        }
    }
}
