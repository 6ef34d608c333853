//! Maps container image references to things on this machine: which in-image paths are which
//! host files or directories, and the image's default entrypoint, command and `PATH`.
//!
//! The table is explicit: an image it does not list is refused with an error naming the image
//! (the pod worker reports it as `ErrImagePull`), never run from whatever happens to be
//! installed. It is built in code ([`ImageTable::local`]) or read from a JSON file, and may
//! name a directory of more JSON tables, read each time an image is looked up there, so that
//! a test can add an image (a new release's bundle and operator) to a running agent. It
//! resolves names only; starting processes is `sandbox`'s job.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The `PATH` of an image entry that names none (the usual one of Debian-based images).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Why an image or its program cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ImageError {
    /// The table has no entry for the image.
    #[error("image {image:?} is not in the node agent's image table (known: {known})")]
    Unknown {
        /// The image reference as the pod spells it.
        image: String,
        /// The references the table knows, comma-separated.
        known: String,
    },
    /// The entry maps a path to a host file that does not exist.
    #[error("image {image:?}: {in_image} maps to {}, which does not exist", .host.display())]
    Missing {
        /// The image reference.
        image: String,
        /// The path inside the image.
        in_image: String,
        /// The host path it maps to.
        host: PathBuf,
    },
    /// Neither the container nor the image says what to run.
    #[error("image {image:?}: container {container:?} has no command and the image no entrypoint")]
    NoCommand {
        /// The image reference.
        image: String,
        /// The container.
        container: String,
    },
    /// The program to run is not one of the image's paths.
    #[error("image {image:?} has no executable {program:?} (looked in {searched})")]
    NoExecutable {
        /// The image reference.
        image: String,
        /// The program as the container names it.
        program: String,
        /// The in-image paths looked at.
        searched: String,
    },
    /// The entry's user is not numeric `UID[:GID]`.
    #[error("image {image:?}: user {user:?} is not UID or UID:GID")]
    BadUser {
        /// The image reference.
        image: String,
        /// The user as the entry spells it.
        user: String,
    },
    /// The table file could not be read or parsed.
    #[error("image table {}: {message}", .path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// One image: what its paths are on this machine and what it runs by default.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageEntry {
    /// In-image absolute path -> host file or directory.
    #[serde(default)]
    pub paths: BTreeMap<String, PathBuf>,
    /// The image's ENTRYPOINT.
    #[serde(default)]
    pub entrypoint: Vec<String>,
    /// The image's CMD.
    #[serde(default)]
    pub cmd: Vec<String>,
    /// The image's `PATH`; [`DEFAULT_PATH`] when absent.
    #[serde(default)]
    pub path: Option<String>,
    /// The image's USER as numeric `UID` or `UID:GID` (the group defaults to the uid); a
    /// container runtime runs the process as it. Absent: root.
    #[serde(default)]
    pub user: Option<String>,
}

/// What a container runs, resolved against its image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedCommand {
    /// The host file to execute.
    pub program: PathBuf,
    /// argv, `argv[0]` as the container spelled it.
    pub argv: Vec<String>,
    /// The image's `PATH`, for the process environment.
    pub path: String,
    /// In-image path -> host path pairs to bind into the process's mount namespace (the
    /// entries whose host path differs from the in-image path).
    pub binds: Vec<(PathBuf, PathBuf)>,
    /// The image's user and group ids, when it names a USER.
    pub user: Option<(u32, u32)>,
}

/// Image reference (`repository[:tag]`, as pods spell it) -> entry.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct ImageTable {
    images: BTreeMap<String, ImageEntry>,
    /// A directory of more tables (`*.json`), read at each lookup of an image not above.
    #[serde(skip)]
    more: Option<PathBuf>,
}

impl ImageTable {
    /// An empty table.
    pub fn new() -> ImageTable {
        ImageTable::default()
    }

