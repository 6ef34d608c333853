//! Finds the credentials `generate --image-digests` reads a registry with, where podman,
//! skopeo, buildah and docker keep them after a `login`, in the order podman and skopeo look
//! (containers-auth.json(5)): the file given (`--registry-auth-file`, else `REGISTRY_AUTH_FILE`)
//! alone; else `$XDG_RUNTIME_DIR/containers/auth.json`, `~/.config/containers/auth.json`,
//! then docker's `config.json` (`$DOCKER_CONFIG`, or `~/.docker`), the first with an entry for
//! the registry. Each file is read by `docker_credential`, which also asks a credential helper
//! the file names (`credHelpers`, `credsStore`). No entry anywhere: the registry is read
//! anonymously.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use docker_credential::{CredentialRetrievalError, DockerCredential};
use oci_client::secrets::RegistryAuth;

/// Credentials that were found but cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A file that cannot be read, or whose entry for the registry cannot be used.
    #[error("cannot read the credentials for {host} in {}: {reason}", path.display())]
    Unusable {
        /// The registry.
        host: String,
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// An identity token (an OAuth2 refresh token), which the registry client cannot exchange.
    #[error(
        "the credentials for {host} in {} are an identity token, which cannot be used here: log in with a user and password (or a token as the password)",
        path.display()
    )]
    IdentityToken {
        /// The registry.
        host: String,
        /// The file.
        path: PathBuf,
    },
}

/// Where credentials are looked for when no file is given, in order.
fn default_files() -> Vec<PathBuf> {
    let env = |name| std::env::var_os(name).filter(|value| !value.is_empty());
    let mut files = Vec::new();
    if let Some(runtime) = env("XDG_RUNTIME_DIR") {
        files.push(PathBuf::from(runtime).join("containers/auth.json"));
    }
    let home = env("HOME").map(PathBuf::from);
    if let Some(home) = &home {
        files.push(home.join(".config/containers/auth.json"));
    }
    match env("DOCKER_CONFIG") {
        Some(dir) => files.push(PathBuf::from(dir).join("config.json")),
        None => {
            if let Some(home) = &home {
                files.push(home.join(".docker/config.json"));
            }
        }
    }
    files
}

/// The credentials for `host` in `path`, if it has an entry for it.
fn from_file(host: &str, path: &Path) -> Result<Option<RegistryAuth>, AuthError> {
    let unusable = |reason: String| AuthError::Unusable {
        host: host.to_string(),
        path: path.to_path_buf(),
        reason,
    };
    let file = File::open(path).map_err(|error| unusable(error.to_string()))?;
    match docker_credential::get_credential_from_reader(BufReader::new(file), host) {
        Ok(DockerCredential::UsernamePassword(user, password)) => {
            Ok(Some(RegistryAuth::Basic(user, password)))
        }
        Ok(DockerCredential::IdentityToken(_)) => Err(AuthError::IdentityToken {
            host: host.to_string(),
            path: path.to_path_buf(),
        }),
        Err(CredentialRetrievalError::NoCredentialConfigured) => Ok(None),
        Err(CredentialRetrievalError::ConfigReadError) => Err(unusable(
            "not a containers-auth.json or docker config.json file".to_string(),
        )),
        Err(error) => Err(unusable(error.to_string())),
    }
}

/// How to read `host` (`quay.io`, `127.0.0.1:5000`): its credentials and the file they came
/// from, or anonymously. `given` is the one file to read, when the user named one
/// (`REGISTRY_AUTH_FILE` otherwise, when set).
pub fn registry_auth(
    host: &str,
    given: Option<&Path>,
) -> Result<(RegistryAuth, Option<PathBuf>), AuthError> {
    let from_env = std::env::var_os("REGISTRY_AUTH_FILE")
        .filter(|value| !value.is_empty())
        .map(PathBuf::from);
    let files = match given.map(Path::to_path_buf).or(from_env) {
        Some(path) => vec![path],
        None => default_files()
            .into_iter()
            .filter(|path| path.is_file())
            .collect(),
    };
    for path in files {
        if let Some(auth) = from_file(host, &path)? {
            return Ok((auth, Some(path)));
        }
    }
    Ok((RegistryAuth::Anonymous, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("written");
        path
    }

    #[test]
    fn a_login_is_found_for_its_registry_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        // "pinner:not-a-secret", as podman login writes it.
        let path = write(
            dir.path(),
            "auth.json",
            r#"{"auths": {"127.0.0.1:5000": {"auth": "cGlubmVyOm5vdC1hLXNlY3JldA=="}}}"#,
        );
        let (auth, from) = registry_auth("127.0.0.1:5000", Some(&path)).expect("found");
        assert!(
            matches!(&auth, RegistryAuth::Basic(user, password) if user == "pinner" && password == "not-a-secret")
        );
        assert_eq!(from, Some(path.clone()));
        let (auth, from) = registry_auth("quay.io", Some(&path)).expect("read");
        assert!(matches!(auth, RegistryAuth::Anonymous));
        assert_eq!(from, None);
    }

    #[test]
    fn unusable_files_and_tokens_are_refused_naming_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let broken = write(dir.path(), "broken.json", "{not json");
        let error = registry_auth("quay.io", Some(&broken)).expect_err("refused");
        assert!(error.to_string().contains("broken.json"), "{error}");
        let missing = dir.path().join("missing.json");
        let error = registry_auth("quay.io", Some(&missing)).expect_err("refused");
        assert!(error.to_string().contains("missing.json"), "{error}");
        let token = write(
            dir.path(),
            "token.json",
            r#"{"auths": {"quay.io": {"identitytoken": "abc"}}}"#,
        );
        let error = registry_auth("quay.io", Some(&token)).expect_err("refused");
        assert!(error.to_string().contains("identity token"), "{error}");
        let bad = write(
            dir.path(),
            "bad.json",
            r#"{"auths": {"quay.io": {"auth": "not base64!"}}}"#,
        );
        let error = registry_auth("quay.io", Some(&bad)).expect_err("refused");
        assert!(error.to_string().contains("bad.json"), "{error}");
    }
}
