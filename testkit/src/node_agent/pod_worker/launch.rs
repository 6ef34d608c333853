//! Starts a pod's containers: resolves the image through the table, gathers the environment
//! and the volume mounts from the spec, and launches the process in its sandbox, or records
//! why it cannot (an unknown image, a missing Secret key) as the kubelet would.

use super::*;

impl Worker {
    /// Starts a container unless it is backing off.
    pub(super) async fn start(&mut self, init: bool, index: usize) {
        let waiting = {
            let slot = if init {
                &self.init[index]
            } else {
                &self.containers[index]
            };
            slot.retry_at.is_some_and(|at| Instant::now() < at)
        };
        if waiting {
            return;
        }
        let prepared = self.prepare(init, index).await;
        let slot = if init {
            &mut self.init[index]
        } else {
            &mut self.containers[index]
        };
        match prepared {
            Ok((launch, image_id, held)) => match sandbox::spawn(&launch) {
                Ok(child) => {
                    let pgid = child.id().unwrap_or_default();
                    self.context.processes.add(pgid);
                    let namespace = std::fs::File::open(format!("/proc/{pgid}/ns/mnt"))
                        .ok()
                        .map(OwnedFd::from);
                    let started_at = jiff::Timestamp::now();
                    tracing::info!(container = %slot.spec.name, pid = pgid, program = %launch.program.display(), "container started");
                    slot.record.image_id = image_id;
                    slot.record.state = RunState::Running { started_at };
                    slot.record.started = slot.spec.startup_probe.is_none();
                    slot.record.ready = slot.spec.readiness_probe.is_none();
                    slot.retry_at = None;
                    let ip = self.pod_ip;
                    let probe_slot = |probe: &Option<k8s_openapi::api::core::v1::Probe>,
                                      initial: bool| {
                        let probe = probe.as_ref()?;
                        let action = probes::action(probe, &slot.spec, ip).ok()?;
                        let timings = Timings::of(probe);
                        Some(ProbeSlot {
                            action,
                            tracker: ProbeTracker::new(timings, initial),
                            due: Instant::now() + timings.initial_delay,
                            running: None,
                        })
                    };
                    if !init {
                        slot.readiness = probe_slot(&slot.spec.readiness_probe, false);
                        slot.liveness = probe_slot(&slot.spec.liveness_probe, true);
                        slot.startup = probe_slot(&slot.spec.startup_probe, false);
                    }
                    slot.process = Some(Process {
                        child,
                        pgid,
                        namespace,
                        held,
                        started_at,
                        started: Instant::now(),
                        mounts: launch
                            .mounts
                            .iter()
                            .map(|m| (m.target.clone(), m.source.clone()))
                            .collect(),
                        env: launch.env,
                    });
                }
                Err(error) => {
                    tracing::warn!(container = %slot.spec.name, %error, "container cannot start");
                    for h in &held {
                        self.context.mount_points.release(h);
                    }
                    slot.record.state = RunState::Waiting {
                        reason: "CreateContainerError".to_string(),
                        message: Some(error.to_string()),
                    };
                    slot.retry_at = Some(Instant::now() + slot.backoff);
                }
            },
            Err((reason, message)) => {
                tracing::warn!(container = %slot.spec.name, %reason, %message, "container cannot start");
                let next = if reason == "ErrImagePull"
                    && matches!(&slot.record.state, RunState::Waiting { reason, .. } if reason == "ErrImagePull" || reason == "ImagePullBackOff")
                {
                    "ImagePullBackOff"
                } else {
                    reason
                };
                slot.record.state = RunState::Waiting {
                    reason: next.to_string(),
                    message: Some(message),
                };
                slot.retry_at = Some(Instant::now() + slot.backoff);
                slot.backoff = (slot.backoff * 2).min(MAX_BACKOFF);
            }
        }
    }