    /// Adds (or replaces) the entry of `image`.
    pub fn with(mut self, image: &str, entry: ImageEntry) -> ImageTable {
        self.images.insert(image.to_string(), entry);
        self
    }

    /// Reads a table from a JSON file: `{"IMAGE": {"paths": {...}, "entrypoint": [...],
    /// "cmd": [...], "path": "..."}}`.
    pub fn from_file(path: &Path) -> Result<ImageTable, ImageError> {
        let text = std::fs::read_to_string(path).map_err(|error| ImageError::File {
            path: path.to_path_buf(),
            message: error.to_string(),
        })?;
        serde_json::from_str(&text).map_err(|error| ImageError::File {
            path: path.to_path_buf(),
            message: error.to_string(),
        })
    }

    /// Also looks images up in every `*.json` table in `dir` (in name order; the first that
    /// lists an image wins), read again at each lookup. The directory may be empty or absent.
    pub fn with_more_in(mut self, dir: &Path) -> ImageTable {
        self.more = Some(dir.to_path_buf());
        self
    }

    /// The tables in the `more` directory, in name order.
    fn more_tables(&self) -> Result<Vec<ImageTable>, ImageError> {
        let Some(dir) = &self.more else {
            return Ok(Vec::new());
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(Vec::new());
        };
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        files
            .iter()
            .map(|file| ImageTable::from_file(file))
            .collect()
    }

    /// The entry of `image`, or the error naming it.
    pub fn entry(&self, image: &str) -> Result<ImageEntry, ImageError> {
        if let Some(entry) = self.images.get(image) {
            return Ok(entry.clone());
        }
        let more = self.more_tables()?;
        if let Some(entry) = more.iter().find_map(|table| table.images.get(image)) {
            return Ok(entry.clone());
        }
        let known: Vec<String> = self
            .images
            .keys()
            .chain(more.iter().flat_map(|table| table.images.keys()))
            .cloned()
            .collect();
        Err(ImageError::Unknown {
            image: image.to_string(),
            known: known.join(", "),
        })
    }

    /// What `container` runs in `image`, as the kubelet and container runtime decide it:
    /// `command` replaces the entrypoint and then drops the image's CMD, `args` replaces CMD;
    /// a program without a slash is searched for along the image's `PATH`. `mounts` are the
    /// container's volume mounts (mount path, host directory): a program under one of them
    /// (say `/util/cpb`, copied into an emptyDir by an init container) is the volume's file,
    /// as the mount hides the image's own.
    pub fn resolve(
        &self,
        image: &str,
        container: &str,
        command: &[String],
        args: &[String],
        mounts: &[(PathBuf, PathBuf)],
    ) -> Result<ResolvedCommand, ImageError> {
        let entry = self.entry(image)?;
        for (in_image, host) in &entry.paths {
            if !host.exists() {
                return Err(ImageError::Missing {
                    image: image.to_string(),
                    in_image: in_image.clone(),
                    host: host.clone(),
                });
            }
        }
        let argv: Vec<String> = match (command.is_empty(), args.is_empty()) {
            (false, _) => command.iter().chain(args).cloned().collect(),
            (true, false) => entry.entrypoint.iter().chain(args).cloned().collect(),
            (true, true) => entry.entrypoint.iter().chain(&entry.cmd).cloned().collect(),
        };
        let Some(program) = argv.first() else {
            return Err(ImageError::NoCommand {
                image: image.to_string(),
                container: container.to_string(),
            });
        };
        let path = entry
            .path
            .clone()
            .unwrap_or_else(|| DEFAULT_PATH.to_string());
        let candidates: Vec<String> = if program.contains('/') {
            vec![program.clone()]
        } else {
            path.split(':')
                .filter(|dir| !dir.is_empty())
                .map(|dir| format!("{}/{program}", dir.trim_end_matches('/')))
                .collect()
        };
        let image_paths: Vec<(PathBuf, PathBuf)> = entry
            .paths
            .iter()
            .map(|(in_image, host)| (PathBuf::from(in_image), host.clone()))
            .collect();
        let host = candidates
            .iter()
            .find_map(|candidate| {
                under(mounts, Path::new(candidate))
                    .filter(|host| host.exists())
                    .or_else(|| under(&image_paths, Path::new(candidate)))
            })
            .ok_or_else(|| ImageError::NoExecutable {
                image: image.to_string(),
                program: program.clone(),
                searched: candidates.join(", "),
            })?;
        let binds = entry
            .paths
            .iter()
            .filter(|(in_image, host)| Path::new(in_image.as_str()) != host.as_path())
            .map(|(in_image, host)| (PathBuf::from(in_image), host.clone()))
            .collect();
        let user = entry
            .user
            .as_deref()
            .map(|user| parse_user(image, user))
            .transpose()?;
        Ok(ResolvedCommand {
            program: host,
            argv,
            path,
            binds,
            user,
        })
    }

