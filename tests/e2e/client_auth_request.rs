//! Shows what `clientAuth: Request` means with the real memcached (Debian's, from
//! `hack/tools.sh memcached`) at `ssl_verify_mode=1`: it asks for a client certificate, serves
//! a client that gives none and one whose certificate a CA of `ca.crt` signed, and refuses one
//! signed by another CA. The operator's certificate refresher, as in a pod with `Request` and
//! no `clientSecretName`, presents no certificate, and still brings a renewed certificate into
//! the running server.

use std::sync::Arc;
use std::time::Duration;

use testkit::memcache::readable_dir;
use testkit::pki::{Ca, KeyForm};

use crate::ca_change::{install, served, start_memcached, start_refresher};
use crate::cluster::{Env, eventually};

const WAIT: Duration = Duration::from_secs(30);

pub async fn under_request_a_client_without_a_certificate_is_served_and_a_strangers_is_refused(
    _env: Arc<Env>,
) {
    let (ca, stranger) = (Ca::root_named("cache CA"), Ca::root_named("another CA"));
    let (dir, public) = (readable_dir(), readable_dir());
    let first = ca.serving(KeyForm::EcPkcs8);
    install(dir.path(), public.path(), &first, &ca.pem);
    let (mut memcached, port, _ports) = start_memcached(dir.path(), 1).await;
    let _refresher = start_refresher(public.path(), None, port);

    let serial = eventually(
        "memcached serves a client without a certificate",
        WAIT,
        || async { served(port, &ca.pem, None).await.ok() },
    )
    .await;
    assert_eq!(serial, first.serial);
    let known = ca.client("request-client");
    assert_eq!(
        served(port, &ca.pem, Some(&known)).await,
        Ok(first.serial.clone()),
        "a client certificate the CA signed is verified and served"
    );
    let unknown = stranger.client("request-stranger");
    let refused = served(port, &ca.pem, Some(&unknown)).await;
    assert!(
        refused.is_err(),
        "a client certificate another CA signed is refused: {refused:?}"
    );

    // A renewal: the refresher, presenting no certificate, has the server load it.
    let second = ca.serving(KeyForm::EcPkcs8);
    install(dir.path(), public.path(), &second, &ca.pem);
    eventually(
        "memcached presents the renewed certificate",
        WAIT,
        || async {
            let serial = served(port, &ca.pem, None).await.ok()?;
            (serial == second.serial).then_some(())
        },
    )
    .await;
    assert_eq!(
        served(port, &ca.pem, Some(&known)).await,
        Ok(second.serial.clone())
    );
    assert!(
        served(port, &ca.pem, Some(&unknown)).await.is_err(),
        "still refused after the renewal"
    );
    assert!(
        memcached.try_wait().expect("memcached's status").is_none(),
        "memcached was never restarted"
    );
}