    /// Resolves image, environment and mounts of a container; acquires its mount points.
    #[allow(clippy::type_complexity)]
    pub(super) async fn prepare(
        &mut self,
        init: bool,
        index: usize,
    ) -> Result<(Launch, String, Vec<Vec<PathBuf>>), (&'static str, String)> {
        let spec = if init {
            &self.init[index].spec
        } else {
            &self.containers[index].spec
        }
        .clone();
        let image = spec.image.clone().unwrap_or_default();
        // The image first, as the kubelet pulls before it makes the container's config.
        self.context
            .images
            .entry(&image)
            .map_err(|e| ("ErrImagePull", e.to_string()))?;
        let sources = self
            .env_sources(&spec)
            .await
            .map_err(|e| ("CreateContainerConfigError", e))?;
        let env = env::container_env(&self.pod, &spec, &sources)
            .map_err(|e| ("CreateContainerConfigError", e.to_string()))?;
        let lookup = |name: &str| {
            env.iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let command: Vec<String> = spec
            .command
            .iter()
            .flatten()
            .map(|a| env::expand(a, &lookup))
            .collect();
        let args: Vec<String> = spec
            .args
            .iter()
            .flatten()
            .map(|a| env::expand(a, &lookup))
            .collect();
        let volumes = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.clone())
            .unwrap_or_default();
        let mut mounts = Vec::new();
        for mount in spec.volume_mounts.iter().flatten() {
            let Some(volume) = volumes.iter().find(|v| v.name == mount.name) else {
                return Err((
                    "CreateContainerConfigError",
                    format!("volumeMount {:?}: no volume of that name", mount.name),
                ));
            };
            let mut source = self.volumes.host_path(volume);
            if let Some(sub) = mount.sub_path.as_deref().filter(|s| !s.is_empty()) {
                source = source.join(sub);
            }
            let always_read_only = volume.secret.is_some()
                || volume.config_map.is_some()
                || volume.projected.is_some()
                || volume.downward_api.is_some();
            mounts.push(Mount {
                source,
                target: PathBuf::from(&mount.mount_path),
                read_only: always_read_only || mount.read_only == Some(true),
            });
        }
        let volume_mounts: Vec<(PathBuf, PathBuf)> = mounts
            .iter()
            .map(|m| (m.target.clone(), m.source.clone()))
            .collect();
        let resolved = self
            .context
            .images
            .resolve(&image, &spec.name, &command, &args, &volume_mounts)
            .map_err(|e| ("ErrImagePull", e.to_string()))?;
        // The image's paths first, so that volumes mount over them as over an image.
        let mut image_mounts: Vec<Mount> = resolved
            .binds
            .iter()
            .map(|(in_image, host)| Mount {
                source: host.clone(),
                target: in_image.clone(),
                read_only: true,
            })
            .collect();
        image_mounts.append(&mut mounts);
        let mounts = image_mounts;
        let mut full_env = vec![("PATH".to_string(), resolved.path.clone())];
        full_env.push((
            "HOSTNAME".to_string(),
            self.pod.metadata.name.clone().unwrap_or_default(),
        ));
        for (k, v) in env {
            full_env.retain(|(n, _)| *n != k);
            full_env.push((k, v));
        }
        let mut held = Vec::new();
        for mount in &mounts {
            let file = mount.source.is_file();
            match self.context.mount_points.acquire(&mount.target, file) {
                Ok(h) => held.push(h),
                Err(error) => {
                    for h in &held {
                        self.context.mount_points.release(h);
                    }
                    return Err(("CreateContainerError", error.to_string()));
                }
            }
        }
        let logs = self.dir.join("logs");
        if let Err(error) = std::fs::create_dir_all(&logs) {
            for h in &held {
                self.context.mount_points.release(h);
            }
            return Err((
                "CreateContainerError",
                format!("cannot create {}: {error}", logs.display()),
            ));
        }
        let image_id = format!("{image}@host:{}", resolved.program.display());
        let user = self.run_as(&spec, resolved.user);
        Ok((
            Launch {
                program: resolved.program,
                argv: resolved.argv,
                env: full_env,
                // A container runtime starts the process in the image's WORKDIR, `/` when
                // the image sets none (none of the mapped images does): never in the agent's
                // own directory, where relative paths would reach the repository.
                working_dir: Some(PathBuf::from(spec.working_dir.as_deref().unwrap_or("/"))),
                user,
                mounts,
                pod_ip: self.pod_ip.to_string(),
                log: logs.join(format!("{}.log", spec.name)),
            },
            image_id,
            held,
        ))
    }

    /// The user and group a container runs as, as the kubelet decides them: `runAsUser` and
    /// `runAsGroup` of the container's securityContext, else the pod's, else the image's
    /// USER (its group when no runAsGroup is set); `None` runs it as the agent's user.
    fn run_as(&self, spec: &Container, image: Option<(u32, u32)>) -> Option<(u32, u32)> {
        let container = spec.security_context.as_ref();
        let pod = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.security_context.as_ref());
        let uid = container
            .and_then(|c| c.run_as_user)
            .or_else(|| pod.and_then(|p| p.run_as_user))
            .and_then(|uid| u32::try_from(uid).ok())
            .or(image.map(|(uid, _)| uid))?;
        let gid = container
            .and_then(|c| c.run_as_group)
            .or_else(|| pod.and_then(|p| p.run_as_group))
            .and_then(|gid| u32::try_from(gid).ok())
            .or(image.map(|(_, gid)| gid))
            .unwrap_or(0);
        Some((uid, gid))
    }

    /// Fetches the Secrets, ConfigMaps and Services a container's environment reads.
    pub(super) async fn env_sources(&mut self, spec: &Container) -> Result<EnvSources, String> {
        let client = &self.context.client;
        let namespace = self.namespace();
        let mut sources = self.env_sources_base();
        let mut secret_names = Vec::new();
        let mut map_names = Vec::new();
        for from in spec.env_from.iter().flatten() {
            secret_names.extend(from.secret_ref.as_ref().map(|s| s.name.clone()));
            map_names.extend(from.config_map_ref.as_ref().map(|m| m.name.clone()));
        }
        for var in spec.env.iter().flatten() {
            if let Some(from) = &var.value_from {
                secret_names.extend(from.secret_key_ref.as_ref().map(|s| s.name.clone()));
                map_names.extend(from.config_map_key_ref.as_ref().map(|m| m.name.clone()));
            }
        }
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
        for name in secret_names {
            if let Some(s) = secrets
                .get_opt(&name)
                .await
                .map_err(|e| format!("get secret {name}: {e}"))?
            {
                sources.secrets.insert(name, s);
            }
        }
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
        for name in map_names {
            if let Some(m) = maps
                .get_opt(&name)
                .await
                .map_err(|e| format!("get configmap {name}: {e}"))?
            {
                sources.config_maps.insert(name, m);
            }
        }
        let mut services = Vec::new();
        let links = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.enable_service_links)
            .unwrap_or(true);
        if links && namespace != "default" {
            let listed = Api::<Service>::namespaced(client.clone(), &namespace)
                .list(&ListParams::default())
                .await
                .map_err(|e| format!("list services in {namespace}: {e}"))?;
            services.extend(listed.items);
        }
        let defaults = Api::<Service>::namespaced(client.clone(), "default")
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("list services in default: {e}"))?;
        for service in defaults.items {
            let is_kubernetes = service.metadata.name.as_deref() == Some("kubernetes");
            if is_kubernetes || (links && namespace == "default") {
                services.push(service);
            }
        }
        sources.services = env::service_env(&services);
        Ok(sources)
    }
}