    /// The images this repository's pods use, mapped to this machine: the operator image to
    /// `operator` (the built binary), `memcached:*` images to Debian's memcached, the bundle
    /// image to `bundle/`, OLM's util image to `.tools/bin/cpb` and `/bin/cp`, and the opm
    /// image to `.tools/bin/opm`. `images` names the references: (operator, memcached,
    /// bundle, util, opm).
    pub fn local(repository: &Path, operator: &Path, images: &LocalImages) -> ImageTable {
        let tools = repository.join(".tools/bin");
        let mut table = ImageTable::new();
        table = table.with(
            &images.operator,
            ImageEntry {
                paths: BTreeMap::from([(
                    "/usr/local/bin/memcached-operator".to_string(),
                    operator.to_path_buf(),
                )]),
                entrypoint: vec!["/usr/local/bin/memcached-operator".to_string()],
                // The Dockerfile's USER.
                user: Some("65532:65532".to_string()),
                ..ImageEntry::default()
            },
        );
        for memcached in &images.memcached {
            table = table.with(
                memcached,
                ImageEntry {
                    paths: BTreeMap::from([(
                        "/usr/bin/memcached".to_string(),
                        PathBuf::from("/usr/bin/memcached"),
                    )]),
                    entrypoint: vec!["memcached".to_string()],
                    // The memcached images' USER memcache (uid and gid 11211): memcached
                    // refuses to run as root.
                    user: Some("11211:11211".to_string()),
                    ..ImageEntry::default()
                },
            );
        }
        table = table.with(
            &images.bundle,
            ImageEntry {
                paths: BTreeMap::from([
                    (
                        "/manifests".to_string(),
                        repository.join("bundle/manifests"),
                    ),
                    ("/metadata".to_string(), repository.join("bundle/metadata")),
                ]),
                ..ImageEntry::default()
            },
        );
        table = table.with(
            &images.util,
            ImageEntry {
                paths: BTreeMap::from([
                    ("/bin/cpb".to_string(), tools.join("cpb")),
                    ("/bin/cp".to_string(), PathBuf::from("/bin/cp")),
                ]),
                ..ImageEntry::default()
            },
        );
        table.with(
            &images.opm,
            ImageEntry {
                paths: BTreeMap::from([("/bin/opm".to_string(), tools.join("opm"))]),
                entrypoint: vec!["/bin/opm".to_string()],
                ..ImageEntry::default()
            },
        )
    }
}

/// `UID` or `UID:GID`, numeric.
fn parse_user(image: &str, user: &str) -> Result<(u32, u32), ImageError> {
    let bad = || ImageError::BadUser {
        image: image.to_string(),
        user: user.to_string(),
    };
    let (uid, gid) = match user.split_once(':') {
        Some((uid, gid)) => (uid, Some(gid)),
        None => (user, None),
    };
    let uid: u32 = uid.parse().map_err(|_| bad())?;
    let gid: u32 = match gid {
        Some(gid) => gid.parse().map_err(|_| bad())?,
        None => uid,
    };
    Ok((uid, gid))
}

/// The host path of `path` through the longest of `maps` (in-container path -> host path)
/// that is `path` or one of its parent directories.
fn under(maps: &[(PathBuf, PathBuf)], path: &Path) -> Option<PathBuf> {
    maps.iter()
        .filter_map(|(inside, host)| {
            let rest = path.strip_prefix(inside).ok()?;
            // `join("")` would add a trailing slash, which exec refuses for a file.
            let host = if rest.as_os_str().is_empty() {
                host.clone()
            } else {
                host.join(rest)
            };
            Some((inside.components().count(), host))
        })
        .max_by_key(|(depth, _)| *depth)
        .map(|(_, host)| host)
}

/// The references of the images [`ImageTable::local`] maps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalImages {
    /// The operator's image.
    pub operator: String,
    /// memcached images (the operator's default and any a test uses).
    pub memcached: Vec<String>,
    /// The bundle image.
    pub bundle: String,
    /// OLM's util image (`--util-image`).
    pub util: String,
    /// The opm image (`--opmImage`).
    pub opm: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> ImageTable {
        ImageTable::new().with(
            "docker.io/library/memcached:1.6",
            ImageEntry {
                paths: BTreeMap::from([(
                    "/usr/local/bin/memcached".to_string(),
                    PathBuf::from("/bin/sh"),
                )]),
                entrypoint: vec!["memcached".to_string()],
                cmd: vec!["-m".to_string(), "64".to_string()],
                path: Some("/usr/local/bin:/usr/bin".to_string()),
                user: Some("11211".to_string()),
            },
        )
    }

    #[test]
    fn the_image_user_is_resolved_with_its_group_defaulting_to_the_uid() {
        let resolved = table()
            .resolve("docker.io/library/memcached:1.6", "c", &[], &[], &[])
            .unwrap();
        assert_eq!(resolved.user, Some((11211, 11211)));
        assert_eq!(parse_user("i", "1000:2000"), Ok((1000, 2000)));
        assert!(matches!(
            parse_user("i", "memcache"),
            Err(ImageError::BadUser { .. })
        ));
    }

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn an_image_missing_from_the_table_is_refused_with_its_name() {
        let error = table()
            .resolve("quay.io/other:1", "main", &[], &[], &[])
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "image \"quay.io/other:1\" is not in the node agent's image table \
             (known: docker.io/library/memcached:1.6)"
        );
    }

    #[test]
    fn without_command_or_args_the_entrypoint_and_cmd_run() {
        let resolved = table()
            .resolve("docker.io/library/memcached:1.6", "main", &[], &[], &[])
            .unwrap();
        assert_eq!(resolved.argv, strings(&["memcached", "-m", "64"]));
        // Compared as strings: paths compare by components, "/bin/sh/" equals "/bin/sh".
        assert_eq!(resolved.program.as_os_str(), "/bin/sh");
        assert_eq!(
            resolved.binds,
            vec![(
                PathBuf::from("/usr/local/bin/memcached"),
                PathBuf::from("/bin/sh")
            )]
        );
    }

    #[test]
    fn args_replace_cmd_and_command_replaces_both() {
        let t = table();
        let image = "docker.io/library/memcached:1.6";
        let args = strings(&["-p", "1"]);
        let with_args = t.resolve(image, "main", &[], &args, &[]).unwrap();
        assert_eq!(with_args.argv, strings(&["memcached", "-p", "1"]));
        let command = strings(&["/usr/local/bin/memcached"]);
        let with_command = t.resolve(image, "main", &command, &[], &[]).unwrap();
        assert_eq!(with_command.argv, strings(&["/usr/local/bin/memcached"]));
    }

    #[test]
    fn a_program_the_image_does_not_hold_is_refused_naming_where_it_looked() {
        let error = table()
            .resolve(
                "docker.io/library/memcached:1.6",
                "main",
                &strings(&["sh"]),
                &[],
                &[],
            )
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "image \"docker.io/library/memcached:1.6\" has no executable \"sh\" \
             (looked in /usr/local/bin/sh, /usr/bin/sh)"
        );
    }

    #[test]
    fn an_entry_whose_host_file_is_missing_makes_the_image_unusable() {
        let t = ImageTable::new().with(
            "util:1",
            ImageEntry {
                paths: BTreeMap::from([(
                    "/bin/cpb".to_string(),
                    PathBuf::from("/nonexistent/cpb"),
                )]),
                ..ImageEntry::default()
            },
        );
        let error = t
            .resolve("util:1", "util", &strings(&["/bin/cpb"]), &[], &[])
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "image \"util:1\": /bin/cpb maps to /nonexistent/cpb, which does not exist"
        );
    }

    #[test]
    fn a_program_under_a_volume_mount_is_the_volumes_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cpb"), "").unwrap();
        let bundle = ImageTable::new().with(
            "bundle:1",
            ImageEntry {
                paths: BTreeMap::from([("/manifests".to_string(), PathBuf::from("/"))]),
                ..ImageEntry::default()
            },
        );
        let mounts = [(PathBuf::from("/util"), dir.path().to_path_buf())];
        let command = strings(&["/util/cpb", "/bundle"]);
        let resolved = bundle
            .resolve("bundle:1", "pull", &command, &[], &mounts)
            .unwrap();
        assert_eq!(resolved.program, dir.path().join("cpb"));
        assert_eq!(resolved.argv, command);
    }

    #[test]
    fn the_local_table_refuses_the_util_image_when_cpb_is_not_built() {
        let repository = tempfile::tempdir().unwrap();
        let images = LocalImages {
            operator: "operator:1".into(),
            memcached: vec!["memcached:1".into()],
            bundle: "bundle:1".into(),
            util: "util:1".into(),
            opm: "opm:1".into(),
        };
        let table = ImageTable::local(repository.path(), Path::new("/bin/true"), &images);
        let copy = strings(&["/bin/cp", "-Rv", "/bin/cpb", "/util/cpb"]);
        let error = table
            .resolve("util:1", "util", &copy, &[], &[])
            .unwrap_err();
        let cpb = repository.path().join(".tools/bin/cpb");
        assert_eq!(
            error.to_string(),
            format!(
                "image \"util:1\": /bin/cpb maps to {}, which does not exist",
                cpb.display()
            )
        );
        let operator = table.resolve("operator:1", "manager", &[], &strings(&["run"]), &[]);
        assert_eq!(
            operator.unwrap().argv,
            strings(&["/usr/local/bin/memcached-operator", "run"])
        );
    }

    #[test]
    fn a_table_reads_from_json() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("images.json");
        std::fs::write(
            &file,
            r#"{"memcached:1": {"paths": {"/usr/bin/memcached": "/bin/true"}, "entrypoint": ["memcached"]}}"#,
        )
        .unwrap();
        let t = ImageTable::from_file(&file).unwrap();
        let resolved = t.resolve("memcached:1", "main", &[], &[], &[]).unwrap();
        assert_eq!(resolved.program, PathBuf::from("/bin/true"));
    }

    #[test]
    fn images_added_to_the_more_directory_are_found_without_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let t = ImageTable::new().with_more_in(dir.path());
        let unknown = t.entry("bundle:v2").unwrap_err();
        assert!(matches!(unknown, ImageError::Unknown { .. }), "{unknown}");
        std::fs::write(
            dir.path().join("upgrade.json"),
            r#"{"bundle:v2": {"paths": {"/manifests": "/tmp"}}}"#,
        )
        .unwrap();
        assert_eq!(
            t.entry("bundle:v2").unwrap().paths.get("/manifests"),
            Some(&PathBuf::from("/tmp"))
        );
        std::fs::write(dir.path().join("broken.json"), "{").unwrap();
        let broken = t.entry("bundle:v3").unwrap_err();
        assert!(broken.to_string().contains("broken.json"), "{broken}");
    }
}
